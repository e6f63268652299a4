//! [`DeviceError`], the one error type of the verbs API.

use thiserror::Error;

use crate::driver::DriverError;
use crate::nic::{LoaderError, NetnsError};
use crate::rc::VerbsError;

/// Errors of the verbs API.
#[derive(Debug, Error)]
pub enum DeviceError {
    #[error(transparent)]
    Loader(#[from] LoaderError),
    #[error(transparent)]
    Driver(#[from] DriverError),
    #[error(transparent)]
    Attach(#[from] crate::attach::AttachError),
    #[error(transparent)]
    Netns(#[from] NetnsError),
    #[error("{0}")]
    Verbs(#[from] VerbsError),
    #[error("queue {0} does not exist (the device has {1})")]
    NoSuchQueue(u32, u32),
    #[error("the engine thread of queue {0} did not answer (stopped or stuck)")]
    EngineGone(u32),
    #[error("registering memory failed: {0}")]
    Memory(std::io::Error),
    #[error("the work queue of queue {0} is full: poll completions first")]
    WouldBlock(u32),
    #[error("queue {0} is driven by another thread (run-to-completion): one thread drives a queue at a time")]
    Driven(u32),
    #[error("this engine is attached to the interface's roce-xdp service, which owns the XDP program and its counters (`roce-xdp stats --iface IF` shows them)")]
    Attached,
    #[error("queue {0} is driven by this thread (run-to-completion): create, connect and register before driving it, or drop the DrivenQueue first")]
    ControlWhileDriven(u32),
}

//! Why a measurement failed: [`HarnessError`] for the harness's steps,
//! and the helpers that put what was being done in front of an error.

use std::fmt::Display;

use thiserror::Error;

/// Why the harness could not run.
#[derive(Debug, Error)]
pub enum HarnessError {
    #[error(
        "the benchmark harness needs root (network namespaces, XDP, AF_XDP): run it with sudo"
    )]
    NotRoot,
    #[error(transparent)]
    Netns(#[from] engine::nic::NetnsError),
    #[error("{what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
    #[error("AF_XDP floor: {0}")]
    Floor(String),
    #[error("engine: {0}")]
    Engine(String),
    #[error("a measurement thread panicked: {0}")]
    Panicked(String),
}

/// Puts `what` in front of an I/O error: `.map_err(io_err("binding the
/// UDP receiver"))`.
pub(crate) fn io_err(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> HarnessError {
    let what = what.into();
    move |source| HarnessError::Io { what, source }
}

/// How an engine measurement fails: a sentence that says what was being
/// done and why it failed (it goes to the report's `missing` as it is).
pub type EngineResult<T> = Result<T, String>;

/// Puts `what` in front of an error: `.map_err(context("opening device
/// a"))` gives `opening device a: <the error>`.
pub fn context<E: Display>(what: &'static str) -> impl Fn(E) -> String {
    move |err| format!("{what}: {err}")
}

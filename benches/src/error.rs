//! Why a measurement failed: [`HarnessError`] for the harness's steps,
//! and the helpers that put what was being done in front of an error.

use thiserror::Error;

/// Why the harness could not run.
#[derive(Debug, Error)]
pub enum HarnessError {
    #[error(
        "the benchmark harness needs root (network namespaces, XDP, AF_XDP): run it with sudo"
    )]
    NotRoot,
    #[error(transparent)]
    Netns(#[from] engine::netns::NetnsError),
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

pub(crate) fn io_err(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> HarnessError {
    let what = what.into();
    move |source| HarnessError::Io { what, source }
}

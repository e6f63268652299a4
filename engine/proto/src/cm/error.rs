//! Errors of the CM agent's calls.

use core::fmt;

/// Why a CM call was refused. Nothing changed (nothing sent) when one is
/// returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CmError {
    /// No connection with this ID (never existed, or destroyed / gone).
    UnknownConn,
    /// No listener with this ID.
    UnknownListener,
    /// The connection's state does not allow this call (the kernel's
    /// `-EINVAL` from ib_send_cm_*).
    InvalidState,
    /// The service ID already has a listener (`EADDRINUSE`).
    AddressInUse,
    /// The private data is longer than the message carries (`EINVAL`).
    PrivateDataTooLong,
    /// Too many connections on this agent (`ENOMEM`).
    TooManyConnections,
    /// An argument is out of range; the text says which (`EINVAL`).
    InvalidArgument(&'static str),
}

impl fmt::Display for CmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CmError::UnknownConn => write!(f, "unknown CM connection"),
            CmError::UnknownListener => write!(f, "unknown CM listener"),
            CmError::InvalidState => {
                write!(f, "the CM connection's state does not allow this call")
            }
            CmError::AddressInUse => write!(f, "the service ID already has a listener"),
            CmError::PrivateDataTooLong => {
                write!(f, "private data longer than the CM message carries")
            }
            CmError::TooManyConnections => write!(f, "too many CM connections"),
            CmError::InvalidArgument(what) => write!(f, "invalid argument: {what}"),
        }
    }
}

impl std::error::Error for CmError {}

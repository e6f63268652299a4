//! Errors of the verbs-style calls (posting, modifying, registering).

use core::fmt;

/// Why a verbs call was refused. Nothing changed when one is returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum VerbsError {
    /// No QP with this number on this endpoint.
    UnknownQp,
    /// No CQ with this id on this endpoint.
    UnknownCq,
    /// The QP's state does not allow this call (e.g. post_send before RTS).
    InvalidState,
    /// The requested state transition is not in the verbs state machine.
    InvalidTransition,
    /// A required attribute is missing from the mask.
    MissingAttribute,
    /// An attribute or argument is out of range; the text says which.
    InvalidArgument(&'static str),
    /// The work queue is full: poll completions first.
    QueueFull,
    /// The local key is unknown or the buffer lies outside its region or
    /// lacks the rights the operation needs.
    LocalProtection,
    /// Too many QPs or memory regions.
    ResourceExhausted,
    /// No shared receive queue with this id on this endpoint.
    UnknownSrq,
    /// The object is in use: a shared receive queue that QPs still take
    /// their receives from (verbs `EBUSY`).
    Busy,
}

impl fmt::Display for VerbsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VerbsError::UnknownQp => write!(f, "unknown QP number"),
            VerbsError::UnknownCq => write!(f, "unknown completion queue"),
            VerbsError::InvalidState => write!(f, "the QP's state does not allow this call (connect it to RTS first)"),
            VerbsError::InvalidTransition => write!(f, "QP state transition not allowed (RESET->INIT->RTR->RTS, any->ERROR/RESET)"),
            VerbsError::MissingAttribute => write!(f, "a required QP attribute is missing from the mask (INIT->RTR needs DEST_QPN, RQ_PSN, AV; RTR->RTS needs SQ_PSN)"),
            VerbsError::InvalidArgument(what) => write!(f, "invalid argument: {what}"),
            VerbsError::QueueFull => write!(f, "work queue full: poll completions before posting more"),
            VerbsError::LocalProtection => write!(f, "local buffer not inside a registered region with the needed rights"),
            VerbsError::ResourceExhausted => write!(f, "too many QPs or memory regions"),
            VerbsError::UnknownSrq => write!(f, "unknown shared receive queue"),
            VerbsError::Busy => write!(f, "in use: QPs still take their receives from the shared receive queue"),
        }
    }
}

impl std::error::Error for VerbsError {}

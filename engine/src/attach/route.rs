//! Where the service sends a frame, and what it accepts from a process:
//! pure functions of the frame's bytes (no state, no I/O), so that every
//! rule is tested on hand-built frames.
//!
//! - A frame's **destination** is the process whose block of QP numbers
//!   holds its BTH destination QP ([`super::protocol::qpn_block`]). QP 1,
//!   the connection manager's, is in no process's block: a MAD for it goes
//!   to the process listening on the service it asks for (REQ, SIDR_REQ),
//!   or to the one whose communication IDs have its ID's top byte
//!   ([`Destination::Gsi`], [`proto::cm::mad_owner`]).
//! - A frame **from a process** must be a RoCE v2 frame (every header and
//!   length as the receive path checks them, the ICRC aside: the receiver
//!   checks that), sent from the interface's own MAC and address; a UD
//!   frame's source QP (its DETH) must be in the process's block or be its
//!   QP 1. Anything else is refused: a process cannot send as the host's
//!   other addresses or as another process's QPs. A frame to the
//!   interface's own MAC and address is for a process of this host
//!   ([`Outgoing::ToSelf`]).

use std::net::IpAddr;

use crate::endpoint::QpnRange;
use crate::ud::GSI_QPN;
use crate::wire::{parse_frame_unchecked_icrc, IpRepr};
use proto::cm::{mad_owner, MadOwner};

use super::protocol::slot_of_qpn;

/// Where a frame goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Destination {
    /// The process in this slot (it may be empty).
    Slot(u8),
    /// QP 1 (connection management): whom the MAD is for.
    Gsi(MadOwner),
    /// Not a RoCE v2 frame.
    NotRoce,
}

/// The destination of `frame` (see the module documentation).
pub fn destination(frame: &[u8]) -> Destination {
    let Ok(f) = parse_frame_unchecked_icrc(frame) else {
        return Destination::NotRoce;
    };
    let qpn = f.headers.bth.dest_qp;
    if qpn == GSI_QPN {
        // A UD SEND: the payload is the MAD (after the DETH).
        return Destination::Gsi(mad_owner(f.payload));
    }
    Destination::Slot(slot_of_qpn(qpn))
}

/// What becomes of a frame a process sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outgoing {
    /// Onto the wire.
    Wire,
    /// To a process of this host (the interface's own MAC and address).
    ToSelf,
    /// Refused (see the module documentation).
    Refused,
}

/// Checks a frame the process owning `block` sent from `mac`/`ip` (the
/// interface's) and says where it goes.
pub fn check_outgoing(frame: &[u8], mac: [u8; 6], ip: IpAddr, block: QpnRange) -> Outgoing {
    let Ok(f) = parse_frame_unchecked_icrc(frame) else {
        return Outgoing::Refused;
    };
    let h = &f.headers;
    let (src, dst) = match h.ip {
        IpRepr::V4 { src, dst, .. } => (IpAddr::V4(src), IpAddr::V4(dst)),
        IpRepr::V6 { src, dst, .. } => (IpAddr::V6(src), IpAddr::V6(dst)),
    };
    if h.eth.src != mac || src != ip {
        return Outgoing::Refused;
    }
    if let Some(deth) = h.deth {
        if deth.src_qp != GSI_QPN && !block.contains(deth.src_qp) {
            return Outgoing::Refused;
        }
    }
    if h.eth.dst == mac && dst == ip {
        Outgoing::ToSelf
    } else {
        Outgoing::Wire
    }
}

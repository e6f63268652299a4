//! Which of several CM agents sharing one port's QP 1 a received MAD is
//! for: how the shared engine's service switches connection management
//! between the processes attached to it (docs/shared-engine.md).
//!
//! IBA 12.6 gives every CM message but two the receiver's own
//! communication ID: "Remote Communication ID" of MRA, REJ, REP, RTU,
//! DREQ, DREP, LAP and APR (IBA 12.6.6 to 12.6.12), and the Request ID of
//! SIDR_REP, which is the ID its SIDR_REQ's sender chose (12.11.2). Agents
//! that draw their IDs with distinct top bytes
//! ([`super::CmConfig::comm_id_prefix`]) are told apart by that byte. The
//! two that start a sequence, REQ and SIDR_REQ, name the service they ask
//! for ("ServiceID", 12.6.5, 12.11.1): they go to the agent listening on
//! it.

use super::mad::{AttrId, MadHeader, Req, SidrRep, SidrReq, MAD_HEADER_LEN};

/// Whom a received CM MAD is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MadOwner {
    /// The agent listening on this service ID (REQ, SIDR_REQ).
    Service(u64),
    /// The agent that drew this communication ID (every other message).
    CommId(u32),
    /// Not a CM MAD this core reads (too short, another class, a
    /// ClassPortInfo): no agent's.
    Nobody,
}

/// Whom `mad` (the datagram's payload) is for (see the module
/// documentation). Never panics; every length checked.
pub fn mad_owner(mad: &[u8]) -> MadOwner {
    let Ok(header) = MadHeader::new_checked(mad) else {
        return MadOwner::Nobody;
    };
    let Ok(attr) = header.check_cm() else {
        return MadOwner::Nobody;
    };
    match attr {
        AttrId::Req => {
            Req::new_checked(mad).map_or(MadOwner::Nobody, |m| MadOwner::Service(m.service_id()))
        }
        AttrId::SidrReq => SidrReq::new_checked(mad)
            .map_or(MadOwner::Nobody, |m| MadOwner::Service(m.service_id())),
        AttrId::SidrRep => {
            SidrRep::new_checked(mad).map_or(MadOwner::Nobody, |m| MadOwner::CommId(m.request_id()))
        }
        AttrId::ClassPortInfo => MadOwner::Nobody,
        // MRA, REJ, REP, RTU, DREQ, DREP, LAP, APR: the Remote
        // Communication ID, bytes 4..8 of the message.
        _ => mad
            .get(MAD_HEADER_LEN + 4..MAD_HEADER_LEN + 8)
            .map_or(MadOwner::Nobody, |b| {
                MadOwner::CommId(u32::from_be_bytes(b.try_into().expect("4 bytes")))
            }),
    }
}

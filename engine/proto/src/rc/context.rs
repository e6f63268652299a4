//! What a QP lends its requester, completer and responder for one call:
//! the attributes, memory regions, congestion control, counters and
//! completion queue they work with, borrowed from the QP and the endpoint
//! for that call only.

use super::attr::QpAttr;
use super::congestion::QpCongestion;
use super::counters::QpCounters;
use super::cq::CompletionSink;
use super::frame::FrameTemplate;
use super::mr::MrTable;
use super::sgl::QpSgl;
use super::srq::Srq;
use crate::time::Instant;
use crate::wire::crc32::CopyCrc;

/// For handling one received packet: a request (responder) or a response
/// (completer).
pub(crate) struct RxContext<'a> {
    pub now: Instant,
    pub attr: &'a QpAttr,
    /// Where payloads land and keys are checked.
    pub mrs: &'a mut MrTable,
    /// The QP's protection domain: the only one whose keys it may use.
    pub pd: u32,
    /// The receive CQ (responder) or the send CQ (completer).
    pub sink: CompletionSink<'a>,
    pub counters: &'a mut QpCounters,
    /// The QP's SGE lists, if it was created for more than one SGE.
    pub sgl: Option<&'a mut QpSgl>,
    /// The shared receive queue the responder takes its receives from,
    /// for a QP created on one (`rc/srq.rs`).
    pub srq: Option<&'a mut Srq>,
}

/// For emitting one frame: a request (requester) or an answer (responder).
pub(crate) struct TxContext<'a> {
    pub now: Instant,
    /// Copies a payload into the frame while extending the ICRC over it
    /// (the endpoint's `EndpointConfig::copy_crc`).
    pub copy_crc: CopyCrc,
    pub attr: &'a QpAttr,
    /// The QP's pre-built headers.
    pub tpl: &'a FrameTemplate,
    /// Where payloads are read from.
    pub mrs: &'a MrTable,
    /// The QP's protection domain: the only one whose keys it may use.
    pub pd: u32,
    /// The QP's number (a type 2 memory window answers only its QP).
    pub qpn: u32,
    /// Asked before each data packet (rate limit), told after.
    pub cc: &'a mut QpCongestion,
    pub counters: &'a mut QpCounters,
    /// Room left under the endpoint's in-flight limit for new messages.
    pub inflight: InflightRoom,
    /// The QP's SGE lists and inline data, if it was created for them.
    pub sgl: Option<&'a mut QpSgl>,
    /// The QP is UC ([`super::qp::Transport::Uc`]): UC opcodes, no
    /// AckReq, no retransmit timer, nothing held for ACKs.
    pub uc: bool,
}

/// Room under an endpoint's in-flight limit (`max_inflight_packets`): how
/// many more request packets its QPs may have outstanding together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InflightRoom {
    /// Packets that may still go out before the limit.
    pub room: u32,
    /// The limit itself (`u32::MAX`: none).
    pub limit: u32,
}

impl InflightRoom {
    /// No limit.
    pub const UNLIMITED: InflightRoom = InflightRoom {
        room: u32::MAX,
        limit: u32::MAX,
    };

    /// Whether a new message of `npkts` PSNs may start now: it fits the
    /// room, or, longer than the whole limit, it would go alone.
    #[inline]
    pub fn admits(self, npkts: u32) -> bool {
        npkts.min(self.limit) <= self.room
    }
}

//! Sending datagrams: posting a send ([`UdSendWr`]) and writing its one
//! packet (rxe `rxe_req.c` for UD: `init_req_packet` fills the BTH with
//! the work request's remote QPN and the DETH with its Q_Key and the
//! sender's QPN; no ACK is asked for or awaited, no retransmission).

use core::net::IpAddr;

use super::ah::{AhAttr, AhTable};
use super::qp::{UdQp, UdSendWqe, DEFAULT_PKEY};
use crate::rc::{
    default_udp_src_port, Access, Cq, MrTable, QpState, Sge, VerbsError, WcOpcode, WcStatus,
    MAX_MESSAGE_LEN,
};
use crate::wire::{
    emit_frame, frame_len, BthRepr, DethRepr, Ecn, EthRepr, IpRepr, Opcode, RoceHeaders, UdpRepr,
    ROCE_V2_UDP_PORT,
};

/// The operation of a UD send (`IBV_WR_SEND`, `IBV_WR_SEND_WITH_IMM`: the
/// only two UD has).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UdSendOp {
    Send,
    SendWithImm,
}

/// A UD send work request (`ibv_send_wr` with `wr.ud`, one SGE).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdSendWr {
    /// Returned in the completion.
    pub wr_id: u64,
    pub opcode: UdSendOp,
    /// The message: at most the QP's MTU (a longer one completes without
    /// a packet, IBA C10-93.1.1).
    pub local: Sge,
    /// Immediate data, for [`UdSendOp::SendWithImm`].
    pub imm: u32,
    /// The address handle ([`crate::endpoint::Endpoint::create_ah`]), of
    /// the QP's protection domain.
    pub ah: u32,
    /// The destination QP (24 bits).
    pub remote_qpn: u32,
    /// The destination's Q_Key; one with the high bit set means "the
    /// sending QP's own Q_Key" (IBA 10.2.5, C10-15).
    pub remote_qkey: u32,
    /// Generate a completion on success (errors always complete).
    pub signaled: bool,
    /// Set the BTH's solicited event bit.
    pub solicited: bool,
}

impl UdSendWr {
    /// A signaled SEND of `local` to `remote_qpn` / `remote_qkey` through
    /// address handle `ah`.
    pub fn new(wr_id: u64, local: Sge, ah: u32, remote_qpn: u32, remote_qkey: u32) -> UdSendWr {
        UdSendWr {
            wr_id,
            opcode: UdSendOp::Send,
            local,
            imm: 0,
            ah,
            remote_qpn,
            remote_qkey,
            signaled: true,
            solicited: false,
        }
    }
}

/// What one visit of a QP's send queue did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sent {
    /// A frame of this many bytes was written.
    Frame(usize),
    /// A request completed without a packet (too long, or an error).
    NoFrame,
    /// Nothing to send.
    Idle,
    /// The caller's buffer cannot hold the next frame (it stays queued).
    BufferTooSmall,
}

/// What a send needs of its endpoint.
pub(crate) struct SendContext<'a> {
    pub local_mac: [u8; 6],
    pub local_ip: IpAddr,
    pub ahs: &'a AhTable,
    pub mrs: &'a MrTable,
}

impl UdQp {
    /// Post a send (checked: state, destination QP number, length, that
    /// the address handle exists; its PD is compared when the datagram is
    /// built, as rxe `rxe_get_av`). The buffer's key is not looked at here: as rxe
    /// (its `validate_send_wr` checks no key), a send whose key is
    /// unknown, of another PD, or whose range leaves its region is
    /// accepted and fails when its datagram is built ([`UdQp::transmit`]).
    pub(crate) fn post_send(
        &mut self,
        wr: UdSendWr,
        ahs: &AhTable,
        cqs: &mut [Cq],
    ) -> Result<(), VerbsError> {
        match self.attr.state {
            QpState::Rts => {}
            QpState::Error => {
                // Verbs: work posted to a QP in error completes as flushed.
                let wc = self.wc(wr.wr_id, WcStatus::Flushed, WcOpcode::Send);
                self.complete(self.init.send_cq, wc, cqs);
                return Ok(());
            }
            _ => return Err(VerbsError::InvalidState),
        }
        if wr.remote_qpn > 0xFF_FFFF {
            return Err(VerbsError::InvalidArgument("remote_qpn must fit 24 bits"));
        }
        if wr.local.length > MAX_MESSAGE_LEN {
            return Err(VerbsError::InvalidArgument("message longer than 1 GiB"));
        }
        // An address handle of another PD is accepted: rxe looks at the
        // AH's PD only when the datagram is built ([`UdQp::transmit`]).
        if ahs.get(wr.ah).is_none() {
            return Err(VerbsError::InvalidArgument(
                "no address handle has this number",
            ));
        }
        if self.sq.len() >= self.init.max_send_wr as usize {
            return Err(VerbsError::QueueFull);
        }
        self.sq.push_back(UdSendWqe { wr });
        Ok(())
    }

    /// Whether a send waits.
    pub(crate) fn wants_to_send(&self) -> bool {
        self.attr.state == QpState::Rts && !self.sq.is_empty()
    }

    /// Take the next send: write its frame into `buf`, or complete it
    /// without one (too long for the MTU; an address handle or a buffer
    /// gone since the post).
    pub(crate) fn transmit(
        &mut self,
        ctx: &SendContext<'_>,
        cqs: &mut [Cq],
        buf: &mut [u8],
    ) -> Sent {
        if self.attr.state != QpState::Rts {
            return Sent::Idle;
        }
        let Some(&UdSendWqe { wr }) = self.sq.front() else {
            return Sent::Idle;
        };
        let psn = self.psn;
        // IBA C10-93.1.1 (rxe_requester): a UD message longer than the
        // MTU sends nothing and completes successfully; its PSN is used.
        if wr.local.length > self.attr.mtu.bytes() {
            self.sq.pop_front();
            self.psn = (psn + 1) & 0xFF_FFFF;
            self.counters.ud_send_too_long += 1;
            self.complete_send(&wr, WcStatus::Success, cqs);
            return Sent::NoFrame;
        }
        // rxe_av.c `rxe_get_av`: no AH of this number, or one whose PD is
        // not the QP's ("PDs don't match for AH and QP"), is no address
        // vector; rxe_req.c `rxe_requester` then fails the request with
        // IB_WC_LOC_QP_OP_ERR ("Failed no address vector") and the QP
        // goes to error. Nothing is sent.
        let ah = match ctx.ahs.get(wr.ah) {
            Some((pd, ah)) if pd == self.pd => ah,
            _ => return self.fail_send(&wr, WcStatus::LocalQpOperationError, cqs),
        };
        let Some(h) = self.headers(ctx, ah, &wr, psn) else {
            return self.fail_send(&wr, WcStatus::LocalQpOperationError, cqs);
        };
        let len = wr.local.length as usize;
        let payload: &[u8] = if len == 0 {
            &[]
        } else {
            match ctx
                .mrs
                .slice(self.pd, wr.local.lkey, wr.local.addr, len, Access::NONE)
            {
                Ok(p) => p,
                // rxe_req.c `finish_packet` -> rxe_mr.c `copy_data`: no
                // region of this key in the QP's PD (`lookup_mr`), or the
                // range outside it (`mr_check_range`): `-EINVAL`, which
                // completes the request with IB_WC_LOC_QP_OP_ERR and moves
                // the QP to error.
                Err(_) => return self.fail_send(&wr, WcStatus::LocalQpOperationError, cqs),
            }
        };
        if buf.len() < frame_len(&h, len) {
            self.counters.tx_buffer_too_small += 1;
            return Sent::BufferTooSmall;
        }
        let Ok(n) = emit_frame(&h, payload, buf) else {
            self.counters.tx_buffer_too_small += 1;
            return Sent::BufferTooSmall;
        };
        self.sq.pop_front();
        self.psn = (psn + 1) & 0xFF_FFFF;
        self.counters.sent_pkts += 1;
        // No ACK on UD: the request is done once its packet is out.
        self.complete_send(&wr, WcStatus::Success, cqs);
        Sent::Frame(n)
    }

    /// The headers of the datagram for `wr` through `ah`, or `None` when
    /// the address is not of the endpoint's IP family.
    fn headers(
        &self,
        ctx: &SendContext<'_>,
        ah: &AhAttr,
        wr: &UdSendWr,
        psn: u32,
    ) -> Option<RoceHeaders> {
        let dscp = ah.traffic_class >> 2;
        let ecn = Ecn::from_bits(ah.traffic_class & 3);
        let ip = match (ctx.local_ip, ah.remote.ip) {
            (IpAddr::V4(src), IpAddr::V4(dst)) => IpRepr::V4 {
                src,
                dst,
                dscp,
                ecn,
                ttl: ah.hop_limit,
                ident: 0,
                dont_fragment: true,
            },
            (IpAddr::V6(src), IpAddr::V6(dst)) => IpRepr::V6 {
                src,
                dst,
                dscp,
                ecn,
                flow_label: ah.flow_label,
                hop_limit: ah.hop_limit,
            },
            _ => return None,
        };
        let opcode = match wr.opcode {
            UdSendOp::Send => Opcode::UdSendOnly,
            UdSendOp::SendWithImm => Opcode::UdSendOnlyImm,
        };
        // IBA 10.2.5 (C10-15): a Q_Key with the high bit set stands for
        // the QP's own; QP 1 always sends the GSI Q_Key.
        let qkey = if wr.remote_qkey & 0x8000_0000 != 0 || self.qpn == super::GSI_QPN {
            self.qkey()
        } else {
            wr.remote_qkey
        };
        Some(RoceHeaders {
            eth: EthRepr {
                dst: ah.remote.mac,
                src: ctx.local_mac,
                vlan: ah.remote.vlan,
            },
            ip,
            udp: UdpRepr {
                src_port: ah
                    .remote
                    .udp_src_port
                    .unwrap_or_else(|| default_udp_src_port(self.qpn)),
                dst_port: ROCE_V2_UDP_PORT,
            },
            // rxe init_req_packet: default P_Key, the destination from the
            // WR, AckReq clear (rxe sets it for RC only since 2023: nothing
            // acknowledges a datagram).
            bth: BthRepr {
                opcode,
                solicited: wr.solicited,
                mig_req: false,
                pad_count: 0,
                pkey: DEFAULT_PKEY,
                fecn: false,
                becn: false,
                dest_qp: wr.remote_qpn,
                ack_req: false,
                psn,
            },
            reth: None,
            aeth: None,
            atomic_eth: None,
            atomic_ack_eth: None,
            immdt: (wr.opcode == UdSendOp::SendWithImm).then_some(wr.imm),
            ieth: None,
            deth: Some(DethRepr {
                qkey,
                src_qp: self.qpn,
            }),
        })
    }

    /// Complete `wr` (a success only if signaled or `sq_sig_all`).
    fn complete_send(&mut self, wr: &UdSendWr, status: WcStatus, cqs: &mut [Cq]) {
        if status == WcStatus::Success && !wr.signaled && !self.init.sq_sig_all {
            return;
        }
        let mut wc = self.wc(wr.wr_id, status, WcOpcode::Send);
        if status == WcStatus::Success {
            wc.byte_len = wr.local.length;
        }
        self.complete(self.init.send_cq, wc, cqs);
    }

    /// The request at the head fails: its error completion, then the QP
    /// to ERROR (rxe's requester `err:` path), which flushes the rest.
    fn fail_send(&mut self, wr: &UdSendWr, status: WcStatus, cqs: &mut [Cq]) -> Sent {
        self.sq.pop_front();
        self.complete_send(wr, status, cqs);
        self.flush(cqs);
        Sent::NoFrame
    }
}

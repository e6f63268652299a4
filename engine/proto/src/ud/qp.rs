//! A UD QP: attributes, the state machine and the work queues.
//!
//! States and attributes as IBA 11.2.4.2 (and the kernel's
//! `qp_state_table`, which rxe applies through `ib_modify_qp_is_ok`) give
//! them for UD: RESET->INIT takes the P_Key index, the port and the Q_Key;
//! INIT->INIT may change them; INIT->RTR may change the P_Key index and
//! the Q_Key; RTR->RTS takes the send PSN and may change the Q_Key;
//! RTS->RTS may change the Q_Key; any state may go to RESET or ERROR.
//! There is no peer: each send names its destination.

use std::collections::VecDeque;

use super::send::UdSendWr;
use crate::rc::{
    Counters, Cq, Mtu, QpInitAttr, QpState, RecvWr, VerbsError, WcOpcode, WcStatus, WorkCompletion,
};

/// The QP number of the General Services Interface (IBA 3.5.5, 13.4.3):
/// a UD QP whose Q_Key is always [`GSI_QKEY`].
pub const GSI_QPN: u32 = 1;
/// The GSI's well-known Q_Key (IBA 13.4.3; rxe `GSI_QKEY`), which QP 1
/// sends and requires whatever its attributes say.
pub const GSI_QKEY: u32 = 0x8001_0000;
/// Bytes at the start of every UD receive buffer that hold the GRH (or,
/// for RoCE v2 over IPv4, 20 zero bytes and then the IPv4 header; rxe
/// `union rdma_network_hdr`).
pub const GRH_LEN: usize = 40;
/// Entries of the P_Key table (rxe's: one, the default P_Key 0xFFFF).
pub const PKEY_TABLE_LEN: u16 = 1;
/// The one port.
pub const PORT_NUM: u8 = 1;
/// The P_Key at index 0, which every UD packet carries and must match
/// (rxe `IB_DEFAULT_PKEY_FULL`).
pub(crate) const DEFAULT_PKEY: u16 = 0xFFFF;

/// Attributes of a UD QP (`ibv_qp_attr`, the fields UD uses), applied by
/// [`crate::endpoint::Endpoint::modify_ud_qp`] as a [`UdQpAttrMask`]
/// selects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdQpAttr {
    /// Target state.
    pub state: QpState,
    /// Index into the P_Key table (below [`PKEY_TABLE_LEN`]).
    pub pkey_index: u16,
    /// Port number ([`PORT_NUM`]).
    pub port: u8,
    /// The Q_Key a datagram must carry to be accepted, and the one sent
    /// when a send's Q_Key has its high bit set (IBA 10.2.5).
    pub qkey: u32,
    /// First send PSN (24 bits).
    pub sq_psn: u32,
    /// The largest message: the port's MTU (UD has no path MTU; rxe uses
    /// the port's `mtu_cap`). A verbs layer sets it from the port.
    pub mtu: Mtu,
}

impl Default for UdQpAttr {
    fn default() -> Self {
        UdQpAttr {
            state: QpState::Reset,
            pkey_index: 0,
            port: PORT_NUM,
            qkey: 0,
            sq_psn: 0,
            mtu: Mtu::Mtu1024,
        }
    }
}

/// Which [`UdQpAttr`] fields a modify applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct UdQpAttrMask(pub u32);

impl UdQpAttrMask {
    pub const STATE: UdQpAttrMask = UdQpAttrMask(1 << 0);
    pub const PKEY_INDEX: UdQpAttrMask = UdQpAttrMask(1 << 1);
    pub const PORT: UdQpAttrMask = UdQpAttrMask(1 << 2);
    pub const QKEY: UdQpAttrMask = UdQpAttrMask(1 << 3);
    pub const SQ_PSN: UdQpAttrMask = UdQpAttrMask(1 << 4);
    /// The port MTU: not a verbs attribute of the QP, allowed with any
    /// modify.
    pub const MTU: UdQpAttrMask = UdQpAttrMask(1 << 5);

    /// Every bit of `other` is set.
    pub const fn contains(self, other: UdQpAttrMask) -> bool {
        self.0 & other.0 == other.0
    }
}

impl core::ops::BitOr for UdQpAttrMask {
    type Output = UdQpAttrMask;
    fn bitor(self, rhs: UdQpAttrMask) -> UdQpAttrMask {
        UdQpAttrMask(self.0 | rhs.0)
    }
}

/// For a UD QP moving `from -> to` (IBA 11.2.4.2; the kernel's
/// `qp_state_table` for `IB_QPT_UD`): the attributes the transition
/// requires and those it may also take, or `None` when it is not allowed.
fn transition(from: QpState, to: QpState) -> Option<(UdQpAttrMask, UdQpAttrMask)> {
    use QpState::*;
    let none = UdQpAttrMask(0);
    let (p, port, q, psn) = (
        UdQpAttrMask::PKEY_INDEX,
        UdQpAttrMask::PORT,
        UdQpAttrMask::QKEY,
        UdQpAttrMask::SQ_PSN,
    );
    Some(match (from, to) {
        (_, Reset) | (_, Error) => (none, none),
        (Reset, Init) => (p | port | q, none),
        (Init, Init) => (none, p | port | q),
        (Init, Rtr) => (none, p | q),
        (Rtr, Rts) => (psn, q),
        (Rts, Rts) => (none, q),
        _ => return None,
    })
}

/// One send work request waiting to go out.
#[derive(Debug, Clone, Copy)]
pub(crate) struct UdSendWqe {
    pub wr: UdSendWr,
}

/// A UD QP.
#[derive(Debug)]
pub struct UdQp {
    /// Its number (device-wide, shared with the RC QPs).
    pub qpn: u32,
    /// Its protection domain: its buffers' regions and its address
    /// handles must be of it.
    pub pd: u32,
    pub(crate) init: QpInitAttr,
    pub(crate) attr: UdQpAttr,
    /// The next send PSN.
    pub(crate) psn: u32,
    pub(crate) sq: VecDeque<UdSendWqe>,
    pub(crate) rq: VecDeque<RecvWr>,
    /// Waiting in the endpoint's ready list (`table.rs`).
    pub(crate) queued: bool,
    /// On an SRQ, it entered ERROR and has not yet reported its last WQE
    /// (`AsyncEvent::QpLastWqeReached`, IBA 10.3.1).
    pub(crate) last_wqe_reached: bool,
    pub(crate) counters: Counters,
}

impl UdQp {
    /// A QP in RESET, its queues allocated for `init`'s depths.
    pub(crate) fn new(qpn: u32, pd: u32, init: QpInitAttr) -> UdQp {
        UdQp {
            qpn,
            pd,
            sq: VecDeque::with_capacity(init.max_send_wr as usize),
            rq: VecDeque::with_capacity(init.max_recv_wr as usize),
            init,
            attr: UdQpAttr::default(),
            psn: 0,
            queued: false,
            last_wqe_reached: false,
            counters: Counters::default(),
        }
    }

    /// The current state.
    pub fn state(&self) -> QpState {
        self.attr.state
    }

    /// The current attributes (the send PSN as last set).
    pub fn attr(&self) -> &UdQpAttr {
        &self.attr
    }

    /// The creation attributes (CQs, queue depths).
    pub fn init_attr(&self) -> &QpInitAttr {
        &self.init
    }

    /// The PSN the next datagram will carry.
    pub fn next_psn(&self) -> u32 {
        self.psn
    }

    /// The Q_Key datagrams to this QP must carry (and that a send whose
    /// Q_Key has the high bit set uses): [`GSI_QKEY`] for QP 1.
    pub fn qkey(&self) -> u32 {
        if self.qpn == GSI_QPN {
            GSI_QKEY
        } else {
            self.attr.qkey
        }
    }

    /// This QP's counters.
    pub fn counters(&self) -> Counters {
        self.counters
    }

    /// Receives posted and not yet used.
    pub fn recv_queue_len(&self) -> usize {
        self.rq.len()
    }

    /// Sends posted and not yet sent.
    pub fn send_queue_len(&self) -> usize {
        self.sq.len()
    }

    /// Apply a modify (see the module docs for what each transition takes).
    pub(crate) fn modify(
        &mut self,
        attr: &UdQpAttr,
        mask: UdQpAttrMask,
        cqs: &mut [Cq],
    ) -> Result<(), VerbsError> {
        let from = self.attr.state;
        let to = if mask.contains(UdQpAttrMask::STATE) {
            attr.state
        } else {
            from
        };
        let (required, optional) = if mask.contains(UdQpAttrMask::STATE) {
            transition(from, to).ok_or(VerbsError::InvalidTransition)?
        } else {
            // No state change: the attributes the current state may take.
            transition(from, from).map_or((UdQpAttrMask(0), UdQpAttrMask(0)), |t| t)
        };
        let given = UdQpAttrMask(mask.0 & !(UdQpAttrMask::STATE.0 | UdQpAttrMask::MTU.0));
        if !given.contains(required) {
            return Err(VerbsError::MissingAttribute);
        }
        if given.0 & !(required.0 | optional.0) != 0 {
            return Err(VerbsError::InvalidArgument(
                "attribute not allowed in this UD QP state transition",
            ));
        }
        if mask.contains(UdQpAttrMask::PKEY_INDEX) && attr.pkey_index >= PKEY_TABLE_LEN {
            return Err(VerbsError::InvalidArgument(
                "pkey_index out of the P_Key table",
            ));
        }
        if mask.contains(UdQpAttrMask::PORT) && attr.port != PORT_NUM {
            return Err(VerbsError::InvalidArgument("port_num must be 1"));
        }
        if mask.contains(UdQpAttrMask::SQ_PSN) && attr.sq_psn > 0xFF_FFFF {
            return Err(VerbsError::InvalidArgument("sq_psn must fit 24 bits"));
        }
        // Checked: apply.
        if mask.contains(UdQpAttrMask::PKEY_INDEX) {
            self.attr.pkey_index = attr.pkey_index;
        }
        if mask.contains(UdQpAttrMask::PORT) {
            self.attr.port = attr.port;
        }
        if mask.contains(UdQpAttrMask::QKEY) {
            self.attr.qkey = attr.qkey;
        }
        if mask.contains(UdQpAttrMask::SQ_PSN) {
            self.attr.sq_psn = attr.sq_psn;
            self.psn = attr.sq_psn;
        }
        if mask.contains(UdQpAttrMask::MTU) {
            self.attr.mtu = attr.mtu;
        }
        if mask.contains(UdQpAttrMask::STATE) {
            self.attr.state = to;
            match to {
                QpState::Error if from != QpState::Error => self.flush(cqs),
                QpState::Reset => {
                    // Verbs: RESET empties the queues without completions.
                    self.sq.clear();
                    self.rq.clear();
                    self.psn = 0;
                    self.attr = UdQpAttr {
                        state: QpState::Reset,
                        mtu: self.attr.mtu,
                        ..UdQpAttr::default()
                    };
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Into ERROR: every posted request completes as flushed.
    pub(crate) fn flush(&mut self, cqs: &mut [Cq]) {
        self.attr.state = QpState::Error;
        while let Some(w) = self.sq.pop_front() {
            let wc = self.wc(w.wr.wr_id, WcStatus::Flushed, WcOpcode::Send);
            self.complete(self.init.send_cq, wc, cqs);
        }
        while let Some(r) = self.rq.pop_front() {
            let wc = self.wc(r.wr_id, WcStatus::Flushed, WcOpcode::Recv);
            self.complete(self.init.recv_cq, wc, cqs);
        }
        // On an SRQ: it takes no more of the SRQ's WQEs (IBA 10.3.1).
        if self.init.srq.is_some() {
            self.last_wqe_reached = true;
        }
    }

    /// A completion of this QP with nothing else set.
    pub(crate) fn wc(&self, wr_id: u64, status: WcStatus, opcode: WcOpcode) -> WorkCompletion {
        WorkCompletion {
            wr_id,
            qpn: self.qpn,
            status,
            opcode,
            ..WorkCompletion::default()
        }
    }

    /// Queue `wc` on CQ `cq`; a full CQ counts `cq_overflow`.
    pub(crate) fn complete(&mut self, cq: u32, wc: WorkCompletion, cqs: &mut [Cq]) {
        if let Some(c) = cqs.get_mut(cq as usize) {
            if !c.push(wc) {
                self.counters.cq_overflow += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn qp() -> (UdQp, Vec<Cq>) {
        let init = QpInitAttr {
            send_cq: 0,
            recv_cq: 0,
            max_send_wr: 4,
            max_recv_wr: 4,
            sq_sig_all: false,
            srq: None,
        };
        (UdQp::new(0x20, 0, init), vec![Cq::new(16)])
    }

    fn to(state: QpState) -> UdQpAttr {
        UdQpAttr {
            state,
            qkey: 0x1111,
            sq_psn: 7,
            ..UdQpAttr::default()
        }
    }

    #[test]
    fn reset_init_rtr_rts_takes_the_ud_attributes() {
        let (mut q, mut cqs) = qp();
        let s = UdQpAttrMask::STATE;
        // RESET->INIT needs P_Key index, port and Q_Key.
        assert_eq!(
            q.modify(&to(QpState::Init), s | UdQpAttrMask::QKEY, &mut cqs),
            Err(VerbsError::MissingAttribute)
        );
        let init_mask = s | UdQpAttrMask::PKEY_INDEX | UdQpAttrMask::PORT | UdQpAttrMask::QKEY;
        q.modify(&to(QpState::Init), init_mask, &mut cqs).unwrap();
        assert_eq!(q.qkey(), 0x1111);
        // No jump to RTS, no SQ PSN at RTR.
        assert_eq!(
            q.modify(&to(QpState::Rts), s | UdQpAttrMask::SQ_PSN, &mut cqs),
            Err(VerbsError::InvalidTransition)
        );
        assert!(matches!(
            q.modify(&to(QpState::Rtr), s | UdQpAttrMask::SQ_PSN, &mut cqs),
            Err(VerbsError::InvalidArgument(_))
        ));
        q.modify(&to(QpState::Rtr), s, &mut cqs).unwrap();
        assert_eq!(
            q.modify(&to(QpState::Rts), s, &mut cqs),
            Err(VerbsError::MissingAttribute)
        );
        q.modify(&to(QpState::Rts), s | UdQpAttrMask::SQ_PSN, &mut cqs)
            .unwrap();
        assert_eq!((q.state(), q.next_psn()), (QpState::Rts, 7));
        // RTS may change the Q_Key only.
        let newkey = UdQpAttr {
            qkey: 0x2222,
            ..to(QpState::Rts)
        };
        q.modify(&newkey, UdQpAttrMask::QKEY, &mut cqs).unwrap();
        assert_eq!(q.qkey(), 0x2222);
        assert!(q.modify(&newkey, UdQpAttrMask::PORT, &mut cqs).is_err());
    }

    #[test]
    fn bad_values_are_refused_and_nothing_changes() {
        let (mut q, mut cqs) = qp();
        let m = UdQpAttrMask::STATE
            | UdQpAttrMask::PKEY_INDEX
            | UdQpAttrMask::PORT
            | UdQpAttrMask::QKEY;
        for bad in [
            UdQpAttr {
                pkey_index: 1,
                ..to(QpState::Init)
            },
            UdQpAttr {
                port: 2,
                ..to(QpState::Init)
            },
        ] {
            assert!(matches!(
                q.modify(&bad, m, &mut cqs),
                Err(VerbsError::InvalidArgument(_))
            ));
            assert_eq!(q.state(), QpState::Reset);
            assert_eq!(q.qkey(), 0);
        }
    }

    #[test]
    fn the_gsi_always_uses_the_well_known_qkey() {
        let (_, mut cqs) = qp();
        let mut q = UdQp::new(GSI_QPN, 0, qp().0.init);
        let m = UdQpAttrMask::STATE
            | UdQpAttrMask::PKEY_INDEX
            | UdQpAttrMask::PORT
            | UdQpAttrMask::QKEY;
        q.modify(&to(QpState::Init), m, &mut cqs).unwrap();
        assert_eq!(q.qkey(), GSI_QKEY);
    }
}

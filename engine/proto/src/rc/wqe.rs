//! Work requests and work completions (the verbs objects users post and poll).

use super::mr::Access;
use super::mw::MwBind;

/// A scatter/gather entry: `length` bytes at I/O virtual address `addr`
/// inside the memory region of `lkey`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Sge {
    pub lkey: u32,
    pub addr: u64,
    pub length: u32,
}

/// Operation of a send work request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SendOp {
    Send,
    SendWithImm,
    Write,
    WriteWithImm,
    Read,
    CompareSwap,
    FetchAdd,
    /// SEND that invalidates the peer's memory window named by `imm`
    /// (`IBV_WR_SEND_WITH_INV`: SEND_LAST/ONLY_WITH_INVALIDATE, IETH).
    SendWithInv,
    /// Bind a memory window (`IBV_WR_BIND_MW`; [`SendWr::bind_mw`]): a
    /// local operation, no packet.
    BindMw,
    /// Invalidate the local memory window whose R_Key is `imm`
    /// (`IBV_WR_LOCAL_INV`): a local operation, no packet.
    LocalInv,
    /// ATOMIC WRITE (`IBV_WR_ATOMIC_WRITE`, IBA 1.5 9.4.8): the 8 bytes of
    /// [`SendWr::atomic_write_value`] stored at `remote_addr` as one
    /// aligned 64-bit write (rxe `wr_atomic_write` copies them into the
    /// WQE: no local buffer, no L_Key). RC only.
    AtomicWrite,
}

impl SendOp {
    /// READ and the atomics: they consume responder resources and are bounded
    /// by `max_rd_atomic`.
    pub const fn is_read_or_atomic(self) -> bool {
        matches!(self, SendOp::Read | SendOp::CompareSwap | SendOp::FetchAdd)
    }

    /// Takes a responder resource at the peer and is bounded by
    /// `max_rd_atomic`: READ, the atomics, and ATOMIC WRITE (IBA 1.5
    /// 9.4.8: an ATOMIC WRITE is answered as a READ is, from a responder
    /// resource; rxe `check_resource` counts it with RXE_ATOMIC_WRITE_MASK
    /// against `max_dest_rd_atomic`, `rxe_prepare_res` takes one).
    pub const fn takes_responder_resource(self) -> bool {
        matches!(
            self,
            SendOp::Read | SendOp::CompareSwap | SendOp::FetchAdd | SendOp::AtomicWrite
        )
    }

    /// Compare-and-swap or fetch-and-add.
    pub const fn is_atomic(self) -> bool {
        matches!(self, SendOp::CompareSwap | SendOp::FetchAdd)
    }

    /// A local operation: executed by the requester when it reaches it,
    /// no packet, no PSN (rxe `WR_LOCAL_OP_MASK`, `rxe_do_local_ops`).
    pub const fn is_local(self) -> bool {
        matches!(self, SendOp::BindMw | SendOp::LocalInv)
    }
}

/// A send work request (`ibv_send_wr` with one SGE).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SendWr {
    /// Returned in the completion.
    pub wr_id: u64,
    pub opcode: SendOp,
    /// Local buffer: the data to send/write, or where READ data and the
    /// atomic's original value (8 bytes) land.
    pub local: Sge,
    /// Remote address for WRITE/READ/atomics.
    pub remote_addr: u64,
    /// Remote key for WRITE/READ/atomics.
    pub rkey: u32,
    /// Immediate data for the *WithImm operations; the R_Key to
    /// invalidate for `SendWithInv` and `LocalInv` (verbs keeps both in
    /// one union); the new R_Key of a `BindMw`.
    pub imm: u32,
    /// Compare value (CompareSwap) or addend (FetchAdd).
    pub compare_add: u64,
    /// Swap value (CompareSwap).
    pub swap: u64,
    /// Generate a completion on success (errors always complete).
    pub signaled: bool,
}

impl SendWr {
    /// A signaled request of `opcode` with everything else zero.
    pub fn new(wr_id: u64, opcode: SendOp, local: Sge) -> SendWr {
        SendWr {
            wr_id,
            opcode,
            local,
            remote_addr: 0,
            rkey: 0,
            imm: 0,
            compare_add: 0,
            swap: 0,
            signaled: true,
        }
    }

    /// A signaled BIND_MW request. The bind travels in the request's own
    /// fields, read back by [`SendWr::mw_bind`]: `rkey` the window's key,
    /// `imm` its new key, `local.lkey` the region, `remote_addr` and
    /// `compare_add` the range, `swap` the rights (bit 5: zero-based).
    pub fn bind_mw(wr_id: u64, bind: &MwBind) -> SendWr {
        SendWr {
            rkey: bind.mw_rkey,
            imm: bind.rkey,
            remote_addr: bind.addr,
            compare_add: bind.len,
            swap: u64::from(bind.access.bits()) | if bind.zero_based { ZERO_BASED } else { 0 },
            ..SendWr::new(
                wr_id,
                SendOp::BindMw,
                Sge {
                    lkey: bind.lkey,
                    addr: 0,
                    length: 0,
                },
            )
        }
    }

    /// A signaled ATOMIC WRITE of the 8 bytes `value` at `remote_addr`
    /// through `rkey` (rxe `wr_atomic_write`: `dma.length` 8, no SGE).
    /// The bytes travel in [`SendWr::compare_add`], big-endian, so that
    /// the wire payload is `value` byte for byte.
    pub fn atomic_write(wr_id: u64, remote_addr: u64, rkey: u32, value: [u8; 8]) -> SendWr {
        SendWr {
            remote_addr,
            rkey,
            compare_add: u64::from_be_bytes(value),
            ..SendWr::new(wr_id, SendOp::AtomicWrite, Sge::default())
        }
    }

    /// The 8 bytes an ATOMIC WRITE stores ([`SendWr::atomic_write`]).
    pub const fn atomic_write_value(&self) -> [u8; 8] {
        self.compare_add.to_be_bytes()
    }

    /// The bind of a request made by [`SendWr::bind_mw`].
    pub fn mw_bind(&self) -> MwBind {
        MwBind {
            mw_rkey: self.rkey,
            rkey: self.imm,
            lkey: self.local.lkey,
            addr: self.remote_addr,
            len: self.compare_add,
            access: Access::from_bits_truncate(self.swap as u8),
            zero_based: self.swap & ZERO_BASED != 0,
        }
    }
}

/// Bit of [`SendWr::swap`] that says a bind is zero-based (the value of
/// `IBV_ACCESS_ZERO_BASED`).
const ZERO_BASED: u64 = 1 << 5;

/// A receive work request (`ibv_recv_wr` with one SGE).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecvWr {
    pub wr_id: u64,
    pub sge: Sge,
}

/// Status of a work completion (`ibv_wc_status` subset).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum WcStatus {
    #[default]
    Success,
    /// Local ACK timeout / sequence-error retries exhausted (retry_cnt).
    RetryExceeded,
    /// RNR NAK retries exhausted (rnr_retry).
    RnrRetryExceeded,
    /// The responder answered NAK remote access error.
    RemoteAccessError,
    /// The responder answered NAK invalid request.
    RemoteInvalidRequest,
    /// The responder answered NAK remote operational error.
    RemoteOperationalError,
    /// A local key/range/rights check failed.
    LocalProtectionError,
    /// An incoming message did not fit the receive buffer.
    LocalLengthError,
    /// The QP entered the error state before this request completed.
    Flushed,
    /// A memory window bind was refused (`IBV_WC_MW_BIND_ERR`).
    MwBindError,
    /// A local operation was refused: a LOCAL_INV of a key that is no
    /// type 2 window of the QP's PD (`IBV_WC_LOC_QP_OP_ERR`, as rxe).
    LocalQpOperationError,
}

/// Opcode of a work completion (`ibv_wc_opcode` subset).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum WcOpcode {
    #[default]
    Send,
    Write,
    Read,
    CompareSwap,
    FetchAdd,
    /// A received SEND (with or without immediate).
    Recv,
    /// A received RDMA WRITE with immediate (consumes a receive).
    RecvRdmaWithImm,
    /// A memory window bound (`IBV_WC_BIND_MW`).
    BindMw,
    /// A memory window invalidated locally (`IBV_WC_LOCAL_INV`).
    LocalInv,
    /// An ATOMIC WRITE completed (`IBV_WC_ATOMIC_WRITE`; rxe
    /// `wr_to_wc_opcode`).
    AtomicWrite,
}

impl WcOpcode {
    /// The completion opcode of a send operation.
    pub const fn of_send(op: SendOp) -> WcOpcode {
        match op {
            SendOp::Send | SendOp::SendWithImm | SendOp::SendWithInv => WcOpcode::Send,
            SendOp::Write | SendOp::WriteWithImm => WcOpcode::Write,
            SendOp::Read => WcOpcode::Read,
            SendOp::CompareSwap => WcOpcode::CompareSwap,
            SendOp::FetchAdd => WcOpcode::FetchAdd,
            SendOp::BindMw => WcOpcode::BindMw,
            SendOp::LocalInv => WcOpcode::LocalInv,
            SendOp::AtomicWrite => WcOpcode::AtomicWrite,
        }
    }
}

/// A work completion.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WorkCompletion {
    pub wr_id: u64,
    pub qpn: u32,
    pub status: WcStatus,
    pub opcode: WcOpcode,
    /// Bytes transferred (receives and READs; the request length for
    /// SEND/WRITE; 8 for atomics).
    pub byte_len: u32,
    /// Immediate data, for receives of *WithImm messages.
    pub imm: Option<u32>,
    /// The R_Key a received SEND with invalidate invalidated
    /// (`IBV_WC_WITH_INV`, `invalidated_rkey`).
    pub invalidated_rkey: Option<u32>,
    /// Who sent a message a UD QP received (`src_qp`, the source GID and
    /// MAC, the network header type): `Some` on every receive completion
    /// of a UD QP, which then also has a GRH in its buffer's first 40
    /// bytes (verbs `IBV_WC_GRH`, which rxe sets on all of them); `None`
    /// for every other completion.
    pub ud: Option<crate::ud::UdSource>,
}

//! Work requests and work completions (the verbs objects users post and poll).

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
}

impl SendOp {
    /// READ and the atomics: they consume responder resources and are bounded
    /// by `max_rd_atomic`.
    pub const fn is_read_or_atomic(self) -> bool {
        matches!(self, SendOp::Read | SendOp::CompareSwap | SendOp::FetchAdd)
    }

    /// Compare-and-swap or fetch-and-add.
    pub const fn is_atomic(self) -> bool {
        matches!(self, SendOp::CompareSwap | SendOp::FetchAdd)
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
    /// Immediate data for the *WithImm operations.
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
}

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
}

impl WcOpcode {
    /// The completion opcode of a send operation.
    pub const fn of_send(op: SendOp) -> WcOpcode {
        match op {
            SendOp::Send | SendOp::SendWithImm => WcOpcode::Send,
            SendOp::Write | SendOp::WriteWithImm => WcOpcode::Write,
            SendOp::Read => WcOpcode::Read,
            SendOp::CompareSwap => WcOpcode::CompareSwap,
            SendOp::FetchAdd => WcOpcode::FetchAdd,
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
}

//! The remote operations (RDMA WRITE, with immediate too, READ and the
//! atomics), each naming B's R_Key and needing one right of B's QP and
//! region: posted from A by the tests of those rights (`qp_access.rs`,
//! `pd.rs`).

use proto::rc::{Access, SendOp};

use super::{rdma_wr, read_wr, recv_wr_b, write_wr, Pair, IOVA_B};

/// A remote operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RemoteOp {
    Write,
    WriteWithImm,
    Read,
    FetchAdd,
    CompareSwap,
}

impl RemoteOp {
    pub const ALL: [RemoteOp; 5] = [
        RemoteOp::Write,
        RemoteOp::WriteWithImm,
        RemoteOp::Read,
        RemoteOp::FetchAdd,
        RemoteOp::CompareSwap,
    ];

    /// The right the responder must grant.
    pub fn needs(self) -> Access {
        match self {
            RemoteOp::Write | RemoteOp::WriteWithImm => Access::REMOTE_WRITE,
            RemoteOp::Read => Access::REMOTE_READ,
            RemoteOp::FetchAdd | RemoteOp::CompareSwap => Access::REMOTE_ATOMIC,
        }
    }
}

/// B's first 8 bytes as the atomics see them.
pub fn b_word(p: &Pair) -> u64 {
    u64::from_le_bytes(p.read_b(IOVA_B, 8).try_into().unwrap())
}

/// Post `op` (wr_id 1) from A at offset 0 of both regions, `len` bytes
/// (8 for an atomic); a WRITE with immediate finds receive 7 posted at B.
/// Returns A's request frames.
pub fn post_remote(p: &mut Pair, op: RemoteOp, len: u32) -> Vec<Vec<u8>> {
    let wr = match op {
        RemoteOp::Write => write_wr(p, 1, len, 0),
        RemoteOp::WriteWithImm => {
            p.b.post_recv(p.qb, recv_wr_b(p, 7, 0)).unwrap();
            let mut wr = rdma_wr(p, 1, SendOp::WriteWithImm, len, 0);
            wr.imm = 0xABCD;
            wr
        }
        RemoteOp::Read => read_wr(p, 1, len, 0),
        RemoteOp::FetchAdd => {
            let mut wr = rdma_wr(p, 1, SendOp::FetchAdd, 8, 0);
            wr.compare_add = 1;
            wr
        }
        RemoteOp::CompareSwap => {
            let mut wr = rdma_wr(p, 1, SendOp::CompareSwap, 8, 0);
            // Matches B's word: the swap would happen if allowed.
            wr.compare_add = b_word(p);
            wr.swap = 0x5555;
            wr
        }
    };
    p.a.post_send(p.qa, wr).unwrap();
    p.tx_a()
}

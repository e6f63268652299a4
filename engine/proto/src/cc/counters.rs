//! The congestion counters an endpoint reports, under the names RDMA users
//! know from NVIDIA and Broadcom NICs.

/// Congestion counters of one endpoint (NVIDIA/Broadcom counter names).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CcCounters {
    /// Received RoCE packets whose IP ECN field was CE.
    pub np_ecn_marked_roce_packets: u64,
    /// CNPs sent (allowed by the per-QP pacer).
    pub np_cnp_sent: u64,
    /// CNPs sent without pacing because the pacing table was full.
    pub np_cnp_unpaced: u64,
    /// CNPs that reduced a QP's rate.
    pub rp_cnp_handled: u64,
    /// CNPs that did not: inside the rate-reduce monitor period, for an
    /// unknown QP, or with DCQCN switched off.
    pub rp_cnp_ignored: u64,
}

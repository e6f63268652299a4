//! `verbs.h`'s structures and constants: rdma-core 44's verbs ABI, defined once in `verbs_abi` (shared with the drop-in librdmacm).
pub use verbs_abi::*;

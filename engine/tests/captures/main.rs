//! Tests against the packet captures committed in `interop/captures/`,
//! recorded against Linux Soft-RoCE (see interop/README.md): every frame
//! parses with a correct ICRC; opcodes, PSNs, ACKs, NAKs and
//! retransmissions are what the protocol requires; the out-of-band
//! exchanges parse with the engine's `oob` formats. No root, no network.

mod pingpong_capture;
mod rxe_capture;
mod rxe_rdma_capture;
mod rxe_rdma_target_capture;
mod support;

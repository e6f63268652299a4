//! The simulator's tests, one binary: the simulation matrix (every op
//! under loss, reordering, duplication and corruption; every byte
//! checked), many QPs (`scale.rs`), and the responder QP's access flags
//! under loss (`qp_access.rs`).

mod inflight_limit;
mod matrix;
mod qp_access;
mod scale;

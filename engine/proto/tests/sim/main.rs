//! The simulator's tests, one binary: the simulation matrix (every op
//! under loss, reordering, duplication and corruption; every byte
//! checked), many QPs (`scale.rs`), the responder QP's access flags
//! under loss (`qp_access.rs`) and protection domains under loss
//! (`pd.rs`), memory windows under loss (`mw.rs`) and many QPs sharing
//! one receive queue under loss (`srq.rs`).

mod atomic_write;
mod inflight_limit;
mod lossy_pair;
mod matrix;
mod mw;
mod pd;
mod qp_access;
mod scale;
mod sgl;
#[path = "../sgl_model/mod.rs"]
mod sgl_model;
mod srq;
mod uc;

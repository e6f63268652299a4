//! The simulator's tests, one binary: the simulation matrix (every op
//! under loss, reordering, duplication and corruption; every byte
//! checked), and many QPs (`scale.rs`).

mod inflight_limit;
mod matrix;
mod scale;

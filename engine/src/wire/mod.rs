//! RoCE v2 wire format: zero-copy views over packet bytes and plain
//! representations (parse / emit / len) for every header, one file per
//! header. See `../shared/docs/roce-v2-notes.md`, "Frame layout".
//!
//! CONTRACT (shared by the wire, rc, cc and datapath work): the names
//! re-exported below are the interface other modules code against. Keep
//! them; move definitions into per-header files freely.

mod contract;

pub use contract::*;

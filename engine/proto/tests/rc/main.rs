//! The Reliable Connection transport, driven packet by packet: two
//! endpoints joined by a hand-driven wire ([`support`]), every frame moved
//! by the test with explicit times, and every byte, completion and counter
//! checked. One module per part of the transport.

#[path = "../sgl_model/mod.rs"]
mod sgl_model;
mod support;

mod atomic_write;
mod bad_receive;
mod completer;
mod mw;
mod pd;
mod qp_access;
mod qp_state;
mod requester;
mod responder;
mod sgl;
mod srq;
mod tx_order;
mod uc;
mod vlan;

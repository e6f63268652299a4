//! The wire format's tests, one binary: frames from independent encoders
//! (Scapy vectors, tshark decoding ours), emit/parse round trips and typed
//! errors, property tests of the parser, and the templated transmit path
//! against `emit_frame`.

mod proptest;
mod roundtrip;
mod template;
mod template_support;
mod tshark;
mod vectors;

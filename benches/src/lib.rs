//! roce-xdp benchmarks: criterion microbenchmarks live in `benches/benches/`;
//! this library holds the pieces of the end-to-end harness.
#![deny(unsafe_code)]

pub mod udp_baseline;

//! Benchmarks for roce-xdp live in `benches/benches/`.

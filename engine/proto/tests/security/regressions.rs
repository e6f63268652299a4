//! Inputs the fuzzers (`fuzz/`, `docs/security.md`, "Fuzzing") found,
//! replayed as tests: each was a panic or a broken invariant once.
//! (None yet.)

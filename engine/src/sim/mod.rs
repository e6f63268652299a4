//! Deterministic simulator (in progress).

//! Command-line options and values that several commands share.

use clap::ValueEnum;

/// XDP attach mode on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum ModeArg {
    /// Native (driver) mode, falling back to generic.
    #[default]
    Auto,
    /// Native (driver) mode only.
    Native,
    /// Generic (SKB) mode only.
    Generic,
}

/// AF_XDP zero-copy policy on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum ZeroCopyArg {
    #[default]
    Auto,
    On,
    Off,
}

/// Valid path MTUs (roce-v2-notes, "Frame layout").
pub const VALID_PMTUS: [u32; 5] = [256, 512, 1024, 2048, 4096];

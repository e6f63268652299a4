//! `roce-xdp`: the command-line front end.
//!
//! This file only parses the command line, sets up logging and maps errors
//! to exit codes (2 for mistakes the user can fix, see `errors.rs`). The
//! commands live in `commands/` (one file or folder each; the helpers for
//! the interoperability tests under `commands/interop/`), what several of
//! them share in `common/`.

mod commands;
mod common;
mod errors;
mod logging;

use clap::Parser;

/// Software RoCE v2 over AF_XDP.
#[derive(Debug, Parser)]
#[command(name = "roce-xdp", version, about)]
struct Cli {
    /// Log level (error, warn, info, debug, trace) or a tracing filter
    /// such as `engine=debug`; overrides RUST_LOG. Quiet (warnings only)
    /// by default.
    #[arg(long = "log-level", global = true, value_name = "LEVEL")]
    log_level: Option<String>,
    #[command(subcommand)]
    command: commands::Command,
}

/// Large tables (an endpoint's QPs) in huge pages: `engine::io::HugePageAlloc`.
#[global_allocator]
static ALLOC: engine::io::HugePageAlloc = engine::io::HugePageAlloc;

fn main() {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        // Usage errors (and --help / --version) as clap prints them: exit 2
        // for mistakes, 0 for help.
        Err(e) => e.exit(),
    };
    if let Err(e) = logging::init(cli.log_level.as_deref()) {
        std::process::exit(errors::report(&e));
    }
    if let Err(e) = commands::run(cli.command) {
        std::process::exit(errors::report(&e));
    }
}

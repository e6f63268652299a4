//! `roce-xdp bench`: the end-to-end benchmark harness (engine, bare AF_XDP
//! floor, kernel UDP on a veth pair in fresh namespaces); see
//! `benches/README.md`.

use std::path::PathBuf;

use roce_xdp_benches::frontend::{self, BenchArgs as HarnessArgs};
use roce_xdp_benches::options::Section;

/// Arguments of `roce-xdp bench`.
#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    /// Smoke run for CI: fewer message sizes, short points (under two minutes).
    #[arg(long)]
    quick: bool,
    /// Print the report as JSON on stdout instead of the table.
    #[arg(long)]
    json: bool,
    /// Also write results.md, results.json and goodput.svg into DIR.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Engine threads spin instead of sleeping when idle (one core each).
    #[arg(long)]
    busy_poll: bool,
    /// Engine/baseline pairs per target in the paired step (default 20, 2
    /// with --quick; rounded up to even). More pairs narrow the medians on
    /// a noisy machine; each pair costs two points (1 s in a full run).
    #[arg(long, value_name = "N")]
    pairs: Option<usize>,
    /// Run one section alone: `shared` (the shared engine's rows:
    /// perftest attached to `roce-xdp service` against in-process, and the
    /// idle service's CPU).
    #[arg(long, value_name = "SECTION", value_parser = parse_section)]
    only: Option<Section>,
}

fn parse_section(s: &str) -> Result<Section, String> {
    Section::parse(s)
}

/// Runs the harness.
pub fn run(a: BenchArgs) -> anyhow::Result<()> {
    frontend::run(&HarnessArgs {
        quick: a.quick,
        json: a.json,
        out: a.out,
        busy_poll: a.busy_poll,
        pairs: a.pairs,
        only: a.only,
    })?;
    Ok(())
}

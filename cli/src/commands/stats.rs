//! `roce-xdp stats --iface IF [--watch] [--json]`: the counters of the
//! engines running on an interface, read from their local stats channel
//! (engine::stats), per queue and totalled, plus the XDP program's
//! counters, plus the current DCQCN rate of every QP; with `--watch`, one
//! refresh per second with rates.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::Args;

use crate::common::stats_document::{json_document, rates, render, xdp_pairs, Snapshot};
use crate::errors::UserError;

/// Options of `roce-xdp stats`.
#[derive(Debug, Args)]
pub struct StatsArgs {
    /// Interface the engines run on.
    #[arg(short = 'd', long = "iface", value_name = "IF")]
    pub iface: String,
    /// Refresh every second (or --interval), showing rates.
    #[arg(short = 'w', long = "watch")]
    pub watch: bool,
    /// Seconds between refreshes with --watch.
    #[arg(long = "interval", default_value_t = 1.0)]
    pub interval: f64,
    /// Stop after this many refreshes (with --watch).
    #[arg(long = "count")]
    pub count: Option<u64>,
    /// Print JSON (one document per refresh, one per line with --watch).
    #[arg(long = "json")]
    pub json: bool,
}

/// Reads one snapshot of `iface`'s engines.
pub fn fetch(iface: &str) -> anyhow::Result<Snapshot> {
    let raw = engine::stats::fetch(iface).map_err(|e| match e {
        engine::stats::StatsError::NotRunning { .. } => {
            anyhow::Error::new(UserError::Usage(e.to_string()))
        }
        other => anyhow::Error::new(other),
    })?;
    serde_json::from_str(&raw).context("the engine's stats document is not valid JSON")
}

/// Writes `text` to stdout. A reader that went away (`roce-xdp stats
/// --json | head`) ends the command quietly, as it ends other Unix tools;
/// `println!` would panic on the broken pipe.
fn emit(text: &str) -> anyhow::Result<()> {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => std::process::exit(0),
        r => Ok(r.context("writing to stdout")?),
    }
}

/// Runs `roce-xdp stats`.
pub fn run(args: StatsArgs) -> anyhow::Result<()> {
    if !(args.interval > 0.0 && args.interval.is_finite()) {
        return Err(
            UserError::Usage("--interval must be a positive number of seconds".into()).into(),
        );
    }
    let mut snap = fetch(&args.iface)?;
    if !args.watch {
        if args.json {
            let text = serde_json::to_string_pretty(&json_document(&snap, None))?;
            return emit(&format!("{text}\n"));
        }
        return emit(&render(&snap, None));
    }
    let clear = !args.json && std::io::stdout().is_terminal();
    let mut taken = Instant::now();
    let mut shown = 0u64;
    loop {
        std::thread::sleep(Duration::from_secs_f64(args.interval));
        let next = match fetch(&args.iface) {
            Ok(n) => n,
            Err(e) => {
                // The engine stopped while we watched: say so and end.
                eprintln!("roce-xdp stats: {e:#}");
                return Ok(());
            }
        };
        let now = Instant::now();
        let secs = now.duration_since(taken).as_secs_f64();
        let tr = rates(&snap.totals(), &next.totals(), secs);
        let xr = rates(&xdp_pairs(&snap), &xdp_pairs(&next), secs);
        if args.json {
            let text = serde_json::to_string(&json_document(&next, Some((&tr, &xr))))?;
            emit(&format!("{text}\n"))?;
        } else {
            let home = if clear { "\x1b[2J\x1b[H" } else { "" };
            emit(&format!("{home}{}\n", render(&next, Some((&tr, &xr)))))?;
        }
        snap = next;
        taken = now;
        shown += 1;
        if args.count.is_some_and(|c| shown >= c) {
            return Ok(());
        }
    }
}

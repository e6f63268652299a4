//! What `roce-xdp bench` (and the `roce-xdp-bench` binary) do with the
//! command line: run the harness, print the table (or JSON), write
//! `--out DIR`.

use std::path::PathBuf;

use engine::driver::PollMode;

use crate::error::HarnessError;
use crate::full_run;
use crate::options::{Options, Section};
use crate::output;
use crate::report::Report;

/// Command-line choices of the harness.
#[derive(Debug, Clone, Default)]
pub struct BenchArgs {
    /// CI smoke run (under two minutes).
    pub quick: bool,
    /// Print the report as JSON on stdout instead of the table.
    pub json: bool,
    /// Also write results.md, results.json and goodput.svg here.
    pub out: Option<PathBuf>,
    /// Engine threads spin instead of sleeping when idle (`--busy-poll`).
    pub busy_poll: bool,
    /// Pairs per target of the paired step (`--pairs N`).
    pub pairs: Option<usize>,
    /// Run one section alone (`--only shared`).
    pub only: Option<Section>,
}

/// Usage of the standalone binary.
pub const USAGE: &str =
    "usage: roce-xdp-bench [--quick] [--json] [--out DIR] [--busy-poll] [--pairs N] [--only SECTION]\n\
Runs the end-to-end benchmark (kernel UDP, AF_XDP floor, engine) on a veth\n\
pair in fresh network namespaces; needs root. --only shared: the shared\n\
engine's rows alone.";

impl BenchArgs {
    /// Parses `--quick`, `--json`, `--out DIR` (for the standalone binary).
    pub fn parse<I: IntoIterator<Item = String>>(args: I) -> Result<BenchArgs, String> {
        let mut a = BenchArgs::default();
        let mut it = args.into_iter();
        while let Some(arg) = it.next() {
            match arg.as_str() {
                "--quick" => a.quick = true,
                "--json" => a.json = true,
                "--busy-poll" => a.busy_poll = true,
                "--pairs" => {
                    let n = it.next().ok_or("--pairs needs a number: --pairs N")?;
                    a.pairs = Some(
                        n.parse()
                            .map_err(|_| format!("--pairs takes a number, not {n:?}"))?,
                    );
                }
                "--only" => {
                    let s = it.next().ok_or("--only needs a section: --only shared")?;
                    a.only = Some(Section::parse(&s)?);
                }
                "--out" => {
                    a.out = Some(
                        it.next()
                            .ok_or("--out needs a directory: --out DIR")?
                            .into(),
                    )
                }
                s if s.starts_with("--out=") => a.out = Some(s["--out=".len()..].into()),
                "-h" | "--help" => return Err(USAGE.into()),
                other => return Err(format!("unknown argument {other:?}\n{USAGE}")),
            }
        }
        Ok(a)
    }
}

/// Why `bench` failed.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error(transparent)]
    Harness(#[from] HarnessError),
    #[error("writing the results to {dir}: {source}")]
    Out { dir: String, source: std::io::Error },
}

/// Runs the harness and prints/writes the report. Progress goes to stderr.
pub fn run(args: &BenchArgs) -> Result<Report, BenchError> {
    let report = full_run::run(&Options {
        quick: args.quick,
        progress: true,
        engine_poll: if args.busy_poll {
            PollMode::Busy
        } else {
            PollMode::default()
        },
        pairs: args.pairs,
        only: args.only,
    })?;
    if args.json {
        println!("{}", report.to_json());
    } else {
        print!("{}", report.to_text());
    }
    if let Some(dir) = &args.out {
        let files = output::write_dir(&report, dir).map_err(|source| BenchError::Out {
            dir: dir.display().to_string(),
            source,
        })?;
        for f in files {
            eprintln!("bench: wrote {}", f.display());
        }
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(v: &[&str]) -> Result<BenchArgs, String> {
        BenchArgs::parse(v.iter().map(|s| s.to_string()))
    }

    #[test]
    fn parses_flags() {
        let a = parse(&["--quick", "--json", "--out", "d"]).unwrap();
        assert!(a.quick && a.json);
        assert_eq!(a.out, Some(PathBuf::from("d")));
        assert_eq!(parse(&["--out=x"]).unwrap().out, Some(PathBuf::from("x")));
        assert!(parse(&["--out"]).is_err());
        assert!(parse(&["--fast"]).unwrap_err().contains("unknown argument"));
        assert_eq!(parse(&["--pairs", "10"]).unwrap().pairs, Some(10));
        assert!(parse(&["--pairs", "many"]).is_err());
        assert!(parse(&["--pairs"]).is_err());
        assert_eq!(
            parse(&["--only", "shared"]).unwrap().only,
            Some(Section::Shared)
        );
        assert!(parse(&["--only", "everything"]).is_err());
        assert!(parse(&["--only"]).is_err());
    }

    #[test]
    fn pairs_default_by_mode_and_round_up_to_even() {
        let opts = |quick, pairs| Options {
            quick,
            progress: false,
            engine_poll: PollMode::default(),
            pairs,
            only: None,
        };
        assert_eq!(opts(true, None).pairs(), 2);
        assert_eq!(opts(false, None).pairs(), 20);
        assert_eq!(opts(false, Some(9)).pairs(), 10);
        assert_eq!(opts(false, Some(0)).pairs(), 2);
    }
}

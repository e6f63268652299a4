//! Writes a report to a directory: `results.md` (the full report the
//! README's results summary links to), `results.json` (what
//! `benches/update-readme-results.sh` makes that summary from) and
//! `goodput.svg`.

use std::path::{Path, PathBuf};

use crate::report::{size_label, Report};
use charts::{LineChart, Series};

/// File names inside the output directory.
pub const MARKDOWN: &str = "results.md";
pub const JSON: &str = "results.json";
pub const PLOT: &str = "goodput.svg";

/// The goodput-versus-message-size chart: kernel UDP, the AF_XDP floor
/// and the engine's WRITE (SEND and READ dashed, when measured).
pub fn goodput_chart(report: &Report) -> LineChart {
    let series = |name: &str,
                  color: &str,
                  dashed: bool,
                  f: fn(&crate::report::GoodputRow) -> Option<f64>| Series {
        name: name.into(),
        color: color.into(),
        dashed,
        points: report
            .goodput
            .iter()
            .filter_map(|r| f(r).map(|y| (r.message_bytes as f64, y)))
            .collect(),
    };
    let mut s = vec![
        series("kernel UDP", "#d62728", false, |r| r.kernel_udp_gbps),
        series("AF_XDP floor", "#7f7f7f", false, |r| r.floor_gbps),
        series("engine WRITE", "#1f77b4", false, |r| r.write_gbps),
    ];
    for (name, color, f) in [
        (
            "engine SEND",
            "#2ca02c",
            (|r: &crate::report::GoodputRow| r.send_gbps) as fn(&_) -> _,
        ),
        ("engine READ", "#9467bd", |r: &crate::report::GoodputRow| {
            r.read_gbps
        }),
    ] {
        let x = series(name, color, true, f);
        if !x.points.is_empty() {
            s.push(x);
        }
    }
    LineChart {
        title: format!(
            "Goodput vs message size (veth, {})",
            report.machine.date_utc
        ),
        x_label: "message size (log scale)".into(),
        y_label: "goodput, Gb/s".into(),
        series: s,
        x_tick: |x| size_label(x as u64),
    }
}

/// Writes the three files into `dir` (created if needed); returns their
/// paths. A section run (`--only`) measured no goodput sweep: no chart.
pub fn write_dir(report: &Report, dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let plot = report.section.is_none().then_some(PLOT);
    let mut files = vec![
        (MARKDOWN, report.to_markdown(plot)),
        (JSON, report.to_json() + "\n"),
    ];
    if plot.is_some() {
        files.push((PLOT, goodput_chart(report).to_svg()));
    }
    let mut out = Vec::new();
    for (name, body) in files {
        let p = dir.join(name);
        std::fs::write(&p, body)?;
        out.push(p);
    }
    Ok(out)
}

//! `roce-xdp plot TRACE.csv --out rate.svg`: draws a `roce-xdp sim --trace`
//! time series as an SVG line chart: the rate of every QP over time (top)
//! and the bottleneck queue depth (bottom), drawn with the benchmark
//! SVG writer of the `charts` crate, no plotting dependency.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use charts::{self as svg, LineChart, Series, XScale};

/// Arguments of `roce-xdp plot`.
#[derive(Debug, clap::Args)]
pub struct PlotArgs {
    /// CSV written by `roce-xdp sim --trace FILE` (columns time_us, qp,
    /// rate_gbps, alpha, queue_kb).
    pub file: PathBuf,
    /// Output SVG file.
    #[arg(long, default_value = "rate.svg")]
    pub out: PathBuf,
    /// Chart title (default: the input file name).
    #[arg(long)]
    pub title: Option<String>,
}

/// One parsed trace.
#[derive(Debug, Default)]
pub struct Trace {
    /// Per QP: (time_us, rate_gbps).
    pub rates: BTreeMap<u32, Vec<(f64, f64)>>,
    /// (time_us, queue_kb), one per distinct time.
    pub queue: Vec<(f64, f64)>,
}

/// Parse the CSV text of a trace.
pub fn parse_trace(text: &str) -> Result<Trace> {
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    let (_, header) = lines.next().context("the trace file is empty")?;
    let cols: Vec<&str> = header.split(',').map(str::trim).collect();
    let find = |name: &str| {
        cols.iter().position(|c| *c == name).with_context(|| {
            format!("the trace has no `{name}` column (header: {header}); write it with `roce-xdp sim --trace FILE`")
        })
    };
    let (it, iq, ir, iqueue) = (
        find("time_us")?,
        find("qp")?,
        find("rate_gbps")?,
        find("queue_kb")?,
    );
    let mut trace = Trace::default();
    for (n, line) in lines {
        let f: Vec<&str> = line.split(',').map(str::trim).collect();
        let get = |i: usize| -> Result<f64> {
            let s = f
                .get(i)
                .with_context(|| format!("line {}: too few columns", n + 1))?;
            s.parse::<f64>()
                .with_context(|| format!("line {}: `{s}` is not a number", n + 1))
        };
        let t = get(it)?;
        let qp_text = f.get(iq).copied().unwrap_or("");
        let qp = match qp_text.strip_prefix("0x") {
            Some(hex) => u32::from_str_radix(hex, 16).ok(),
            None => qp_text.parse().ok(),
        }
        .with_context(|| format!("line {}: `{qp_text}` is not a QP number", n + 1))?;
        trace.rates.entry(qp).or_default().push((t, get(ir)?));
        let q = get(iqueue)?;
        if trace.queue.last().map(|&(lt, _)| lt) != Some(t) {
            trace.queue.push((t, q));
        }
    }
    if trace.rates.is_empty() {
        bail!("the trace has a header but no samples");
    }
    Ok(trace)
}

/// Formats a tick value of the time axis.
fn fmt_num(v: f64) -> String {
    if v == 0.0 {
        "0".into()
    } else if v.abs() >= 100.0 || v.fract() == 0.0 {
        format!("{v:.0}")
    } else if v.abs() >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}

const COLORS: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];

/// The samples of a trace that fall in one column of the chart.
#[derive(Clone, Copy)]
struct Column {
    index: usize,
    /// The lowest and the highest sample, (time, value).
    lo: (f64, f64),
    hi: (f64, f64),
}

impl Column {
    /// Appends the column's extremes in time order.
    fn flush(self, out: &mut Vec<(f64, f64)>) {
        let (a, b) = if self.lo.0 <= self.hi.0 {
            (self.lo, self.hi)
        } else {
            (self.hi, self.lo)
        };
        out.push(a);
        if b != a {
            out.push(b);
        }
    }
}

/// At most two points per column of `columns` over `0..=t_max`: the
/// lowest and the highest sample of each column, in time order, so a
/// long trace stays small and its spikes survive.
fn decimate(pts: &[(f64, f64)], t_max: f64, columns: usize) -> Vec<(f64, f64)> {
    let index = |t: f64| ((t / t_max * columns as f64) as usize).min(columns);
    let mut out = Vec::with_capacity(pts.len().min(2 * columns + 2));
    let mut col: Option<Column> = None;
    for &p in pts {
        match &mut col {
            Some(c) if c.index == index(p.0) => {
                if p.1 < c.lo.1 {
                    c.lo = p;
                }
                if p.1 > c.hi.1 {
                    c.hi = p;
                }
            }
            _ => {
                if let Some(done) = col {
                    done.flush(&mut out);
                }
                col = Some(Column {
                    index: index(p.0),
                    lo: p,
                    hi: p,
                });
            }
        }
    }
    if let Some(done) = col {
        done.flush(&mut out);
    }
    out
}

/// Render a trace as SVG text: the rate of every QP over time above the
/// bottleneck queue depth, both on the same time axis.
pub fn render_svg(trace: &Trace, title: &str) -> String {
    let t_max = trace
        .rates
        .values()
        .flat_map(|v| v.iter().map(|p| p.0))
        .chain(trace.queue.iter().map(|p| p.0))
        .fold(0.0f64, f64::max)
        .max(1e-9);
    let columns = svg::W as usize;
    let chart = |title: String, y_label: &str, series: Vec<Series>| LineChart {
        title,
        x_label: "time (us)".into(),
        y_label: y_label.into(),
        series,
        x_tick: fmt_num,
    };
    let rates = trace
        .rates
        .iter()
        .enumerate()
        .map(|(i, (qp, pts))| Series {
            name: format!("QP 0x{qp:x}"),
            color: COLORS[i % COLORS.len()].into(),
            dashed: false,
            points: decimate(pts, t_max, columns),
        })
        .collect();
    let queue = vec![Series {
        name: "queue".into(),
        color: "#555".into(),
        dashed: false,
        points: decimate(&trace.queue, t_max, columns),
    }];
    svg::stack(&[
        chart(title.to_string(), "rate (Gb/s)", rates).to_svg_with(XScale::Linear),
        chart("bottleneck queue depth".into(), "queue (KB)", queue).to_svg_with(XScale::Linear),
    ])
}

/// Run `roce-xdp plot`.
pub fn run(args: PlotArgs) -> Result<()> {
    let text = std::fs::read_to_string(&args.file)
        .with_context(|| format!("cannot read trace {}", args.file.display()))?;
    let trace = parse_trace(&text).with_context(|| format!("in {}", args.file.display()))?;
    let ext = args
        .out
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or("")
        .to_ascii_lowercase();
    if ext != "svg" {
        bail!(
            "only SVG output is supported; name the output file with .svg (got {})",
            args.out.display()
        );
    }
    let title = args
        .title
        .unwrap_or_else(|| format!("DCQCN trace: {}", args.file.display()));
    std::fs::write(&args.out, render_svg(&trace, &title))
        .with_context(|| format!("cannot write {}", args.out.display()))?;
    eprintln!(
        "wrote {} ({} QPs, {} queue samples)",
        args.out.display(),
        trace.rates.len(),
        trace.queue.len()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const CSV: &str = "time_us,qp,rate_gbps,alpha,queue_kb\n\
        0,17,100,1,0\n0,18,100,1,0\n\
        10,17,50,0.9,120.5\n10,18,60,0.8,120.5\n\
        20,17,55,0.85,80\n20,18,52,0.7,80\n";

    #[test]
    fn parses_and_renders() {
        let t = parse_trace(CSV).unwrap();
        assert_eq!(t.rates.len(), 2);
        assert_eq!(t.rates[&17], vec![(0.0, 100.0), (10.0, 50.0), (20.0, 55.0)]);
        assert_eq!(t.queue, vec![(0.0, 0.0), (10.0, 120.5), (20.0, 80.0)]);
        let svg = render_svg(&t, "t<1>");
        assert!(svg.starts_with("<svg"));
        assert!(svg.trim_end().ends_with("</svg>"));
        assert_eq!(svg.matches("<polyline").count(), 3); // two QPs + queue
        assert!(svg.contains("QP 0x11") && svg.contains("QP 0x12"));
        assert!(svg.contains("t&lt;1&gt;"));
        assert!(svg.contains("rate (Gb/s)") && svg.contains("queue (KB)"));
    }

    #[test]
    fn rejects_bad_input() {
        assert!(parse_trace("").is_err());
        assert!(parse_trace("a,b\n1,2\n").is_err());
        assert!(parse_trace("time_us,qp,rate_gbps,alpha,queue_kb\n").is_err());
        let e = parse_trace("time_us,qp,rate_gbps,alpha,queue_kb\n1,2,x,0,0\n").unwrap_err();
        assert!(format!("{e:#}").contains("not a number"));
    }

    #[test]
    fn nice_steps() {
        // The time axis of both charts: 0..20 us in steps of 5.
        let svg = render_svg(&parse_trace(CSV).unwrap(), "t");
        for tick in ["0", "5", "10", "15", "20"] {
            let label = format!(r#"text-anchor="middle">{tick}</text>"#);
            assert_eq!(svg.matches(&label).count(), 2, "{tick}: {svg}");
        }
        assert_eq!(fmt_num(2.5), "2.5");
        assert_eq!(fmt_num(0.25), "0.250");
        assert_eq!(fmt_num(1500.0), "1500");
    }

    #[test]
    fn long_traces_keep_their_spikes() {
        // 100 000 samples at 1 Gb/s with one spike to 40 Gb/s.
        let pts: Vec<(f64, f64)> = (0..100_000)
            .map(|i| (i as f64, if i == 31_337 { 40.0 } else { 1.0 }))
            .collect();
        let d = decimate(&pts, 99_999.0, 760);
        assert!(d.len() <= 2 * 761, "{}", d.len());
        assert!(d.contains(&(31_337.0, 40.0)));
        assert_eq!(d.first(), Some(&(0.0, 1.0)));
        assert!(d.windows(2).all(|w| w[0].0 < w[1].0), "time order");
    }
}

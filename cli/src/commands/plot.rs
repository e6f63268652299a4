//! `roce-xdp plot TRACE.csv --out rate.svg`: draws a `roce-xdp sim --trace`
//! time series as an SVG line chart: the rate of every QP over time (top)
//! and the bottleneck queue depth (bottom). A small hand-written SVG writer,
//! no plotting dependency.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};

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

/// A "nice" tick step (1, 2 or 5 x 10^k) for about `n` ticks over `span`.
fn nice_step(span: f64, n: f64) -> f64 {
    if span <= 0.0 || !span.is_finite() {
        return 1.0;
    }
    let raw = span / n;
    let mag = 10f64.powf(raw.log10().floor());
    let norm = raw / mag;
    let m = if norm < 1.5 {
        1.0
    } else if norm < 3.5 {
        2.0
    } else if norm < 7.5 {
        5.0
    } else {
        10.0
    };
    m * mag
}

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

struct Panel {
    x: f64,
    y: f64,
    w: f64,
    h: f64,
    t_max: f64,
    v_max: f64,
}

impl Panel {
    fn px(&self, t: f64) -> f64 {
        self.x + self.w * (t / self.t_max)
    }
    fn py(&self, v: f64) -> f64 {
        self.y + self.h * (1.0 - v / self.v_max)
    }

    fn axes(&self, svg: &mut String, y_label: &str, x_label: &str) {
        let (x, y, w, h) = (self.x, self.y, self.w, self.h);
        let _ = writeln!(
            svg,
            r##"<rect x="{x}" y="{y}" width="{w}" height="{h}" fill="none" stroke="#444"/>"##
        );
        let ys = nice_step(self.v_max, 5.0);
        let mut v = 0.0;
        while v <= self.v_max * 1.0001 {
            let py = self.py(v);
            let _ = writeln!(
                svg,
                r##"<line x1="{x}" y1="{py:.1}" x2="{:.1}" y2="{py:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end" font-size="11">{}</text>"##,
                x + w,
                x - 4.0,
                py + 4.0,
                fmt_num(v)
            );
            v += ys;
        }
        let xs = nice_step(self.t_max, 8.0);
        let mut t = 0.0;
        while t <= self.t_max * 1.0001 {
            let px = self.px(t);
            let _ = writeln!(
                svg,
                r##"<line x1="{px:.1}" y1="{:.1}" x2="{px:.1}" y2="{:.1}" stroke="#444"/><text x="{px:.1}" y="{:.1}" text-anchor="middle" font-size="11">{}</text>"##,
                y + h,
                y + h + 4.0,
                y + h + 16.0,
                fmt_num(t)
            );
            t += xs;
        }
        let _ = writeln!(
            svg,
            r##"<text transform="translate({:.1},{:.1}) rotate(-90)" text-anchor="middle" font-size="12">{y_label}</text>"##,
            x - 46.0,
            y + h / 2.0
        );
        if !x_label.is_empty() {
            let _ = writeln!(
                svg,
                r##"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="12">{x_label}</text>"##,
                x + w / 2.0,
                y + h + 32.0
            );
        }
    }

    fn line(&self, svg: &mut String, pts: &[(f64, f64)], color: &str) {
        // At most ~2 points per horizontal pixel: keep the min and max of
        // each pixel column so spikes survive.
        let mut d = String::with_capacity(pts.len().min(4096) * 16);
        let mut col: Option<(i64, f64, f64)> = None; // (pixel, min, max)
        let emit = |d: &mut String, px: f64, lo: f64, hi: f64, first: &mut bool| {
            for v in [hi, lo] {
                let _ = write!(
                    d,
                    "{}{px:.1},{:.1} ",
                    if *first { "M" } else { "L" },
                    self.py(v)
                );
                *first = false;
            }
        };
        let mut first = true;
        for &(t, v) in pts {
            let p = self.px(t).round() as i64;
            match &mut col {
                Some((cp, lo, hi)) if *cp == p => {
                    *lo = lo.min(v);
                    *hi = hi.max(v);
                }
                _ => {
                    if let Some((cp, lo, hi)) = col {
                        emit(&mut d, cp as f64, lo, hi, &mut first);
                    }
                    col = Some((p, v, v));
                }
            }
        }
        if let Some((cp, lo, hi)) = col {
            emit(&mut d, cp as f64, lo, hi, &mut first);
        }
        let _ = writeln!(
            svg,
            r##"<path d="{}" fill="none" stroke="{color}" stroke-width="1.5"/>"##,
            d.trim_end()
        );
    }
}

/// Render a trace as SVG text.
pub fn render_svg(trace: &Trace, title: &str) -> String {
    let (width, height) = (960.0, 640.0);
    let t_max = trace
        .rates
        .values()
        .flat_map(|v| v.iter().map(|p| p.0))
        .chain(trace.queue.iter().map(|p| p.0))
        .fold(0.0f64, f64::max)
        .max(1e-9);
    let r_max = trace
        .rates
        .values()
        .flat_map(|v| v.iter().map(|p| p.1))
        .fold(0.0f64, f64::max);
    let q_max = trace.queue.iter().map(|p| p.1).fold(0.0f64, f64::max);
    let ceil_nice = |m: f64| {
        let s = nice_step(m.max(1e-9), 5.0);
        ((m / s).ceil() * s).max(s)
    };
    let rates = Panel {
        x: 70.0,
        y: 40.0,
        w: 760.0,
        h: 330.0,
        t_max,
        v_max: ceil_nice(r_max),
    };
    let queue = Panel {
        x: 70.0,
        y: 420.0,
        w: 760.0,
        h: 170.0,
        t_max,
        v_max: ceil_nice(q_max),
    };
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif">"##
    );
    let _ = writeln!(svg, r##"<rect width="100%" height="100%" fill="white"/>"##);
    let _ = writeln!(
        svg,
        r##"<text x="{:.1}" y="24" text-anchor="middle" font-size="15">{}</text>"##,
        width / 2.0,
        xml_escape(title)
    );
    rates.axes(&mut svg, "rate (Gb/s)", "");
    queue.axes(&mut svg, "queue (KB)", "time (us)");
    for (i, (qp, pts)) in trace.rates.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        rates.line(&mut svg, pts, color);
        let ly = 50.0 + 18.0 * i as f64;
        let _ = writeln!(
            svg,
            r##"<line x1="842" y1="{ly:.1}" x2="862" y2="{ly:.1}" stroke="{color}" stroke-width="3"/><text x="868" y="{:.1}" font-size="12">QP 0x{qp:x}</text>"##,
            ly + 4.0
        );
    }
    queue.line(&mut svg, &trace.queue, "#555");
    svg.push_str("</svg>\n");
    svg
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
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
        assert_eq!(svg.matches("<path").count(), 3); // two QPs + queue
        assert!(svg.contains("QP 0x11") && svg.contains("QP 0x12"));
        assert!(svg.contains("t&lt;1&gt;"));
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
        assert_eq!(nice_step(100.0, 5.0), 20.0);
        assert_eq!(nice_step(1000.0, 8.0), 100.0);
        assert_eq!(nice_step(7.0, 5.0), 1.0);
    }
}

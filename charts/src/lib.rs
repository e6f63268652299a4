//! A small SVG line-chart writer: logarithmic x axis (base 2, message
//! size) or linear (time), linear y axis from zero, one polyline per
//! series, a legend; charts can be stacked into one document. Enough for
//! the goodput-versus-message-size picture in the README and for
//! `roce-xdp plot` (rates and queue depth over time).

use std::fmt::Write;

/// One line of the chart.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub name: String,
    /// CSS colour.
    pub color: String,
    /// Dashed line (for secondary series).
    pub dashed: bool,
    /// (x, y) points; x must be > 0 (log axis). Sorted by x when drawn.
    pub points: Vec<(f64, f64)>,
}

/// How the x axis maps values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum XScale {
    /// Base-2 logarithmic, ticks at powers of two; x must be > 0. Every
    /// point is marked (a few measured points per series).
    #[default]
    Log2,
    /// Linear from 0, ticks at 1, 2 or 5 times a power of ten; lines only,
    /// no point markers (sampled time series).
    Linear,
}

/// A chart with a log-2 x axis ([`LineChart::to_svg`]) or a linear one
/// ([`LineChart::to_svg_with`]).
#[derive(Debug, Clone)]
pub struct LineChart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub series: Vec<Series>,
    /// Formats an x tick value (e.g. `64 B`, `1 MiB`).
    pub x_tick: fn(f64) -> String,
}

/// Width and height of one chart.
pub const W: f64 = 760.0;
pub const H: f64 = 440.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 190.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 60.0;

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A "nice" tick step (1, 2 or 5 times a power of ten) giving about
/// `target` ticks up to `max`.
fn nice_step(max: f64, target: f64) -> f64 {
    let raw = (max / target).max(f64::MIN_POSITIVE);
    let mag = 10f64.powf(raw.log10().floor());
    let norm = raw / mag;
    let m = if norm <= 1.0 {
        1.0
    } else if norm <= 2.0 {
        2.0
    } else if norm <= 5.0 {
        5.0
    } else {
        10.0
    };
    m * mag
}

impl LineChart {
    /// Renders the chart, log-2 x axis, as a standalone SVG document.
    pub fn to_svg(&self) -> String {
        self.to_svg_with(XScale::Log2)
    }

    /// Renders the chart with the given x axis as a standalone SVG
    /// document ([`W`] x [`H`]).
    pub fn to_svg_with(&self, scale: XScale) -> String {
        let linear = scale == XScale::Linear;
        let drawn =
            |x: f64, y: f64| (if linear { x.is_finite() } else { x > 0.0 }) && y.is_finite();
        let pts = || {
            self.series
                .iter()
                .flat_map(|s| s.points.iter())
                .filter(|(x, y)| drawn(*x, *y))
        };
        let (mut xmin, mut xmax) = pts().fold((f64::INFINITY, 0f64), |(lo, hi), (x, _)| {
            (lo.min(*x), hi.max(*x))
        });
        if !xmin.is_finite() {
            (xmin, xmax) = (1.0, 2.0);
        }
        if linear {
            xmin = 0.0;
            if xmax <= 0.0 {
                xmax = 1.0;
            }
        }
        if xmax <= xmin {
            xmax = xmin * 2.0;
        }
        let ymax_data = pts().fold(0f64, |m, (_, y)| m.max(*y));
        let step = nice_step(if ymax_data > 0.0 { ymax_data } else { 1.0 }, 6.0);
        let ymax = ((ymax_data / step).ceil().max(1.0)) * step;
        let (lx0, lx1) = (xmin.log2(), xmax.log2());
        let pw = W - LEFT - RIGHT;
        let ph = H - TOP - BOTTOM;
        let sx = |x: f64| {
            if linear {
                LEFT + x / xmax * pw
            } else {
                LEFT + (x.log2() - lx0) / (lx1 - lx0) * pw
            }
        };
        let sy = |y: f64| TOP + ph - (y / ymax) * ph;

        let mut o = String::new();
        let _ = writeln!(
            o,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">"#
        );
        let _ = writeln!(o, r#"<rect width="{W}" height="{H}" fill="white"/>"#);
        let _ = writeln!(
            o,
            r#"<text x="{}" y="22" text-anchor="middle" font-size="15">{}</text>"#,
            LEFT + pw / 2.0,
            esc(&self.title)
        );
        // Y grid and ticks.
        let mut y = 0.0;
        while y <= ymax + step / 2.0 {
            let py = sy(y);
            let _ = writeln!(
                o,
                r##"<line x1="{LEFT}" y1="{py:.1}" x2="{:.1}" y2="{py:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
                LEFT + pw,
                LEFT - 6.0,
                py + 4.0,
                trim_num(y)
            );
            y += step;
        }
        // X ticks at powers of two, labelled every other power if crowded
        // (log axis), or at nice steps (linear axis).
        let ticks: Vec<f64> = if linear {
            let step = nice_step(xmax, 8.0);
            (0..)
                .map(|i| f64::from(i) * step)
                .take_while(|x| *x <= xmax * (1.0 + 1e-9))
                .collect()
        } else {
            (lx0.ceil() as i32..=lx1.floor() as i32)
                .map(|e| 2f64.powi(e))
                .collect()
        };
        let every = if !linear && ticks.len() > 11 { 2 } else { 1 };
        for (i, &x) in ticks.iter().enumerate() {
            let px = sx(x);
            let _ = writeln!(
                o,
                r##"<line x1="{px:.1}" y1="{TOP}" x2="{px:.1}" y2="{:.1}" stroke="#eee"/>"##,
                TOP + ph
            );
            if i % every == 0 {
                let _ = writeln!(
                    o,
                    r#"<text x="{px:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
                    TOP + ph + 18.0,
                    esc(&(self.x_tick)(x))
                );
            }
        }
        // Axes and labels.
        let _ = writeln!(
            o,
            r#"<rect x="{LEFT}" y="{TOP}" width="{pw}" height="{ph}" fill="none" stroke="black"/>"#
        );
        let _ = writeln!(
            o,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            LEFT + pw / 2.0,
            H - 15.0,
            esc(&self.x_label)
        );
        let _ = writeln!(
            o,
            r#"<text x="18" y="{:.1}" text-anchor="middle" transform="rotate(-90 18 {:.1})">{}</text>"#,
            TOP + ph / 2.0,
            TOP + ph / 2.0,
            esc(&self.y_label)
        );
        // Series and legend.
        for (i, s) in self.series.iter().enumerate() {
            let mut p: Vec<(f64, f64)> = s
                .points
                .iter()
                .copied()
                .filter(|(x, y)| drawn(*x, *y))
                .collect();
            p.sort_by(|a, b| a.0.total_cmp(&b.0));
            let dash = if s.dashed {
                r#" stroke-dasharray="6 4""#
            } else {
                ""
            };
            if !p.is_empty() {
                let path: Vec<String> = p
                    .iter()
                    .map(|(x, y)| format!("{:.1},{:.1}", sx(*x), sy(*y)))
                    .collect();
                let _ = writeln!(
                    o,
                    r#"<polyline fill="none" stroke="{}" stroke-width="2"{dash} points="{}"/>"#,
                    esc(&s.color),
                    path.join(" ")
                );
                for (x, y) in p.iter().filter(|_| !linear) {
                    let _ = writeln!(
                        o,
                        r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{}"/>"#,
                        sx(*x),
                        sy(*y),
                        esc(&s.color)
                    );
                }
            }
            let ly = TOP + 10.0 + i as f64 * 20.0;
            let lx = LEFT + pw + 15.0;
            let _ = writeln!(
                o,
                r#"<line x1="{lx}" y1="{ly}" x2="{}" y2="{ly}" stroke="{}" stroke-width="2"{dash}/><text x="{}" y="{}">{}{}</text>"#,
                lx + 25.0,
                esc(&s.color),
                lx + 32.0,
                ly + 4.0,
                esc(&s.name),
                if p.is_empty() { " (not measured)" } else { "" }
            );
        }
        o.push_str("</svg>\n");
        o
    }
}

/// Stacks charts rendered by [`LineChart::to_svg_with`] one above the
/// other into one SVG document.
pub fn stack(charts: &[String]) -> String {
    let h = H * charts.len() as f64;
    let mut o = String::new();
    let _ = writeln!(
        o,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{h}" viewBox="0 0 {W} {h}">"#
    );
    for (i, chart) in charts.iter().enumerate() {
        let _ = writeln!(o, r#"<g transform="translate(0,{})">"#, H * i as f64);
        o.push_str(chart);
        o.push_str("</g>\n");
    }
    o.push_str("</svg>\n");
    o
}

fn trim_num(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chart() -> LineChart {
        LineChart {
            title: "goodput <test>".into(),
            x_label: "message size".into(),
            y_label: "Gb/s".into(),
            series: vec![
                Series {
                    name: "a".into(),
                    color: "#1f77b4".into(),
                    dashed: false,
                    points: vec![(64.0, 1.0), (1024.0, 4.0), (1048576.0, 9.5)],
                },
                Series {
                    name: "b".into(),
                    color: "red".into(),
                    dashed: true,
                    points: vec![],
                },
            ],
            x_tick: |x| format!("{x}"),
        }
    }

    #[test]
    fn renders_a_well_formed_document() {
        let svg = chart().to_svg();
        assert!(svg.starts_with("<svg "));
        assert!(svg.trim_end().ends_with("</svg>"));
        assert_eq!(svg.matches("<polyline").count(), 1);
        assert_eq!(svg.matches("<circle").count(), 3);
        assert!(svg.contains("goodput &lt;test&gt;"));
        assert!(svg.contains("b (not measured)"));
        // Open and close tags balance for the elements with bodies.
        assert_eq!(svg.matches("<text").count(), svg.matches("</text>").count());
    }

    #[test]
    fn points_map_into_the_plot_area() {
        let svg = chart().to_svg();
        // Leftmost point at the left edge, rightmost at the right edge.
        assert!(svg.contains(&format!("cx=\"{:.1}\"", LEFT)));
        assert!(svg.contains(&format!("cx=\"{:.1}\"", W - RIGHT)));
        // y axis: 9.5 -> nice max 10, so y=0 sits on the bottom edge.
        assert!(svg.contains(&format!("y1=\"{:.1}\"", H - BOTTOM)));
    }

    #[test]
    fn linear_axis_starts_at_zero_without_markers() {
        let mut c = chart();
        c.series[0].points = vec![(0.0, 1.0), (50.0, 4.0), (100.0, 2.0)];
        let svg = c.to_svg_with(XScale::Linear);
        assert_eq!(svg.matches("<polyline").count(), 1);
        assert_eq!(svg.matches("<circle").count(), 0);
        // x = 0 on the left edge, the largest x on the right edge; ticks
        // every 20 (nice_step(100, 8)).
        assert!(svg.contains(&format!("points=\"{:.1},", LEFT)));
        assert!(svg.contains(&format!("{:.1},", W - RIGHT)));
        for t in ["0", "20", "40", "60", "80", "100"] {
            assert!(
                svg.contains(&format!(r#"text-anchor="middle">{t}</text>"#)),
                "{t}"
            );
        }
        assert!(!svg.contains(r#"text-anchor="middle">120</text>"#));
    }

    #[test]
    fn stacked_charts_share_one_document() {
        let one = chart().to_svg();
        let both = stack(&[one.clone(), one]);
        assert!(both.starts_with("<svg "));
        assert!(both.contains(&format!("height=\"{}\"", 2.0 * H)));
        assert_eq!(both.matches("<svg ").count(), 3);
        assert_eq!(both.matches("</svg>").count(), 3);
        assert!(both.contains(&format!("translate(0,{H})")));
    }

    #[test]
    fn nice_steps() {
        assert_eq!(nice_step(9.5, 6.0), 2.0);
        assert_eq!(nice_step(30.0, 6.0), 5.0);
        assert_eq!(nice_step(0.7, 6.0), 0.2);
    }
}

//! A report rendered: plain text (what the CLI prints), Markdown
//! (`benches/results/results.md`, which the README's results summary links
//! to) and JSON; a [`Table`] as
//! fixed-width text or a GitHub-flavoured Markdown table.

use super::model::Report;
use super::tables::Table;

impl Table {
    /// Fixed-width plain text.
    pub fn to_text(&self) -> String {
        let widths: Vec<usize> = (0..self.header.len())
            .map(|c| {
                std::iter::once(&self.header)
                    .chain(&self.rows)
                    .map(|r| r.get(c).map_or(0, |s| s.chars().count()))
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let line = |r: &[String]| {
            let cells: Vec<String> = r
                .iter()
                .zip(&widths)
                .enumerate()
                .map(|(i, (s, w))| {
                    if i == 0 {
                        format!("{s:<w$}")
                    } else {
                        format!("{s:>w$}")
                    }
                })
                .collect();
            cells.join("  ").trim_end().to_string()
        };
        let mut out = format!("{}\n{}\n", self.title, line(&self.header));
        for r in &self.rows {
            out.push_str(&line(r));
            out.push('\n');
        }
        out
    }

    /// GitHub-flavoured Markdown.
    pub fn to_markdown(&self) -> String {
        let mut out = format!("**{}**\n\n| {} |\n", self.title, self.header.join(" | "));
        let aligns: Vec<&str> = (0..self.header.len())
            .map(|i| if i == 0 { "---" } else { "---:" })
            .collect();
        out.push_str(&format!("|{}|\n", aligns.join("|")));
        for r in &self.rows {
            out.push_str(&format!("| {} |\n", r.join(" | ")));
        }
        out
    }
}

impl Report {
    fn header_lines(&self) -> Vec<String> {
        let m = &self.machine;
        let s = &self.setup;
        vec![
            format!(
                "Run: {} ({} run{}); CPU: {} ({} cores, {:.0} MHz); kernel {}",
                m.date_utc,
                if s.quick { "quick" } else { "full" },
                match &self.section {
                    Some(name) => format!(", section {name} only"),
                    None => String::new(),
                },
                m.cpu_model,
                m.cores,
                m.cpu_mhz,
                m.kernel
            ),
            format!(
                "Link: veth pair in two fresh network namespaces, MTU {}; RoCE PMTU {}; XDP {} mode, AF_XDP {}; batch {}; {:.2} s per throughput point; {} round trips per latency figure",
                s.link_mtu,
                s.roce_pmtu,
                s.xdp_mode,
                if s.xsk_zero_copy { "zero-copy" } else { "copy mode" },
                s.batch,
                s.seconds_per_point,
                s.pingpong_iterations
            ),
        ]
    }

    /// The report as plain text (what the CLI prints).
    pub fn to_text(&self) -> String {
        let mut out = self.header_lines().join("\n");
        out.push_str("\n\n");
        for t in self.tables() {
            out.push_str(&t.to_text());
            out.push('\n');
        }
        for n in &self.notes {
            out.push_str(&format!("note: {n}\n"));
        }
        for m in &self.missing {
            out.push_str(&format!("not measured: {m}\n"));
        }
        out
    }

    /// The report as Markdown (`results.md`, which the README's results
    /// summary links to). `plot` is the file name of the SVG, if written.
    pub fn to_markdown(&self, plot: Option<&str>) -> String {
        let mut out = String::new();
        for l in self.header_lines() {
            out.push_str(&format!("{l}\n\n"));
        }
        out.push_str("Every figure below was measured by that run (`roce-xdp bench --out DIR`); none is written by hand.\n\n");
        if let Some(p) = plot {
            out.push_str(&format!("![goodput versus message size]({p})\n\n"));
        }
        for t in self.tables() {
            out.push_str(&t.to_markdown());
            out.push('\n');
        }
        if !self.notes.is_empty() {
            out.push_str("Notes:\n\n");
            for n in &self.notes {
                out.push_str(&format!("- {n}\n"));
            }
            out.push('\n');
        }
        if !self.missing.is_empty() {
            out.push_str("Not measured in this run:\n\n");
            for m in &self.missing {
                out.push_str(&format!("- {m}\n"));
            }
            out.push('\n');
        }
        out
    }

    /// The report as pretty-printed JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a report always serializes")
    }
}

#[cfg(test)]
mod tests {
    use crate::report::sample::sample;

    #[test]
    fn text_and_markdown_carry_every_figure() {
        let r = sample();
        let text = r.to_text();
        assert!(text.contains("64 KiB"));
        assert!(text.contains("17.00"));
        assert!(text.contains("0.85"));
        assert!(text.contains("not measured: READ: not built"));
        let md = r.to_markdown(Some("goodput.svg"));
        assert!(md.contains("| 64 KiB | 10.00 | 20.00 | 17.00 | n/a | n/a | 0.85 | 1.70 |"));
        assert!(md.contains("![goodput versus message size](goodput.svg)"));
        assert!(md.contains("Test CPU"));
    }
}

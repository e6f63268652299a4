//! What the report says about the machine and the run: UTC date, CPU
//! model and clock, core count, kernel release.

use std::time::{SystemTime, UNIX_EPOCH};

/// Machine and run description, printed with every result.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Machine {
    /// Start of the run, `YYYY-MM-DD HH:MM:SS UTC`.
    pub date_utc: String,
    /// `model name` from /proc/cpuinfo.
    pub cpu_model: String,
    /// `cpu MHz` from /proc/cpuinfo (first CPU), 0 if unknown.
    pub cpu_mhz: f64,
    /// CPUs this process may run on.
    pub cores: usize,
    /// `/proc/sys/kernel/osrelease`.
    pub kernel: String,
}

impl Machine {
    /// Reads the description of this machine now.
    pub fn detect() -> Machine {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let field = |name: &str| -> Option<String> {
            cpuinfo.lines().find_map(|l| {
                let (k, v) = l.split_once(':')?;
                (k.trim() == name).then(|| v.trim().to_string())
            })
        };
        let secs = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        Machine {
            date_utc: format_utc(secs),
            cpu_model: field("model name").unwrap_or_else(|| "unknown".into()),
            cpu_mhz: field("cpu MHz").and_then(|v| v.parse().ok()).unwrap_or(0.0),
            cores: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
            kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .map(|s| s.trim().to_string())
                .unwrap_or_else(|_| "unknown".into()),
        }
    }
}

/// Formats seconds since the Unix epoch as `YYYY-MM-DD HH:MM:SS UTC`.
pub fn format_utc(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        (rem / 60) % 60,
        rem % 60
    )
}

/// Gregorian date of a day count since 1970-01-01 (Howard Hinnant's
/// `civil_from_days` algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_known_instants() {
        assert_eq!(format_utc(0), "1970-01-01 00:00:00 UTC");
        // 2000-02-29 12:34:56 UTC (a leap day).
        assert_eq!(format_utc(951_827_696), "2000-02-29 12:34:56 UTC");
        // 2026-11-29 19:06:57 UTC.
        assert_eq!(format_utc(1_795_979_217), "2026-11-29 19:06:57 UTC");
    }

    #[test]
    fn detects_this_machine() {
        let m = Machine::detect();
        assert!(m.cores >= 1);
        assert!(!m.kernel.is_empty());
    }
}

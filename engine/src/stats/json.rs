//! The few JSON pieces the stats channel writes by hand (the engine crate
//! has no serde): a string literal, escaped.

use std::fmt::Write as _;

/// Appends `s` to `out` as a JSON string.
pub(super) fn json_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

//! Message sizes: parsing `-s` values (`4096`, `64K`, `1M`) and the `-a`
//! list (every power of two from 2 B to 8 MiB, as perftest's `-a`).

/// Smallest size of the `-a` list.
pub const ALL_SIZES_MIN: u64 = 2;
/// Largest size of the `-a` list (8 MiB).
pub const ALL_SIZES_MAX: u64 = 8 << 20;

/// Every power of two from [`ALL_SIZES_MIN`] to [`ALL_SIZES_MAX`].
pub fn all_sizes() -> Vec<u64> {
    let mut v = Vec::new();
    let mut s = ALL_SIZES_MIN;
    while s <= ALL_SIZES_MAX {
        v.push(s);
        s *= 2;
    }
    v
}

/// Parses a byte count: a decimal number with an optional `K`, `M` or `G`
/// suffix (binary multiples, case-insensitive, optional trailing `B`/`iB`).
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let lower = t.to_ascii_lowercase();
    let stripped = lower
        .strip_suffix("ib")
        .or_else(|| lower.strip_suffix('b'))
        .unwrap_or(&lower);
    let (digits, mult) = match stripped.chars().last() {
        Some('k') => (&stripped[..stripped.len() - 1], 1u64 << 10),
        Some('m') => (&stripped[..stripped.len() - 1], 1 << 20),
        Some('g') => (&stripped[..stripped.len() - 1], 1 << 30),
        _ => (stripped, 1),
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("{text:?} is not a size (examples: 4096, 64K, 1M)"))?;
    n.checked_mul(mult)
        .ok_or_else(|| format!("{text:?} is too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_sizes_are_powers_of_two_from_2_to_8mib() {
        let v = all_sizes();
        assert_eq!(v.first(), Some(&2));
        assert_eq!(v.last(), Some(&(8 << 20)));
        assert_eq!(v.len(), 23);
        assert!(v.windows(2).all(|w| w[1] == 2 * w[0]));
    }

    #[test]
    fn parses_suffixes() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("64K"), Ok(65536));
        assert_eq!(parse_size("1m"), Ok(1 << 20));
        assert_eq!(parse_size("2MiB"), Ok(2 << 20));
        assert_eq!(parse_size("8KB"), Ok(8192));
        assert!(parse_size("x").is_err());
        assert!(parse_size("").is_err());
    }
}

//! Lists of queue or core numbers on the command line (`0-3`, `0,2,4-5`).

/// A list of queue or core numbers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuList(pub Vec<usize>);

/// Parses `0-3`, `0,2,4-5` into a sorted list.
pub fn parse_list(s: &str) -> Result<CpuList, String> {
    let mut v = Vec::new();
    for part in s.split(',') {
        let part = part.trim();
        let bad = || format!("{s:?} is not a list like 0-3 or 0,2,4-5");
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) =
                    (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
                if a > b || b - a > 1024 {
                    return Err(bad());
                }
                v.extend(a..=b);
            }
            None => v.push(part.parse().map_err(|_| bad())?),
        }
    }
    v.sort_unstable();
    v.dedup();
    Ok(CpuList(v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_and_singles_sorted_without_duplicates() {
        assert_eq!(parse_list("0-3").unwrap(), CpuList(vec![0, 1, 2, 3]));
        assert_eq!(parse_list("4,0-1,1").unwrap(), CpuList(vec![0, 1, 4]));
        assert!(parse_list("3-1").is_err());
        assert!(parse_list("x").is_err());
    }
}

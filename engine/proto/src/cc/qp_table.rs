//! A fixed-capacity map from a 24-bit QP number to per-QP congestion state.
//!
//! Open addressing with linear probing and backward-shift deletion. All
//! storage is allocated once in [`QpTable::with_capacity`]; lookups, inserts
//! and removals never allocate, so the table can sit on the per-packet path.

/// Returned when a table already holds as many QPs as it was built for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableFull;

impl core::fmt::Display for TableFull {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(
            "congestion-control QP table is full: create the endpoint with a larger max_qps",
        )
    }
}

/// Fixed-capacity QPN -> `T` map (see the module docs).
#[derive(Debug, Clone)]
pub struct QpTable<T> {
    slots: Vec<Option<(u32, T)>>,
    /// `slots.len() - 1`; `slots.len()` is a power of two.
    mask: usize,
    len: usize,
    /// Maximum number of entries (half the slots, so probes stay short).
    max_len: usize,
}

impl<T> QpTable<T> {
    /// A table that can hold `max_qps` QPs (at least one).
    pub fn with_capacity(max_qps: usize) -> Self {
        let max_len = max_qps.max(1);
        let n_slots = (max_len * 2).next_power_of_two();
        let mut slots = Vec::with_capacity(n_slots);
        slots.resize_with(n_slots, || None);
        QpTable {
            slots,
            mask: n_slots - 1,
            len: 0,
            max_len,
        }
    }

    /// Number of QPs held.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True if no QP is held.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Maximum number of QPs this table can hold.
    pub fn capacity(&self) -> usize {
        self.max_len
    }

    fn home(&self, qpn: u32) -> usize {
        // Fibonacci hashing: QPNs are often consecutive; spread them.
        (qpn.wrapping_mul(0x9E37_79B9) as usize).rotate_left(16) & self.mask
    }

    fn find(&self, qpn: u32) -> Option<usize> {
        let mut i = self.home(qpn);
        loop {
            match &self.slots[i] {
                None => return None,
                Some((k, _)) if *k == qpn => return Some(i),
                Some(_) => i = (i + 1) & self.mask,
            }
        }
    }

    /// The state of `qpn`, if present.
    pub fn get(&self, qpn: u32) -> Option<&T> {
        self.find(qpn)
            .and_then(|i| self.slots[i].as_ref().map(|(_, v)| v))
    }

    /// The state of `qpn`, mutably, if present.
    pub fn get_mut(&mut self, qpn: u32) -> Option<&mut T> {
        match self.find(qpn) {
            Some(i) => self.slots[i].as_mut().map(|(_, v)| v),
            None => None,
        }
    }

    /// Insert or replace the state of `qpn`. Fails only when a new QP would
    /// exceed the capacity.
    pub fn insert(&mut self, qpn: u32, value: T) -> Result<&mut T, TableFull> {
        let mut i = self.home(qpn);
        loop {
            match &self.slots[i] {
                Some((k, _)) if *k == qpn => break,
                Some(_) => i = (i + 1) & self.mask,
                None => {
                    if self.len >= self.max_len {
                        return Err(TableFull);
                    }
                    self.len += 1;
                    break;
                }
            }
        }
        self.slots[i] = Some((qpn, value));
        Ok(&mut self.slots[i].as_mut().expect("just inserted").1)
    }

    /// Remove `qpn`, returning its state.
    pub fn remove(&mut self, qpn: u32) -> Option<T> {
        let mut hole = self.find(qpn)?;
        let removed = self.slots[hole].take().map(|(_, v)| v);
        self.len -= 1;
        // Backward-shift deletion: move later entries of the same probe run
        // into the hole when their home position allows it.
        let mut j = hole;
        loop {
            j = (j + 1) & self.mask;
            let home = match &self.slots[j] {
                None => break,
                Some((k, _)) => self.home(*k),
            };
            // Entry at j may move to `hole` if `home` is not cyclically in (hole, j].
            let dist_home_to_j = j.wrapping_sub(home) & self.mask;
            let dist_hole_to_j = j.wrapping_sub(hole) & self.mask;
            if dist_home_to_j >= dist_hole_to_j {
                self.slots[hole] = self.slots[j].take();
                hole = j;
            }
        }
        removed
    }

    /// Iterate over `(qpn, &state)`.
    pub fn iter(&self) -> impl Iterator<Item = (u32, &T)> {
        self.slots
            .iter()
            .filter_map(|s| s.as_ref().map(|(k, v)| (*k, v)))
    }

    /// Iterate over `(qpn, &mut state)`.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (u32, &mut T)> {
        self.slots
            .iter_mut()
            .filter_map(|s| s.as_mut().map(|(k, v)| (*k, v)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_get_remove_many() {
        let mut t = QpTable::with_capacity(64);
        for q in 0..64u32 {
            t.insert(q * 17 + 3, q).unwrap();
        }
        assert_eq!(t.insert(99_999, 0), Err(TableFull));
        for q in 0..64u32 {
            assert_eq!(t.get(q * 17 + 3), Some(&q));
        }
        // Remove every other one; the rest must stay reachable.
        for q in (0..64u32).step_by(2) {
            assert_eq!(t.remove(q * 17 + 3), Some(q));
        }
        for q in 0..64u32 {
            let expect = if q % 2 == 0 { None } else { Some(&q) };
            assert_eq!(t.get(q * 17 + 3), expect);
        }
        assert_eq!(t.len(), 32);
        t.insert(99_999, 7).unwrap();
        assert_eq!(t.get(99_999), Some(&7));
    }

    #[test]
    fn replace_does_not_grow() {
        let mut t = QpTable::with_capacity(1);
        t.insert(5, 1).unwrap();
        t.insert(5, 2).unwrap();
        assert_eq!(t.len(), 1);
        assert_eq!(t.get(5), Some(&2));
        assert_eq!(t.insert(6, 0), Err(TableFull));
    }
}

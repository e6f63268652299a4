//! One bit per QP slot: which QPs may have a frame to send, which may
//! have a deadline (the endpoint visits only those).

/// One bit per QP slot.
#[derive(Debug, Default)]
pub(super) struct SlotBits(Vec<u64>);

impl SlotBits {
    /// Make room for `slots` slots (new bits clear).
    pub(super) fn grow(&mut self, slots: usize) {
        let words = slots.div_ceil(64);
        if self.0.len() < words {
            self.0.resize(words, 0);
        }
    }

    #[inline]
    pub(super) fn set(&mut self, i: usize) {
        if let Some(w) = self.0.get_mut(i / 64) {
            *w |= 1 << (i % 64);
        }
    }

    #[inline]
    pub(super) fn clear(&mut self, i: usize) {
        if let Some(w) = self.0.get_mut(i / 64) {
            *w &= !(1 << (i % 64));
        }
    }

    /// First set slot in `from..to`.
    #[inline]
    pub(super) fn next(&self, from: usize, to: usize) -> Option<usize> {
        let mut i = from;
        while i < to {
            let w = i / 64;
            let bits = self.0.get(w).copied().unwrap_or(0) >> (i % 64);
            if bits != 0 {
                let j = i + bits.trailing_zeros() as usize;
                return (j < to).then_some(j);
            }
            i = (w + 1) * 64;
        }
        None
    }
}

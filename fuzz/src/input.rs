//! Reading a fuzz input as a stream of small decisions: every read past
//! the end yields zeros, so any input is a valid program.

/// The bytes not consumed yet.
pub struct Input<'a>(pub &'a [u8]);

impl Input<'_> {
    /// The next byte, or `None` at the end.
    pub fn byte(&mut self) -> Option<u8> {
        let (&b, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(b)
    }

    /// The next byte, 0 at the end.
    pub fn u8(&mut self) -> u8 {
        self.byte().unwrap_or(0)
    }

    /// The next two bytes, big-endian.
    pub fn u16(&mut self) -> u16 {
        u16::from_be_bytes([self.u8(), self.u8()])
    }

    /// The next four bytes, big-endian.
    pub fn u32(&mut self) -> u32 {
        u32::from_be_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }

    /// The next eight bytes, big-endian.
    pub fn u64(&mut self) -> u64 {
        (u64::from(self.u32()) << 32) | u64::from(self.u32())
    }

    /// A value below `n` (`n > 0`), from one byte.
    pub fn below(&mut self, n: u8) -> u8 {
        self.u8() % n
    }

    /// Up to `max` of the next bytes.
    pub fn take(&mut self, max: usize) -> &[u8] {
        let n = max.min(self.0.len());
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        head
    }

    /// Whether everything was read.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

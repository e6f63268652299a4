//! Invalidate Extended Transport Header (IETH), 4 bytes: the R_Key to
//! invalidate, carried by SEND_LAST/ONLY_WITH_INVALIDATE (IBTA Vol. 1,
//! 9.3.7; opcodes 0x16/0x17).

use super::bytes::{get32, header_view, set32, Field};

/// Byte ranges of the IETH fields.
pub mod field {
    use super::Field;
    pub const RKEY: Field = 0..4;
}

header_view!(
    /// A view of an IETH.
    Ieth,
    4
);

impl<T: AsRef<[u8]>> Ieth<T> {
    /// The R_Key to invalidate.
    #[inline]
    pub fn rkey(&self) -> u32 {
        get32(self.buffer.as_ref(), field::RKEY.start)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ieth<T> {
    /// Set the R_Key to invalidate.
    #[inline]
    pub fn set_rkey(&mut self, value: u32) {
        set32(self.buffer.as_mut(), field::RKEY.start, value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let mut b = [0u8; 4];
        Ieth::new_unchecked(&mut b[..]).set_rkey(0x0102_0304);
        assert_eq!(b, [1, 2, 3, 4]);
        assert_eq!(Ieth::new_checked(&b[..]).unwrap().rkey(), 0x0102_0304);
    }
}

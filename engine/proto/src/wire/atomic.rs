//! Atomic Extended Transport Header (AtomicETH, 28 bytes: VA 8, R_Key 4,
//! swap/add 8, compare 8; COMPARE_SWAP and FETCH_ADD) and Atomic
//! Acknowledge ETH (AtomicAckETH, 8 bytes: the original remote value;
//! ATOMIC_ACKNOWLEDGE). IBTA Vol. 1, 9.3.4 and 9.3.5.

use super::bytes::{get32, get64, header_view, set32, set64, Field};

/// Byte ranges of the AtomicETH fields.
pub mod field {
    use super::Field;
    pub const VA: Field = 0..8;
    pub const RKEY: Field = 8..12;
    pub const SWAP_ADD: Field = 12..20;
    pub const COMPARE: Field = 20..28;
    /// AtomicAckETH: original remote value.
    pub const ORIG: Field = 0..8;
}

header_view!(
    /// A view of an AtomicETH.
    AtomicEth,
    28
);

header_view!(
    /// A view of an AtomicAckETH.
    AtomicAckEth,
    8
);

impl<T: AsRef<[u8]>> AtomicEth<T> {
    /// Virtual address (8-byte aligned in valid requests).
    #[inline]
    pub fn va(&self) -> u64 {
        get64(self.buffer.as_ref(), field::VA.start)
    }
    /// Remote key.
    #[inline]
    pub fn rkey(&self) -> u32 {
        get32(self.buffer.as_ref(), field::RKEY.start)
    }
    /// Swap value (COMPARE_SWAP) or addend (FETCH_ADD).
    #[inline]
    pub fn swap_add(&self) -> u64 {
        get64(self.buffer.as_ref(), field::SWAP_ADD.start)
    }
    /// Compare value (COMPARE_SWAP).
    #[inline]
    pub fn compare(&self) -> u64 {
        get64(self.buffer.as_ref(), field::COMPARE.start)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> AtomicEth<T> {
    /// Set the virtual address.
    #[inline]
    pub fn set_va(&mut self, value: u64) {
        set64(self.buffer.as_mut(), field::VA.start, value)
    }
    /// Set the remote key.
    #[inline]
    pub fn set_rkey(&mut self, value: u32) {
        set32(self.buffer.as_mut(), field::RKEY.start, value)
    }
    /// Set the swap value / addend.
    #[inline]
    pub fn set_swap_add(&mut self, value: u64) {
        set64(self.buffer.as_mut(), field::SWAP_ADD.start, value)
    }
    /// Set the compare value.
    #[inline]
    pub fn set_compare(&mut self, value: u64) {
        set64(self.buffer.as_mut(), field::COMPARE.start, value)
    }
}

impl<T: AsRef<[u8]>> AtomicAckEth<T> {
    /// The original value at the remote address.
    #[inline]
    pub fn orig(&self) -> u64 {
        get64(self.buffer.as_ref(), field::ORIG.start)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> AtomicAckEth<T> {
    /// Set the original value.
    #[inline]
    pub fn set_orig(&mut self, value: u64) {
        set64(self.buffer.as_mut(), field::ORIG.start, value)
    }
}

/// Atomic Extended Transport Header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct AtomicEthRepr {
    pub va: u64,
    pub rkey: u32,
    pub swap_add: u64,
    pub compare: u64,
}

impl AtomicEthRepr {
    /// Read every field.
    #[inline]
    pub fn parse<T: AsRef<[u8]>>(h: &AtomicEth<T>) -> AtomicEthRepr {
        AtomicEthRepr {
            va: h.va(),
            rkey: h.rkey(),
            swap_add: h.swap_add(),
            compare: h.compare(),
        }
    }
    /// Write every field.
    #[inline]
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, h: &mut AtomicEth<T>) {
        h.set_va(self.va);
        h.set_rkey(self.rkey);
        h.set_swap_add(self.swap_add);
        h.set_compare(self.compare);
    }
}

/// Atomic ACK Extended Transport Header: the original remote value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct AtomicAckEthRepr {
    pub orig: u64,
}

impl AtomicAckEthRepr {
    /// Read the field.
    #[inline]
    pub fn parse<T: AsRef<[u8]>>(h: &AtomicAckEth<T>) -> AtomicAckEthRepr {
        AtomicAckEthRepr { orig: h.orig() }
    }
    /// Write the field.
    #[inline]
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, h: &mut AtomicAckEth<T>) {
        h.set_orig(self.orig);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_eth_known_bytes() {
        let r = AtomicEthRepr {
            va: 0x1000,
            rkey: 0x55,
            swap_add: 1,
            compare: u64::MAX,
        };
        let mut b = [0u8; 28];
        r.emit(&mut AtomicEth::new_unchecked(&mut b[..]));
        assert_eq!(&b[0..8], &[0, 0, 0, 0, 0, 0, 0x10, 0]);
        assert_eq!(&b[8..12], &[0, 0, 0, 0x55]);
        assert_eq!(&b[12..20], &[0, 0, 0, 0, 0, 0, 0, 1]);
        assert_eq!(&b[20..28], &[0xFF; 8]);
        assert_eq!(
            AtomicEthRepr::parse(&AtomicEth::new_checked(&b[..]).unwrap()),
            r
        );
        assert!(AtomicEth::new_checked(&b[..27]).is_err());
    }

    #[test]
    fn atomic_ack_round_trip() {
        let mut b = [0u8; 8];
        AtomicAckEthRepr { orig: 42 }.emit(&mut AtomicAckEth::new_unchecked(&mut b[..]));
        assert_eq!(
            AtomicAckEthRepr::parse(&AtomicAckEth::new_checked(&b[..]).unwrap()).orig,
            42
        );
    }
}

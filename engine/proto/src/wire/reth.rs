//! RDMA Extended Transport Header, 16 bytes: virtual address (8), R_Key (4),
//! DMA length (4). Carried by RDMA WRITE First/Only and READ Request
//! (IBTA Vol. 1, 9.3.3).

use super::bytes::{get32, get64, header_view, set32, set64, Field};

/// Byte ranges of the RETH fields.
pub mod field {
    use super::Field;
    pub const VA: Field = 0..8;
    pub const RKEY: Field = 8..12;
    pub const DMA_LEN: Field = 12..16;
}

header_view!(
    /// A view of a RETH.
    Reth,
    16
);

impl<T: AsRef<[u8]>> Reth<T> {
    /// Virtual address.
    #[inline]
    pub fn va(&self) -> u64 {
        get64(self.buffer.as_ref(), field::VA.start)
    }
    /// Remote key.
    #[inline]
    pub fn rkey(&self) -> u32 {
        get32(self.buffer.as_ref(), field::RKEY.start)
    }
    /// DMA length of the whole message.
    #[inline]
    pub fn dma_len(&self) -> u32 {
        get32(self.buffer.as_ref(), field::DMA_LEN.start)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Reth<T> {
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
    /// Set the DMA length.
    #[inline]
    pub fn set_dma_len(&mut self, value: u32) {
        set32(self.buffer.as_mut(), field::DMA_LEN.start, value)
    }
}

/// RDMA Extended Transport Header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct RethRepr {
    pub va: u64,
    pub rkey: u32,
    pub dma_len: u32,
}

impl RethRepr {
    /// Read every field.
    #[inline(always)]
    pub fn parse<T: AsRef<[u8]>>(reth: &Reth<T>) -> RethRepr {
        RethRepr {
            va: reth.va(),
            rkey: reth.rkey(),
            dma_len: reth.dma_len(),
        }
    }
    /// Write every field.
    #[inline]
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, reth: &mut Reth<T>) {
        reth.set_va(self.va);
        reth.set_rkey(self.rkey);
        reth.set_dma_len(self.dma_len);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_bytes() {
        let bytes = [
            1, 2, 3, 4, 5, 6, 7, 8, 0xCA, 0xFE, 0xBA, 0xBE, 0, 0, 0x10, 0,
        ];
        let r = RethRepr::parse(&Reth::new_checked(&bytes[..]).unwrap());
        assert_eq!(
            r,
            RethRepr {
                va: 0x0102_0304_0506_0708,
                rkey: 0xCAFE_BABE,
                dma_len: 4096
            }
        );
        let mut out = [0u8; 16];
        r.emit(&mut Reth::new_unchecked(&mut out[..]));
        assert_eq!(out, bytes);
    }
}

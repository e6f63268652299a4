//! Big-endian field access and the view boilerplate shared by every header
//! file. Callers index within a length they have checked (`check_len`).

pub(crate) type Field = core::ops::Range<usize>;

#[inline(always)]
pub(crate) fn get16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}
#[inline(always)]
pub(crate) fn get24(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([0, b[at], b[at + 1], b[at + 2]])
}
#[inline(always)]
pub(crate) fn get32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}
#[inline(always)]
pub(crate) fn get64(b: &[u8], at: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(x)
}
#[inline(always)]
pub(crate) fn set16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_be_bytes());
}
/// Writes the low 24 bits of `v`.
#[inline(always)]
pub(crate) fn set24(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 3].copy_from_slice(&v.to_be_bytes()[1..]);
}
#[inline(always)]
pub(crate) fn set32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_be_bytes());
}
#[inline(always)]
pub(crate) fn set64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_be_bytes());
}

/// Defines a zero-copy view type over a fixed-length header (smoltcp style):
/// `new_unchecked`, `new_checked`, `check_len`, `into_inner`, `as_bytes`,
/// and `HEADER_LEN`.
macro_rules! header_view {
    ($(#[$meta:meta])* $name:ident, $len:expr) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub struct $name<T: AsRef<[u8]>> {
            buffer: T,
        }

        impl<T: AsRef<[u8]>> $name<T> {
            /// Length of this header in bytes.
            pub const HEADER_LEN: usize = $len;

            /// Wrap `buffer` without checking its length: getters and
            /// setters panic if it is shorter than [`Self::HEADER_LEN`].
            #[inline]
            pub const fn new_unchecked(buffer: T) -> Self {
                Self { buffer }
            }

            /// Wrap `buffer` after checking it holds the whole header.
            #[inline]
            pub fn new_checked(buffer: T) -> Result<Self, $crate::wire::error::ParseError> {
                let view = Self::new_unchecked(buffer);
                view.check_len()?;
                Ok(view)
            }

            /// `Err(Truncated)` if the buffer is shorter than the header.
            #[inline]
            pub fn check_len(&self) -> Result<(), $crate::wire::error::ParseError> {
                if self.buffer.as_ref().len() < Self::HEADER_LEN {
                    Err($crate::wire::error::ParseError::Truncated)
                } else {
                    Ok(())
                }
            }

            /// The wrapped buffer.
            #[inline]
            pub fn into_inner(self) -> T {
                self.buffer
            }

            /// The header bytes.
            #[inline]
            pub fn as_bytes(&self) -> &[u8] {
                &self.buffer.as_ref()[..Self::HEADER_LEN]
            }

            /// Bytes after the header.
            #[inline]
            pub fn payload(&self) -> &[u8] {
                &self.buffer.as_ref()[Self::HEADER_LEN..]
            }
        }

        impl<T: AsRef<[u8]> + AsMut<[u8]>> $name<T> {
            /// Bytes after the header, mutable.
            #[inline]
            pub fn payload_mut(&mut self) -> &mut [u8] {
                &mut self.buffer.as_mut()[Self::HEADER_LEN..]
            }
        }
    };
}
pub(crate) use header_view;

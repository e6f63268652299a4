//! The CRC-32 backend used by the ICRC (one place to swap implementations).
//!
//! All functions use "finalized value" semantics, like zlib's `crc32`:
//! `crc32_update(crc32(a), b) == crc32(a ++ b)`, with `crc32(empty) == 0`.

/// CRC-32 (IEEE, reflected) of 8 bytes of 0xFF, the pseudo-LRH that starts
/// every ICRC. Linux rxe keeps the same value un-inverted as its seed
/// `0xdebb20e3`.
pub const LRH_CRC: u32 = crc32_bitwise(0, &[0xFF; 8]);

/// Extend `crc` (a finished CRC-32 of the bytes so far) with `data`.
#[inline(always)]
pub fn crc32_update(crc: u32, data: &[u8]) -> u32 {
    let mut hasher = crc32fast::Hasher::new_with_initial(crc);
    hasher.update(data);
    hasher.finalize()
}

/// A function that copies `src` into the start of `dst` and returns
/// `crc32_update(crc32_update(crc, prefix), src)` (one pass over the
/// bytes where it can; `prefix` is only CRCed, e.g. a packet's masked
/// headers). Panics if `dst` is shorter than `src` (callers size it).
///
/// The endpoint's templated emit runs the one its configuration names
/// (`EndpointConfig::copy_crc`): by default the portable
/// [`copy_then_update_after`]; the I/O crate sets its SIMD one-pass
/// function (`io::copy_crc`) where the CPU has it. Every such function
/// gives exactly the portable results.
pub type CopyCrc = fn(crc: u32, prefix: &[u8], dst: &mut [u8], src: &[u8]) -> u32;

/// The portable [`CopyCrc`], in two passes: the copy, then the CRC of the
/// prefix and the copied bytes. The default, and what an accelerated one
/// does where one pass does not pay.
pub fn copy_then_update_after(crc: u32, prefix: &[u8], dst: &mut [u8], src: &[u8]) -> u32 {
    let crc = if prefix.is_empty() {
        crc
    } else {
        crc32_update(crc, prefix)
    };
    let dst = &mut dst[..src.len()];
    dst.copy_from_slice(src);
    crc32_update(crc, dst)
}

/// Bitwise CRC-32, usable in `const` context; slow, for constants and tests.
pub const fn crc32_bitwise(crc: u32, data: &[u8]) -> u32 {
    let mut state = !crc;
    let mut i = 0;
    while i < data.len() {
        state ^= data[i] as u32;
        let mut bit = 0;
        while bit < 8 {
            state = if state & 1 != 0 {
                (state >> 1) ^ 0xEDB8_8320
            } else {
                state >> 1
            };
            bit += 1;
        }
        i += 1;
    }
    !state
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lrh_seed_matches_rxe() {
        // rxe_icrc.c: "This seed is the result of computing a CRC with a
        // seed of 0xffffffff and 8 bytes of 0xff" = 0xdebb20e3 (un-inverted).
        assert_eq!(!LRH_CRC, 0xDEBB_20E3);
    }

    #[test]
    fn backend_matches_the_check_value_and_chains() {
        assert_eq!(crc32_update(0, b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32_bitwise(0, b"123456789"), 0xCBF4_3926);
        let data: Vec<u8> = (0..5000u32).map(|i| (i * 7 + 3) as u8).collect();
        for split in [0, 1, 63, 64, 1000, 4999, 5000] {
            let (a, b) = data.split_at(split);
            assert_eq!(crc32_update(crc32_update(0, a), b), crc32_bitwise(0, &data));
        }
    }
}

//! Copy and CRC-32 in one pass: the payload a packet carries is copied
//! from the memory region into its UMEM frame while the ICRC is folded
//! over the same registers, instead of a copy and then a second pass for
//! the CRC (`wire::crc32`'s portable path). On x86-64 with AVX-512 and
//! VPCLMULQDQ it folds 256 bytes per iteration into four 512-bit
//! accumulators (the carry-less-multiply folding of Intel's "Fast CRC
//! Computation for Generic Polynomials Using PCLMULQDQ", with the
//! constants computed below, not copied) and lets `crc32fast` finish the
//! last 16 folded bytes and the tail. [`install`] registers it with
//! `wire::crc32` when the CPU has those features; the results are
//! bit-identical to the portable path (tested below against it).
//!
//! It lives in `io` because it is the engine's one other use of `unsafe`
//! (SIMD intrinsics behind a run-time CPU check); the protocol core stays
//! free of `unsafe` and only sees a safe function.

/// Registers the accelerated copy + CRC with `wire::crc32` if this CPU
/// supports it (idempotent). Returns whether the accelerated path is in
/// use.
pub fn install() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        if x86::supported() {
            crate::wire::crc32::set_copy_crc_accelerator(x86::copy_crc32);
            return true;
        }
    }
    false
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use core::arch::x86_64::{
        __m128i, __m512i, _mm512_broadcast_i32x4, _mm512_castsi512_si128, _mm512_clmulepi64_epi128,
        _mm512_extracti32x4_epi32, _mm512_loadu_si512, _mm512_storeu_si512, _mm512_xor_si512,
        _mm512_zextsi128_si512, _mm_clmulepi64_si128, _mm_cvtsi32_si128, _mm_set_epi64x,
        _mm_storeu_si128, _mm_xor_si128,
    };

    use crate::wire::crc32::crc32_update;

    /// Bytes folded per loop iteration (four 512-bit accumulators).
    const BLOCK: usize = 256;

    /// x^n mod P for the CRC-32 polynomial, bit-reflected and shifted left
    /// by one: the folding constant for the reflected CRC (so that
    /// `fold_constant(544) == 0x154442bd4`, the well-known constant for
    /// folding across 512 bits).
    const fn fold_constant(n: u32) -> i64 {
        const P: u64 = 0x1_04C1_1DB7;
        let mut r: u64 = 1;
        let mut i = 0;
        while i < n {
            r <<= 1;
            if r & (1 << 32) != 0 {
                r ^= P;
            }
            i += 1;
        }
        ((r as u32).reverse_bits() as i64) << 1
    }

    /// (low, high) constants that fold a 128-bit lane forward by `bits`.
    const fn fold_by(bits: u32) -> (i64, i64) {
        (fold_constant(bits + 32), fold_constant(bits - 32))
    }

    const FOLD_2048: (i64, i64) = fold_by(2048);
    const FOLD_512: (i64, i64) = fold_by(512);
    const FOLD_384: (i64, i64) = fold_by(384);
    const FOLD_256: (i64, i64) = fold_by(256);
    const FOLD_128: (i64, i64) = fold_by(128);

    pub(super) fn supported() -> bool {
        std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("vpclmulqdq")
            && std::arch::is_x86_feature_detected!("pclmulqdq")
    }

    /// Copies `src` into `dst[..src.len()]` and returns
    /// `crc32_update(crc, src)`. Only installed after [`supported`].
    pub(super) fn copy_crc32(crc: u32, dst: &mut [u8], src: &[u8]) -> u32 {
        let dst = &mut dst[..src.len()];
        if src.len() < BLOCK {
            dst.copy_from_slice(src);
            return crc32_update(crc, src);
        }
        let folded = src.len() / 64 * 64;
        // SAFETY: `install` registers this function only when
        // `supported()` saw AVX-512F, VPCLMULQDQ and PCLMULQDQ; the lengths
        // passed are within both slices (folded <= src.len() == dst.len(),
        // folded >= BLOCK, a multiple of 64).
        let lanes = unsafe { fold_copy(crc, dst.as_mut_ptr(), src.as_ptr(), folded) };
        // The folded value stands for the first `folded` bytes (with the
        // starting CRC in): CRC it from a zero register (finalized form:
        // start from !0), then continue over the tail.
        let mid = crc32_update(!0, &lanes);
        let tail = &src[folded..];
        if tail.is_empty() {
            return mid;
        }
        dst[folded..].copy_from_slice(tail);
        crc32_update(mid, tail)
    }

    /// Folds `len` bytes (a multiple of 64, at least 256) of `src` into
    /// one 128-bit value while copying them to `dst`; returns its 16 bytes.
    ///
    /// # Safety
    /// The CPU must support AVX-512F, VPCLMULQDQ and PCLMULQDQ; `src` and
    /// `dst` must be valid for `len` bytes of reads and writes and must
    /// not overlap.
    #[target_feature(enable = "avx512f,vpclmulqdq,pclmulqdq,sse2")]
    unsafe fn fold_copy(crc: u32, dst: *mut u8, src: *const u8, len: usize) -> [u8; 16] {
        // SAFETY (whole body): every load reads 64 bytes at src + off and
        // every store writes 64 bytes at dst + off with off + 64 <= len
        // (unaligned forms); the intrinsics' features are enabled above.
        unsafe {
            let load = |off: usize| _mm512_loadu_si512(src.add(off) as *const __m512i);
            let store =
                |off: usize, v: __m512i| _mm512_storeu_si512(dst.add(off) as *mut __m512i, v);
            let keys = |k: (i64, i64)| _mm512_broadcast_i32x4(_mm_set_epi64x(k.1, k.0));
            // a folded forward onto b: b ^ a.lo * k.lo ^ a.hi * k.hi, per lane.
            let fold = |a: __m512i, b: __m512i, k: __m512i| {
                let lo = _mm512_clmulepi64_epi128::<0x00>(a, k);
                let hi = _mm512_clmulepi64_epi128::<0x11>(a, k);
                _mm512_xor_si512(_mm512_xor_si512(lo, hi), b)
            };

            let mut x = [load(0), load(64), load(128), load(192)];
            for (i, v) in x.iter().enumerate() {
                store(i * 64, *v);
            }
            // The starting CRC goes into the first 32 bits of the message.
            let init = _mm512_zextsi128_si512(_mm_cvtsi32_si128(!crc as i32));
            x[0] = _mm512_xor_si512(x[0], init);

            let k2048 = keys(FOLD_2048);
            let mut off = BLOCK;
            while off + BLOCK <= len {
                for (i, acc) in x.iter_mut().enumerate() {
                    let v = load(off + i * 64);
                    store(off + i * 64, v);
                    *acc = fold(*acc, v, k2048);
                }
                off += BLOCK;
            }
            let k512 = keys(FOLD_512);
            let mut acc = fold(x[0], x[1], k512);
            acc = fold(acc, x[2], k512);
            acc = fold(acc, x[3], k512);
            while off + 64 <= len {
                let v = load(off);
                store(off, v);
                acc = fold(acc, v, k512);
                off += 64;
            }

            // Four lanes into one: each lane folded forward onto the last.
            let lane = |i: i32| -> __m128i {
                match i {
                    0 => _mm512_castsi512_si128(acc),
                    1 => _mm512_extracti32x4_epi32::<1>(acc),
                    2 => _mm512_extracti32x4_epi32::<2>(acc),
                    _ => _mm512_extracti32x4_epi32::<3>(acc),
                }
            };
            let fold128 = |a: __m128i, k: (i64, i64)| {
                let k = _mm_set_epi64x(k.1, k.0);
                _mm_xor_si128(
                    _mm_clmulepi64_si128::<0x00>(a, k),
                    _mm_clmulepi64_si128::<0x11>(a, k),
                )
            };
            let mut r = lane(3);
            r = _mm_xor_si128(r, fold128(lane(0), FOLD_384));
            r = _mm_xor_si128(r, fold128(lane(1), FOLD_256));
            r = _mm_xor_si128(r, fold128(lane(2), FOLD_128));
            let mut out = [0u8; 16];
            _mm_storeu_si128(out.as_mut_ptr() as *mut __m128i, r);
            out
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn constants_match_the_published_ones() {
            assert_eq!(fold_by(512), (0x1_5444_2bd4, 0x1_c6e4_1596));
            assert_eq!(fold_by(128), (0x1_7519_97d0, 0x0_ccaa_009e));
        }

        /// A deterministic byte pattern with no short period.
        fn data(n: usize, seed: u64) -> Vec<u8> {
            let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
            (0..n)
                .map(|_| {
                    s ^= s << 13;
                    s ^= s >> 7;
                    s ^= s << 17;
                    s as u8
                })
                .collect()
        }

        #[test]
        fn equals_copy_then_crc_for_every_length_and_alignment() {
            if !supported() {
                eprintln!("skipping: this CPU has no AVX-512 VPCLMULQDQ");
                return;
            }
            let src_all = data(9000, 1);
            let mut lengths: Vec<usize> = (0..=1100).collect();
            lengths.extend([2047, 2048, 2049, 4095, 4096, 4097, 4154, 8191, 8192, 8960]);
            for (k, &len) in lengths.iter().enumerate() {
                let s_off = k % 7;
                let d_off = (k * 5) % 64;
                let src = &src_all[s_off..s_off + len];
                let crc_in = (k as u32).wrapping_mul(0x0101_0101) ^ 0xDEAD_BEEF;
                let mut dst = vec![0xAAu8; len + 64 + 16];
                let got = copy_crc32(crc_in, &mut dst[d_off..], src);
                assert_eq!(got, crc32_update(crc_in, src), "length {len}");
                assert_eq!(&dst[d_off..d_off + len], src, "copy, length {len}");
                assert!(dst[..d_off].iter().all(|&b| b == 0xAA), "before, {len}");
                assert!(
                    dst[d_off + len..].iter().all(|&b| b == 0xAA),
                    "after, {len}"
                );
            }
        }

        #[test]
        fn chains_like_the_portable_crc() {
            if !supported() {
                return;
            }
            let a = data(300, 2);
            let b = data(5000, 3);
            let mut dst = vec![0u8; 5300];
            let c = copy_crc32(0, &mut dst[..300], &a);
            let c = copy_crc32(c, &mut dst[300..], &b);
            let mut all = a.clone();
            all.extend(&b);
            assert_eq!(c, crc32_update(0, &all));
            assert_eq!(dst, all);
        }
    }
}

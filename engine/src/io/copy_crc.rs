//! Copy and CRC-32 in one pass: the payload a packet carries is copied
//! from the memory region into its UMEM frame while the ICRC is folded
//! over the same registers, instead of a copy and then a second pass for
//! the CRC (`wire::crc32`'s portable path). On x86-64 with AVX-512 and
//! VPCLMULQDQ it folds 256 bytes per iteration into four 512-bit
//! accumulators (the carry-less-multiply folding of Intel's "Fast CRC
//! Computation for Generic Polynomials Using PCLMULQDQ", with the
//! constants computed below, not copied). The packet's masked headers
//! (up to 128 bytes, CRCed but not copied) ride in front of the payload as
//! one or two extra blocks, and the last 16 folded bytes are reduced to
//! the CRC by Barrett's method in registers, so a 4 KiB packet makes no
//! call to a table-driven CRC; only a tail under 64 bytes goes to
//! `crc32fast`. [`best`] returns it when the CPU has those features (the
//! portable path otherwise), for the endpoints the engine builds
//! (`EndpointConfig::copy_crc`); the results are bit-identical to the
//! portable path.
//! The tests below check both paths against a bitwise CRC on any CPU that
//! runs them, and the reduction's arithmetic through a portable model on
//! every CPU; where the CPU lacks the one-pass path they say so (and fail
//! if `ROCE_XDP_REQUIRE_ONE_PASS_CRC` is set).
//!
//! It lives in `io` because it is the engine's one other use of `unsafe`
//! (SIMD intrinsics behind a run-time CPU check); the protocol core stays
//! free of `unsafe` and only sees a safe function.

use crate::wire::crc32::{copy_then_update_after, CopyCrc};

/// The one-pass copy + CRC, if this CPU supports it.
pub fn one_pass() -> Option<CopyCrc> {
    #[cfg(target_arch = "x86_64")]
    {
        if x86::supported() {
            return Some(x86::copy_crc32);
        }
    }
    None
}

/// The fastest copy + CRC for this CPU: [`one_pass`] where it is
/// supported, the portable two passes otherwise.
pub fn best() -> CopyCrc {
    one_pass().unwrap_or(copy_then_update_after)
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use core::arch::x86_64::{
        __m128i, __m512i, _mm512_broadcast_i32x4, _mm512_castsi512_si128, _mm512_clmulepi64_epi128,
        _mm512_extracti32x4_epi32, _mm512_loadu_si512, _mm512_maskz_loadu_epi8,
        _mm512_maskz_permutexvar_epi8, _mm512_set1_epi8, _mm512_setzero_si512, _mm512_storeu_si512,
        _mm512_sub_epi8, _mm512_xor_si512, _mm512_zextsi128_si512, _mm_and_si128,
        _mm_clmulepi64_si128, _mm_cvtsi32_si128, _mm_extract_epi32, _mm_set_epi64x, _mm_setr_epi32,
        _mm_srli_si128, _mm_xor_si128,
    };

    use crate::wire::crc32::{copy_then_update_after, crc32_update};

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
            && std::arch::is_x86_feature_detected!("sse4.1")
            && std::arch::is_x86_feature_detected!("avx512bw")
            && std::arch::is_x86_feature_detected!("avx512vbmi")
    }

    /// Longest prefix folded in with the payload (two 64-byte blocks).
    const MAX_PREFIX: usize = 128;

    /// Byte lane numbers 0..64 (the permutation that right-aligns a
    /// prefix subtracts its shift from them).
    static IOTA: [u8; 64] = {
        let mut t = [0u8; 64];
        let mut i = 0;
        while i < 64 {
            t[i] = i as u8;
            i += 1;
        }
        t
    };

    /// Copies `src` into `dst[..src.len()]` and returns
    /// `crc32_update(crc32_update(crc, prefix), src)`. Only installed after
    /// [`supported`].
    ///
    /// A prefix of 4 to 128 bytes is folded in the same pass: placed at
    /// the end of one or two zeroed 64-byte blocks with the starting CRC
    /// xored into its first four bytes, it stands for the same remainder
    /// (zeros in front of a message whose starting state is zero do not
    /// change its CRC), and the stream of blocks then goes on with `src`.
    pub(super) fn copy_crc32(crc: u32, prefix: &[u8], dst: &mut [u8], src: &[u8]) -> u32 {
        let dst = &mut dst[..src.len()];
        let plen = prefix.len();
        // The prefix's first block holds its first plen - 64 * (blocks - 1)
        // bytes; the starting CRC goes into its first four.
        let pre_len = if plen == 0 {
            0
        } else if plen <= MAX_PREFIX && (plen - 1) % 64 + 1 >= 4 {
            plen.div_ceil(64) * 64
        } else {
            // Odd prefixes: CRC them apart.
            return copy_crc32(crc32_update(crc, prefix), &[], dst, src);
        };
        if pre_len + src.len() < BLOCK {
            return copy_then_update_after(crc, prefix, dst, src);
        }
        let folded = (pre_len + src.len()) / 64 * 64 - pre_len;
        // SAFETY: `install` registers this function only when `supported()`
        // saw every feature fold_copy enables; the lengths passed are within
        // both slices (folded <= src.len() == dst.len()); the prefix is
        // empty or 4..=128 bytes with at least 4 in its first block, and
        // pre_len + folded is a multiple of 64 and at least BLOCK.
        let state = unsafe { fold_copy(!crc, prefix, dst.as_mut_ptr(), src.as_ptr(), folded) };
        let tail = &src[folded..];
        if tail.is_empty() {
            return !state;
        }
        dst[folded..].copy_from_slice(tail);
        crc32_update(!state, tail)
    }

    /// Folds `prefix` (right-aligned in one or two zeroed 64-byte blocks,
    /// `state` xored into its first four bytes) and then `len` bytes of
    /// `src` (copying those to `dst`) into the CRC-32 state they leave (not
    /// inverted). Without a prefix, `state` (the inverted starting CRC) is
    /// applied to the start of `src`.
    ///
    /// # Safety
    /// The CPU must support every feature enabled below; `prefix` must be
    /// empty or 4..=128 bytes long with at least 4 bytes in its first
    /// block ((len - 1) % 64 + 1 >= 4); `blocks * 64 + len` (blocks = the
    /// prefix's) must be a multiple of 64 and at least [`BLOCK`]; `src`
    /// and `dst` must be valid for `len` bytes of reads and writes and
    /// must not overlap.
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi,vpclmulqdq,pclmulqdq,sse2,sse4.1")]
    unsafe fn fold_copy(
        state: u32,
        prefix: &[u8],
        dst: *mut u8,
        src: *const u8,
        len: usize,
    ) -> u32 {
        // SAFETY (whole body): every load reads 64 bytes at src + off and
        // every store writes 64 bytes at dst + off with off + 64 <= len
        // (unaligned forms); the prefix is read with a byte mask that
        // covers only its own bytes, or 64 bytes ending at its end; the
        // intrinsics' features are enabled above.
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
            let init = _mm512_zextsi128_si512(_mm_cvtsi32_si128(state as i32));

            // The prefix blocks: the first holds the prefix's first `head`
            // bytes at its end (loaded to the start, the state xored in,
            // then moved up by a byte permutation), the second, if any, the
            // last 64 bytes.
            let mut x = [_mm512_setzero_si512(); 4];
            let pre_blocks = prefix.len().div_ceil(64);
            if pre_blocks > 0 {
                let head = (prefix.len() - 1) % 64 + 1;
                let low =
                    _mm512_maskz_loadu_epi8(u64::MAX >> (64 - head), prefix.as_ptr() as *const i8);
                let low = _mm512_xor_si512(low, init);
                let shift = (64 - head) as i8;
                let index = _mm512_sub_epi8(
                    _mm512_loadu_si512(IOTA.as_ptr() as *const __m512i),
                    _mm512_set1_epi8(shift),
                );
                x[0] = _mm512_maskz_permutexvar_epi8(u64::MAX << (64 - head), index, low);
                if pre_blocks == 2 {
                    x[1] = _mm512_loadu_si512(prefix.as_ptr().add(head) as *const __m512i);
                }
            }
            // Then the start of src.
            let mut off = 0;
            for acc in x.iter_mut().skip(pre_blocks) {
                *acc = load(off);
                store(off, *acc);
                off += 64;
            }
            if pre_blocks == 0 {
                // The starting state goes into the first 32 bits of src.
                x[0] = _mm512_xor_si512(x[0], init);
            }

            let k2048 = keys(FOLD_2048);
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
            reduce128(r)
        }
    }

    /// x^64 mod P (reflected, shifted): folds 32 bits onto the next 64.
    const FOLD_64: i64 = fold_constant(64);
    /// x^96 mod P: folds the low 64 bits of 128 onto the high 64.
    const FOLD_96: i64 = fold_constant(96);
    /// The CRC-32 polynomial with its x^32 term, bit-reflected (33 bits).
    const POLY_REFLECTED: i64 = (((0x1_04C1_1DB7u64 as u32).reverse_bits() as i64) << 1) | 1;
    /// Barrett's mu = floor(x^64 / P), bit-reflected (33 bits).
    const MU_REFLECTED: i64 = barrett_mu();

    /// floor(x^64 / P) by long division over GF(2), bit-reflected over 33
    /// bits (the form the reflected reduction multiplies by).
    const fn barrett_mu() -> i64 {
        const P: u128 = 0x1_04C1_1DB7;
        let mut rem: u128 = 1 << 64;
        let mut q: u64 = 0;
        let mut bit = 64;
        while bit >= 32 {
            if rem & (1 << bit) != 0 {
                rem ^= P << (bit - 32);
                q |= 1 << (bit - 32);
            }
            bit -= 1;
        }
        // q has 33 bits (x^32 .. x^0); reflect them.
        ((q.reverse_bits() >> 31) as i64) & 0x1_FFFF_FFFF
    }

    /// The CRC-32 state left by a 16-byte folded value `r` (as CRCing its
    /// bytes from state zero): 128 bits folded to 64, then Barrett's
    /// reduction to 32 ("Fast CRC Computation ... Using PCLMULQDQ").
    ///
    /// # Safety
    /// The CPU must support PCLMULQDQ and SSE4.1.
    #[target_feature(enable = "pclmulqdq,sse2,sse4.1")]
    unsafe fn reduce128(r: __m128i) -> u32 {
        let low32 = _mm_setr_epi32(-1, 0, -1, 0);
        // 128 -> 64: the low 64 bits times x^96 onto the high 64.
        let k = _mm_set_epi64x(FOLD_64, FOLD_96);
        let x = _mm_xor_si128(_mm_srli_si128::<8>(r), _mm_clmulepi64_si128::<0x00>(r, k));
        // 64 -> 32 + 64: the low 32 bits times x^64 onto the rest.
        let x = _mm_xor_si128(
            _mm_srli_si128::<4>(x),
            _mm_clmulepi64_si128::<0x10>(_mm_and_si128(x, low32), k),
        );
        // Barrett: q = (low 32 bits * mu) mod x^32, then x ^ q * P.
        let m = _mm_set_epi64x(MU_REFLECTED, POLY_REFLECTED);
        let q = _mm_clmulepi64_si128::<0x10>(_mm_and_si128(x, low32), m);
        let q = _mm_clmulepi64_si128::<0x00>(_mm_and_si128(q, low32), m);
        _mm_extract_epi32::<1>(_mm_xor_si128(x, q)) as u32
    }

    #[cfg(test)]
    mod tests {
        use super::*;
        use crate::wire::crc32::{crc32_bitwise, CopyCrc};

        /// Set (to anything) on a machine that must exercise the one-pass
        /// path, e.g. a CI runner with AVX-512: a test that finds the CPU
        /// without it then fails instead of testing the portable path only.
        const REQUIRE: &str = "ROCE_XDP_REQUIRE_ONE_PASS_CRC";

        /// Whether this CPU runs the one-pass path. Where it does not, says
        /// on stderr that `test` covered the portable path only, or fails
        /// the test if [`REQUIRE`] is set.
        fn one_pass_here(test: &str) -> bool {
            if supported() {
                return true;
            }
            assert!(
                std::env::var_os(REQUIRE).is_none(),
                "{REQUIRE} is set but this CPU lacks AVX-512 (F, BW, VBMI) with \
                 VPCLMULQDQ: run on one that has them (Ice Lake, Zen 4 or later) or unset it"
            );
            eprintln!(
                "{test}: this CPU lacks AVX-512 VPCLMULQDQ: the one-pass path was not \
                 tested here, the portable path was (set {REQUIRE} to make this an error)"
            );
            false
        }

        /// The copy + CRC implementations to check on this CPU: the
        /// portable two-pass one (an endpoint's default) always,
        /// the one-pass one where the CPU runs it.
        fn implementations(test: &str) -> Vec<(&'static str, CopyCrc)> {
            let mut v: Vec<(&'static str, CopyCrc)> = vec![("portable", copy_then_update_after)];
            if one_pass_here(test) {
                v.push(("one-pass", copy_crc32));
            }
            v
        }

        /// Carry-less product of two 64-bit polynomials over GF(2).
        fn clmul(a: u64, b: u64) -> u128 {
            (0..64)
                .filter(|i| (b >> i) & 1 == 1)
                .fold(0, |r, i| r ^ (u128::from(a) << i))
        }

        /// [`reduce128`] step by step in portable integer arithmetic, with
        /// the same constants: each `_mm_clmulepi64_si128` a [`clmul`] of
        /// the quadwords its selector names, each byte shift a shift, each
        /// `low32` mask a truncation to 32 bits.
        fn reduce128_model(r: u128) -> u32 {
            let x = (r >> 64) ^ clmul(r as u64, FOLD_96 as u64);
            let x = (x >> 32) ^ clmul(u64::from(x as u32), FOLD_64 as u64);
            let q = clmul(u64::from(x as u32), MU_REFLECTED as u64);
            let q = clmul(u64::from(q as u32), POLY_REFLECTED as u64);
            ((x ^ q) >> 32) as u32
        }

        #[test]
        fn constants_match_the_published_ones() {
            assert_eq!(fold_by(512), (0x1_5444_2bd4, 0x1_c6e4_1596));
            assert_eq!(fold_by(128), (0x1_7519_97d0, 0x0_ccaa_009e));
            // The reduction's: x^64 mod P, P and mu bit-reflected.
            assert_eq!(FOLD_64, 0x1_63cd_6124);
            assert_eq!(POLY_REFLECTED, 0x1_db71_0641);
            assert_eq!(MU_REFLECTED, 0x1_f701_1641);
        }

        /// The reduction's arithmetic and constants, on every CPU through
        /// [`reduce128_model`]; the instructions themselves where the CPU
        /// has them.
        #[test]
        fn reduction_equals_the_crc_of_the_16_bytes() {
            let hardware = one_pass_here("reduction_equals_the_crc_of_the_16_bytes");
            for seed in 0..2000 {
                let b = data(16, seed);
                let want = crc32_bitwise(!0, &b);
                let r = u128::from_le_bytes(b.clone().try_into().unwrap());
                assert_eq!(!reduce128_model(r), want, "model, seed {seed}");
                if hardware {
                    // SAFETY: supported() saw PCLMULQDQ and SSE4.1; b has 16 bytes.
                    let got = unsafe {
                        reduce128(core::arch::x86_64::_mm_loadu_si128(
                            b.as_ptr() as *const __m128i
                        ))
                    };
                    assert_eq!(!got, want, "seed {seed}");
                }
            }
        }

        #[test]
        fn prefix_and_copy_equal_two_crcs_and_a_copy() {
            let src_all = data(5000, 4);
            let prefixes = data(200, 5);
            for (name, copy_crc) in implementations("prefix_and_copy_equal_two_crcs_and_a_copy") {
                for plen in [
                    0, 1, 3, 4, 5, 40, 56, 63, 64, 65, 66, 67, 68, 76, 84, 100, 127, 128, 129, 200,
                ] {
                    for len in [
                        0, 1, 60, 64, 127, 128, 129, 191, 192, 193, 255, 256, 4096, 4097,
                    ] {
                        let prefix = &prefixes[..plen];
                        let src = &src_all[plen % 5..plen % 5 + len];
                        let crc_in = (plen * 31 + len) as u32 ^ 0x1234_5678;
                        let mut dst = vec![0xAAu8; len + 8];
                        let got = copy_crc(crc_in, prefix, &mut dst, src);
                        let want = crc32_bitwise(crc32_bitwise(crc_in, prefix), src);
                        assert_eq!(got, want, "{name}: prefix {plen}, length {len}");
                        assert_eq!(
                            &dst[..len],
                            src,
                            "{name}: copy, prefix {plen}, length {len}"
                        );
                        assert!(
                            dst[len..].iter().all(|&b| b == 0xAA),
                            "{name}: after, {plen} {len}"
                        );
                    }
                }
            }
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
            let src_all = data(9000, 1);
            let mut lengths: Vec<usize> = (0..=1100).collect();
            lengths.extend([2047, 2048, 2049, 4095, 4096, 4097, 4154, 8191, 8192, 8960]);
            for (name, copy_crc) in
                implementations("equals_copy_then_crc_for_every_length_and_alignment")
            {
                for (k, &len) in lengths.iter().enumerate() {
                    let s_off = k % 7;
                    let d_off = (k * 5) % 64;
                    let src = &src_all[s_off..s_off + len];
                    let crc_in = (k as u32).wrapping_mul(0x0101_0101) ^ 0xDEAD_BEEF;
                    let mut dst = vec![0xAAu8; len + 64 + 16];
                    let got = copy_crc(crc_in, &[], &mut dst[d_off..], src);
                    assert_eq!(got, crc32_bitwise(crc_in, src), "{name}: length {len}");
                    assert_eq!(&dst[d_off..d_off + len], src, "{name}: copy, length {len}");
                    assert!(
                        dst[..d_off].iter().all(|&b| b == 0xAA),
                        "{name}: before, {len}"
                    );
                    assert!(
                        dst[d_off + len..].iter().all(|&b| b == 0xAA),
                        "{name}: after, {len}"
                    );
                }
            }
        }

        #[test]
        fn chains_like_the_portable_crc() {
            let a = data(300, 2);
            let b = data(5000, 3);
            let mut all = a.clone();
            all.extend(&b);
            for (name, copy_crc) in implementations("chains_like_the_portable_crc") {
                let mut dst = vec![0u8; 5300];
                let c = copy_crc(0, &[], &mut dst[..300], &a);
                let c = copy_crc(c, &[], &mut dst[300..], &b);
                assert_eq!(c, crc32_update(0, &all), "{name}");
                assert_eq!(c, crc32_bitwise(0, &all), "{name}");
                assert_eq!(dst, all, "{name}");
            }
        }
    }
}

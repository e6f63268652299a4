//! The Internet checksum (RFC 1071): IPv4 header checksum and the UDP
//! checksum over IPv6 (RFC 8200 section 8.1 makes it mandatory there).

/// One's-complement sum of `data` as big-endian 16-bit words (an odd last
/// byte is padded with zero), added to `acc`; not folded.
#[inline]
pub fn sum(mut acc: u64, data: &[u8]) -> u64 {
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        let w = u64::from_be_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        // Add the two 32-bit halves: each fits, carries stay in the u64 for
        // any realistic length (< 2^32 words).
        acc += (w >> 32) + (w & 0xFFFF_FFFF);
    }
    let rest = chunks.remainder();
    let mut words = rest.chunks_exact(2);
    for w in &mut words {
        acc += u16::from_be_bytes([w[0], w[1]]) as u64;
    }
    if let [last] = words.remainder() {
        acc += (*last as u64) << 8;
    }
    acc
}

/// Fold a sum to 16 bits and complement it.
#[inline]
pub fn finish(mut acc: u64) -> u16 {
    while acc > 0xFFFF {
        acc = (acc & 0xFFFF) + (acc >> 16);
    }
    !(acc as u16)
}

/// Checksum of `data` (e.g. an IPv4 header with its checksum field zeroed).
/// A correct header including its checksum gives 0.
#[inline]
pub fn checksum(data: &[u8]) -> u16 {
    finish(sum(0, data))
}

/// UDP checksum over IPv6: pseudo-header (source, destination, upper-layer
/// length, next header 17) plus the UDP header (checksum field zero) and
/// data. A computed 0 is sent as 0xFFFF (RFC 8200 section 8.1).
pub fn udp_ipv6(src: &[u8; 16], dst: &[u8; 16], udp: &[u8]) -> u16 {
    let mut acc = sum(0, src);
    acc = sum(acc, dst);
    acc += udp.len() as u64;
    acc += 17;
    acc = sum(acc, udp);
    match finish(acc) {
        0 => 0xFFFF,
        c => c,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc1071_example_header() {
        // A classic IPv4 header (wikipedia "IPv4 header checksum" example).
        let hdr = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        assert_eq!(checksum(&hdr), 0xb861);
        let mut with = hdr;
        with[10..12].copy_from_slice(&0xb861u16.to_be_bytes());
        assert_eq!(checksum(&with), 0);
    }

    #[test]
    fn odd_lengths_and_chunking_agree_with_wordwise_sum() {
        let data: Vec<u8> = (0..1001u32).map(|i| (i * 31 + 7) as u8).collect();
        for len in [0, 1, 2, 7, 8, 9, 15, 16, 17, 1000, 1001] {
            let d = &data[..len];
            let mut naive: u64 = 0;
            for pair in d.chunks(2) {
                naive += ((pair[0] as u64) << 8) | pair.get(1).copied().unwrap_or(0) as u64;
            }
            assert_eq!(finish(sum(0, d)), finish(naive), "len {len}");
        }
    }
}

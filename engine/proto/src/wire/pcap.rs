//! Reading packet captures held in memory: classic pcap (micro- and
//! nanosecond magic, either byte order) and pcapng (section header,
//! interface description, enhanced and simple packet blocks, either byte
//! order). Only Ethernet link types are accepted. No I/O: the caller reads
//! the file; this walks its bytes without copying the frames.
//!
//! Formats: libpcap's "pcap-savefile(5)" and the IETF draft "PCAP Next
//! Generation (pcapng) Capture File Format".

/// Link type of Ethernet captures (LINKTYPE_ETHERNET).
pub const LINKTYPE_ETHERNET: u32 = 1;

const MAGIC_MICROS: u32 = 0xA1B2_C3D4;
const MAGIC_NANOS: u32 = 0xA1B2_3C4D;
const PCAPNG_SHB: u32 = 0x0A0D_0D0A;
const PCAPNG_BYTE_ORDER: u32 = 0x1A2B_3C4D;
const PCAPNG_IDB: u32 = 1;
const PCAPNG_SPB: u32 = 3;
const PCAPNG_EPB: u32 = 6;
/// pcapng interfaces tracked (more than this is refused).
const MAX_INTERFACES: usize = 64;

/// Why the bytes are not a capture this reader understands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PcapError {
    /// The file does not start with a pcap or pcapng magic number.
    #[error(
        "not a pcap or pcapng file (unknown magic number); capture with tcpdump -w or tshark -w"
    )]
    NotPcap,
    /// The capture's link type is not Ethernet.
    #[error("unsupported link type {0}: only Ethernet captures (link type 1) are supported")]
    UnsupportedLinkType(u32),
    /// A header or record runs past the end of the file.
    #[error("capture is truncated at byte {0}")]
    Truncated(usize),
    /// A pcapng block is malformed (bad length or unknown interface).
    #[error("malformed pcapng block at byte {0}")]
    BadBlock(usize),
}

/// One captured frame, borrowed from the capture bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record<'a> {
    /// Timestamp in nanoseconds since the Unix epoch (as recorded).
    pub timestamp_ns: u64,
    /// Length of the frame on the wire (may exceed `data.len()` if the
    /// capture was cut with a snap length).
    pub orig_len: u32,
    /// The captured bytes.
    pub data: &'a [u8],
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Classic { nanos: bool },
    PcapNg,
}

/// An iterator over the records of a capture held in memory.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
    big_endian: bool,
    format: Format,
    /// pcapng: per-interface timestamp resolution as (units per second).
    if_units: [u64; MAX_INTERFACES],
    interfaces: usize,
    failed: bool,
}

impl<'a> Reader<'a> {
    /// Check the file header and prepare to iterate over records.
    pub fn new(bytes: &'a [u8]) -> Result<Self, PcapError> {
        if bytes.len() < 4 {
            return Err(PcapError::NotPcap);
        }
        let le = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
        let be = u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
        let mut reader = Reader {
            bytes,
            pos: 0,
            big_endian: false,
            format: Format::PcapNg,
            if_units: [1_000_000; MAX_INTERFACES],
            interfaces: 0,
            failed: false,
        };
        let classic = |big_endian, nanos| (big_endian, Format::Classic { nanos });
        let (big_endian, format) = match (le, be) {
            (MAGIC_MICROS, _) => classic(false, false),
            (MAGIC_NANOS, _) => classic(false, true),
            (_, MAGIC_MICROS) => classic(true, false),
            (_, MAGIC_NANOS) => classic(true, true),
            (PCAPNG_SHB, _) => {
                reader.read_section_header(0)?;
                return Ok(reader);
            }
            _ => return Err(PcapError::NotPcap),
        };
        reader.big_endian = big_endian;
        reader.format = format;
        if bytes.len() < 24 {
            return Err(PcapError::Truncated(bytes.len()));
        }
        // The link type is the low 16 bits of the last header word (the
        // upper bits carry FCS information).
        let linktype = reader.u32_at(20) & 0xFFFF;
        if linktype != LINKTYPE_ETHERNET {
            return Err(PcapError::UnsupportedLinkType(linktype));
        }
        reader.pos = 24;
        Ok(reader)
    }

    fn u32_at(&self, at: usize) -> u32 {
        let b = [
            self.bytes[at],
            self.bytes[at + 1],
            self.bytes[at + 2],
            self.bytes[at + 3],
        ];
        if self.big_endian {
            u32::from_be_bytes(b)
        } else {
            u32::from_le_bytes(b)
        }
    }

    fn u16_at(&self, at: usize) -> u16 {
        let b = [self.bytes[at], self.bytes[at + 1]];
        if self.big_endian {
            u16::from_be_bytes(b)
        } else {
            u16::from_le_bytes(b)
        }
    }

    /// A pcapng section header block starting at `at`: learn its byte order
    /// and reset the interface table.
    fn read_section_header(&mut self, at: usize) -> Result<(), PcapError> {
        let b = self.bytes;
        if b.len() < at + 12 {
            return Err(PcapError::Truncated(b.len()));
        }
        let bom = [b[at + 8], b[at + 9], b[at + 10], b[at + 11]];
        self.big_endian = if u32::from_le_bytes(bom) == PCAPNG_BYTE_ORDER {
            false
        } else if u32::from_be_bytes(bom) == PCAPNG_BYTE_ORDER {
            true
        } else {
            return Err(PcapError::BadBlock(at));
        };
        let len = self.u32_at(at + 4) as usize;
        if len < 28 || !len.is_multiple_of(4) {
            return Err(PcapError::BadBlock(at));
        }
        if b.len() < at + len {
            return Err(PcapError::Truncated(b.len()));
        }
        self.format = Format::PcapNg;
        self.interfaces = 0;
        self.pos = at + len;
        Ok(())
    }

    fn next_classic(&mut self, nanos: bool) -> Option<Result<Record<'a>, PcapError>> {
        let at = self.pos;
        if at == self.bytes.len() {
            return None;
        }
        if self.bytes.len() < at + 16 {
            return Some(Err(PcapError::Truncated(at)));
        }
        let secs = self.u32_at(at) as u64;
        let frac = self.u32_at(at + 4) as u64;
        let incl = self.u32_at(at + 8) as usize;
        let orig_len = self.u32_at(at + 12);
        let start = at + 16;
        let Some(end) = start.checked_add(incl).filter(|e| *e <= self.bytes.len()) else {
            return Some(Err(PcapError::Truncated(at)));
        };
        self.pos = end;
        let timestamp_ns = secs * 1_000_000_000 + if nanos { frac } else { frac * 1_000 };
        Some(Ok(Record {
            timestamp_ns,
            orig_len,
            data: &self.bytes[start..end],
        }))
    }

    fn next_pcapng(&mut self) -> Option<Result<Record<'a>, PcapError>> {
        loop {
            let at = self.pos;
            if at == self.bytes.len() {
                return None;
            }
            if self.bytes.len() < at + 12 {
                return Some(Err(PcapError::Truncated(at)));
            }
            let kind = self.u32_at(at);
            if kind == PCAPNG_SHB {
                if let Err(e) = self.read_section_header(at) {
                    return Some(Err(e));
                }
                continue;
            }
            let len = self.u32_at(at + 4) as usize;
            if len < 12 || !len.is_multiple_of(4) {
                return Some(Err(PcapError::BadBlock(at)));
            }
            let Some(end) = at.checked_add(len).filter(|e| *e <= self.bytes.len()) else {
                return Some(Err(PcapError::Truncated(at)));
            };
            self.pos = end;
            let body = at + 8..end - 4;
            match kind {
                PCAPNG_IDB => {
                    if body.len() < 8 {
                        return Some(Err(PcapError::BadBlock(at)));
                    }
                    let linktype = self.u16_at(body.start) as u32;
                    if linktype != LINKTYPE_ETHERNET {
                        return Some(Err(PcapError::UnsupportedLinkType(linktype)));
                    }
                    if self.interfaces == MAX_INTERFACES {
                        return Some(Err(PcapError::BadBlock(at)));
                    }
                    let units = self.if_tsresol(body.start + 8, body.end);
                    self.if_units[self.interfaces] = units;
                    self.interfaces += 1;
                }
                PCAPNG_EPB => {
                    if body.len() < 20 {
                        return Some(Err(PcapError::BadBlock(at)));
                    }
                    let iface = self.u32_at(body.start) as usize;
                    if iface >= self.interfaces {
                        return Some(Err(PcapError::BadBlock(at)));
                    }
                    let ts = ((self.u32_at(body.start + 4) as u64) << 32)
                        | self.u32_at(body.start + 8) as u64;
                    let incl = self.u32_at(body.start + 12) as usize;
                    let orig_len = self.u32_at(body.start + 16);
                    let data = body.start + 20;
                    if incl > body.end - data {
                        return Some(Err(PcapError::BadBlock(at)));
                    }
                    let units = self.if_units[iface];
                    let timestamp_ns = if units >= 1_000_000_000 {
                        ts / (units / 1_000_000_000)
                    } else {
                        ts.saturating_mul(1_000_000_000 / units)
                    };
                    return Some(Ok(Record {
                        timestamp_ns,
                        orig_len,
                        data: &self.bytes[data..data + incl],
                    }));
                }
                PCAPNG_SPB => {
                    if body.len() < 4 || self.interfaces == 0 {
                        return Some(Err(PcapError::BadBlock(at)));
                    }
                    let orig_len = self.u32_at(body.start);
                    let data = body.start + 4;
                    let incl = (orig_len as usize).min(body.end - data);
                    return Some(Ok(Record {
                        timestamp_ns: 0,
                        orig_len,
                        data: &self.bytes[data..data + incl],
                    }));
                }
                _ => {} // other blocks (statistics, name resolution...) skipped
            }
        }
    }

    /// The `if_tsresol` option of an interface description block, as units
    /// per second (default microseconds).
    fn if_tsresol(&self, mut at: usize, end: usize) -> u64 {
        while at + 4 <= end {
            let code = self.u16_at(at);
            let len = self.u16_at(at + 2) as usize;
            if code == 0 {
                break;
            }
            if code == 9 && len >= 1 && at + 5 <= end {
                let v = self.bytes[at + 4];
                let exp = (v & 0x7F) as u32;
                let base: u64 = if v & 0x80 != 0 { 2 } else { 10 };
                return base
                    .checked_pow(exp)
                    .filter(|u| *u > 0)
                    .unwrap_or(1_000_000);
            }
            at += 4 + len.div_ceil(4) * 4;
        }
        1_000_000
    }
}

impl<'a> Iterator for Reader<'a> {
    type Item = Result<Record<'a>, PcapError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let item = match self.format {
            Format::Classic { nanos } => self.next_classic(nanos),
            Format::PcapNg => self.next_pcapng(),
        };
        if matches!(item, Some(Err(_))) {
            self.failed = true;
        }
        item
    }
}

/// Write a classic pcap (microsecond, little-endian, Ethernet) of `frames`
/// with the given timestamps in nanoseconds; for tests and tools that dump
/// what they sent.
pub fn write_classic<'f>(frames: impl IntoIterator<Item = (u64, &'f [u8])>) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&MAGIC_MICROS.to_le_bytes());
    out.extend_from_slice(&2u16.to_le_bytes());
    out.extend_from_slice(&4u16.to_le_bytes());
    out.extend_from_slice(&0i32.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    out.extend_from_slice(&65535u32.to_le_bytes());
    out.extend_from_slice(&LINKTYPE_ETHERNET.to_le_bytes());
    for (ts, data) in frames {
        out.extend_from_slice(&((ts / 1_000_000_000) as u32).to_le_bytes());
        out.extend_from_slice(&(((ts % 1_000_000_000) / 1_000) as u32).to_le_bytes());
        out.extend_from_slice(&(data.len() as u32).to_le_bytes());
        out.extend_from_slice(&(data.len() as u32).to_le_bytes());
        out.extend_from_slice(data);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<u8> {
        let a = [1u8; 60];
        let b = [2u8; 61];
        write_classic([
            (1_500_000_000_123_456_000, &a[..]),
            (1_500_000_001_000_001_000, &b[..]),
        ])
    }

    /// Rewrite a little-endian microsecond capture with another magic / byte
    /// order.
    fn convert(le_micros: &[u8], big_endian: bool, nanos: bool) -> Vec<u8> {
        let w32 = |v: u32| {
            if big_endian {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            }
        };
        let w16 = |v: u16| {
            if big_endian {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            }
        };
        let r32 = |b: &[u8], at: usize| u32::from_le_bytes(b[at..at + 4].try_into().unwrap());
        let mut out = Vec::new();
        out.extend_from_slice(&w32(if nanos { MAGIC_NANOS } else { MAGIC_MICROS }));
        out.extend_from_slice(&w16(2));
        out.extend_from_slice(&w16(4));
        for at in [8, 12, 16, 20] {
            out.extend_from_slice(&w32(r32(le_micros, at)));
        }
        let mut at = 24;
        while at < le_micros.len() {
            let incl = r32(le_micros, at + 8) as usize;
            out.extend_from_slice(&w32(r32(le_micros, at)));
            let frac = r32(le_micros, at + 4);
            out.extend_from_slice(&w32(if nanos { frac * 1000 } else { frac }));
            out.extend_from_slice(&w32(r32(le_micros, at + 8)));
            out.extend_from_slice(&w32(r32(le_micros, at + 12)));
            out.extend_from_slice(&le_micros[at + 16..at + 16 + incl]);
            at += 16 + incl;
        }
        out
    }

    #[test]
    fn reads_every_classic_variant() {
        let base = sample();
        for (big, nanos) in [(false, false), (false, true), (true, false), (true, true)] {
            let file = convert(&base, big, nanos);
            let recs: Vec<_> = Reader::new(&file).unwrap().map(Result::unwrap).collect();
            assert_eq!(recs.len(), 2, "big {big} nanos {nanos}");
            assert_eq!(recs[0].data, &[1u8; 60]);
            assert_eq!(recs[0].timestamp_ns, 1_500_000_000_123_456_000);
            assert_eq!(recs[1].data, &[2u8; 61]);
            assert_eq!(recs[1].orig_len, 61);
        }
    }

    #[test]
    fn reads_pcapng_with_enhanced_and_simple_packets() {
        let mut f = Vec::new();
        // Section header block (little-endian), no options.
        f.extend_from_slice(&PCAPNG_SHB.to_le_bytes());
        f.extend_from_slice(&28u32.to_le_bytes());
        f.extend_from_slice(&PCAPNG_BYTE_ORDER.to_le_bytes());
        f.extend_from_slice(&1u16.to_le_bytes());
        f.extend_from_slice(&0u16.to_le_bytes());
        f.extend_from_slice(&u64::MAX.to_le_bytes());
        f.extend_from_slice(&28u32.to_le_bytes());
        // Interface description block: Ethernet, if_tsresol = 9 (ns).
        f.extend_from_slice(&PCAPNG_IDB.to_le_bytes());
        f.extend_from_slice(&32u32.to_le_bytes());
        f.extend_from_slice(&1u16.to_le_bytes());
        f.extend_from_slice(&0u16.to_le_bytes());
        f.extend_from_slice(&0u32.to_le_bytes());
        f.extend_from_slice(&9u16.to_le_bytes());
        f.extend_from_slice(&1u16.to_le_bytes());
        f.extend_from_slice(&[9, 0, 0, 0]);
        f.extend_from_slice(&0u32.to_le_bytes()); // opt_endofopt
        f.extend_from_slice(&32u32.to_le_bytes());
        // Enhanced packet block with a 5-byte frame (padded to 8).
        f.extend_from_slice(&PCAPNG_EPB.to_le_bytes());
        f.extend_from_slice(&40u32.to_le_bytes());
        f.extend_from_slice(&0u32.to_le_bytes());
        f.extend_from_slice(&0u32.to_le_bytes());
        f.extend_from_slice(&1234u32.to_le_bytes());
        f.extend_from_slice(&5u32.to_le_bytes());
        f.extend_from_slice(&5u32.to_le_bytes());
        f.extend_from_slice(&[1, 2, 3, 4, 5, 0, 0, 0]);
        f.extend_from_slice(&40u32.to_le_bytes());
        // Simple packet block with 4 bytes.
        f.extend_from_slice(&PCAPNG_SPB.to_le_bytes());
        f.extend_from_slice(&20u32.to_le_bytes());
        f.extend_from_slice(&4u32.to_le_bytes());
        f.extend_from_slice(&[9, 8, 7, 6]);
        f.extend_from_slice(&20u32.to_le_bytes());
        let recs: Vec<_> = Reader::new(&f).unwrap().map(Result::unwrap).collect();
        assert_eq!(recs.len(), 2);
        assert_eq!(recs[0].data, &[1, 2, 3, 4, 5]);
        assert_eq!(recs[0].timestamp_ns, 1234);
        assert_eq!(recs[1].data, &[9, 8, 7, 6]);
    }

    #[test]
    fn rejects_non_pcap_and_truncation_without_panicking() {
        assert_eq!(
            Reader::new(b"hello world, not a capture").unwrap_err(),
            PcapError::NotPcap
        );
        assert_eq!(Reader::new(b"").unwrap_err(), PcapError::NotPcap);
        let file = sample();
        for cut in 0..file.len() {
            if let Ok(reader) = Reader::new(&file[..cut]) {
                let _ = reader.count();
            }
        }
        let mut wrong_link = file.clone();
        wrong_link[20] = 113; // Linux cooked capture
        assert_eq!(
            Reader::new(&wrong_link).unwrap_err(),
            PcapError::UnsupportedLinkType(113)
        );
        let mut cut = Reader::new(&file[..file.len() - 1]).unwrap();
        assert!(cut.next().unwrap().is_ok());
        assert!(matches!(cut.next(), Some(Err(PcapError::Truncated(_)))));
        assert!(cut.next().is_none());
    }
}

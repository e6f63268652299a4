//! The perftest TCP exchange parsers (`engine::oob::perftest`) on any
//! bytes, read the way a peer's stream is read: the 16-byte version, the
//! cycle buffer and cache line (4 bytes each), the 2-byte MTU, then
//! 108-byte QP keys, and what is left as bandwidth-report fields.
//! Invariants: no panic; what parses encodes back to bytes that parse to
//! the same value (a key, the integers and the MTU exactly).

use engine::oob::perftest::{
    encode_mtu, encode_u32, parse_mtu, parse_u32, parse_version, BwReport, Key, KEY_LEN, MTU_LEN,
    REPORT_FIELDS, REPORT_FIELD_LEN, SYS_LEN, VERSION_LEN,
};

/// Splits `n` bytes off the front of `data`, if there are that many.
fn take<'a>(data: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
    if data.len() < n {
        return None;
    }
    let (head, rest) = data.split_at(n);
    *data = rest;
    Some(head)
}

pub fn run(mut data: &[u8]) {
    let Some(v) = take(&mut data, VERSION_LEN) else {
        // Short input: every parser must refuse it cleanly.
        let _ = parse_version(data);
        let _ = Key::parse(data);
        let _ = parse_mtu(data);
        return;
    };
    let _ = parse_version(v);
    for what in ["cycle buffer", "cache line"] {
        let Some(b) = take(&mut data, SYS_LEN) else {
            return;
        };
        if let Ok(n) = parse_u32(what, b) {
            assert_eq!(&encode_u32(n)[..], b, "{what} {n}");
        }
    }
    let Some(m) = take(&mut data, MTU_LEN) else {
        return;
    };
    if let Ok(mtu) = parse_mtu(m) {
        assert_eq!(parse_mtu(&encode_mtu(mtu)), Ok(mtu), "MTU {mtu}");
    }
    while data.len() >= KEY_LEN {
        let b = take(&mut data, KEY_LEN).expect("length checked");
        if let Ok(key) = Key::parse(b) {
            let again = key.encode();
            assert_eq!(Key::parse(&again).as_ref(), Ok(&key), "key {key:?}");
        }
    }
    let fields: Vec<&[u8]> = data.chunks(REPORT_FIELD_LEN).collect();
    if let Ok(r) = BwReport::parse(&fields) {
        assert_eq!(fields.len(), REPORT_FIELDS);
        let enc = r.encode();
        let back: Vec<&[u8]> = enc.iter().map(|f| &f[..]).collect();
        let again = BwReport::parse(&back).expect("an encoded report parses");
        assert_eq!(again.encode(), enc);
    }
}

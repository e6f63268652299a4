//! The frame validator (`proto::wire::parse_frame_view`) on any bytes.
//! Invariants: no panic; what the view accepts, the owned parser accepts
//! the same way; the accessors stay inside the frame; and an accepted
//! frame re-emitted from its headers and payload parses back to the same
//! headers and payload.

use proto::wire::{emit_frame, parse_frame, parse_frame_view};

pub fn run(data: &[u8]) {
    let view = parse_frame_view(data);
    let owned = parse_frame(data);
    assert_eq!(view.is_ok(), owned.is_ok(), "the two parsers disagree");
    let (Ok(v), Ok(f)) = (view, owned) else {
        return;
    };
    let h = v.headers();
    assert_eq!(h, f.headers);
    assert_eq!(v.payload(), f.payload);
    // Every accessor reads inside the frame.
    let _ = (v.psn(), v.dest_qp(), v.ack_req(), v.pkey(), v.ecn());
    let _ = (v.udp_src_port(), v.reth(), v.aeth(), v.atomic_eth());
    let _ = (v.atomic_ack_eth(), v.immdt(), v.ieth(), v.icrc());
    let _ = (v.ipv4_addrs(), v.ipv6_addrs(), v.pad_count());
    assert_eq!(v.icrc(), v.computed_icrc(), "accepted with a bad ICRC");
    let mut buf = vec![0u8; data.len() + 64];
    let n = emit_frame(&h, v.payload(), &mut buf).expect("accepted headers re-emit");
    let again = parse_frame(&buf[..n]).expect("a re-emitted frame parses");
    assert_eq!(again.headers, h);
    assert_eq!(again.payload, v.payload());
}

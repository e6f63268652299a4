//! The templated transmit path (`wire::emit_templated`, the engine's
//! per-packet emitter) against `emit_frame`, with the portable copy and
//! CRC (this test process never installs the datapath's one-pass copy +
//! CRC; `engine/tests/wire_copy_crc.rs` runs the same comparison with it).

use core::net::{IpAddr, Ipv4Addr};

use crate::template_support::{check_templated_equals_emit_frame, headers, SIZES};
use proto::wire::{emit_templated, EmitError, HeaderTemplate, Opcode};

/// The template path writes the same bytes as `emit_frame` (which the
/// Scapy/tshark vectors and rxe captures check).
#[test]
fn same_bytes_as_emit_frame() {
    check_templated_equals_emit_frame(&SIZES);
}

#[test]
fn rejects_what_it_does_not_emit() {
    let ip = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
    let h = headers(ip, false, Opcode::WriteFirst, 5, 9);
    let t = HeaderTemplate::new(&h.eth, &h.ip, &h.udp);
    let mut buf = [0u8; 256];
    // Missing RETH, payload on a READ request, an atomic, a short buffer.
    let r = emit_templated(&t, &h.bth, None, None, None, &[1], &mut buf);
    assert_eq!(r, Err(EmitError::HeadersMismatchOpcode));
    let mut bth = h.bth;
    bth.opcode = Opcode::ReadRequest;
    let r = emit_templated(&t, &bth, h.reth.as_ref(), None, None, &[1], &mut buf);
    assert_eq!(r, Err(EmitError::HeadersMismatchOpcode));
    bth.opcode = Opcode::FetchAdd;
    let r = emit_templated(&t, &bth, None, None, None, &[], &mut buf);
    bth.opcode = Opcode::Acknowledge;
    let r2 = emit_templated(&t, &bth, None, None, None, &[], &mut buf);
    assert_eq!(
        r2,
        Err(EmitError::HeadersMismatchOpcode),
        "ACK without AETH"
    );
    assert_eq!(r, Err(EmitError::HeadersMismatchOpcode));
    let r = emit_templated(&t, &h.bth, h.reth.as_ref(), None, None, &[0; 200], &mut buf);
    assert_eq!(r, Err(EmitError::BufferTooSmall));
}

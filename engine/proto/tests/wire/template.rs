//! The templated transmit path (`wire::emit_templated`, the engine's
//! per-packet emitter) against `emit_frame`, with the portable copy and
//! CRC (`crc32::copy_then_update_after`; `engine/tests/wire_copy_crc.rs`
//! runs the same comparison with the datapath's one-pass copy + CRC).

use core::net::{IpAddr, Ipv4Addr};

use crate::template_support::{check_templated_equals_emit_frame, headers, SIZES};
use proto::wire::crc32::copy_then_update_after;
use proto::wire::{emit_templated, EmitError, HeaderTemplate, Opcode};

/// The template path writes the same bytes as `emit_frame` (which the
/// Scapy/tshark vectors and rxe captures check).
#[test]
fn same_bytes_as_emit_frame() {
    check_templated_equals_emit_frame(copy_then_update_after, &SIZES);
}

#[test]
fn rejects_what_it_does_not_emit() {
    let ip = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
    let h = headers(ip, false, Opcode::WriteFirst, 5, 9);
    let t = HeaderTemplate::new(&h.eth, &h.ip, &h.udp);
    let mut buf = [0u8; 256];
    // Missing RETH, payload on a READ request, an atomic, a short buffer.
    let r = emit_templated(
        copy_then_update_after,
        &t,
        &h.bth,
        None,
        None,
        None,
        &[1],
        &mut buf,
    );
    assert_eq!(r, Err(EmitError::HeadersMismatchOpcode));
    let mut bth = h.bth;
    bth.opcode = Opcode::ReadRequest;
    let r = emit_templated(
        copy_then_update_after,
        &t,
        &bth,
        h.reth.as_ref(),
        None,
        None,
        &[1],
        &mut buf,
    );
    assert_eq!(r, Err(EmitError::HeadersMismatchOpcode));
    bth.opcode = Opcode::FetchAdd;
    let r = emit_templated(
        copy_then_update_after,
        &t,
        &bth,
        None,
        None,
        None,
        &[],
        &mut buf,
    );
    bth.opcode = Opcode::Acknowledge;
    let r2 = emit_templated(
        copy_then_update_after,
        &t,
        &bth,
        None,
        None,
        None,
        &[],
        &mut buf,
    );
    assert_eq!(
        r2,
        Err(EmitError::HeadersMismatchOpcode),
        "ACK without AETH"
    );
    assert_eq!(r, Err(EmitError::HeadersMismatchOpcode));
    let r = emit_templated(
        copy_then_update_after,
        &t,
        &h.bth,
        h.reth.as_ref(),
        None,
        None,
        &[0; 200],
        &mut buf,
    );
    assert_eq!(r, Err(EmitError::BufferTooSmall));
}

/// `is_reply`: a frame of the opposite direction of the template's flow
/// (IP addresses swapped) is one; the same direction, another peer, or
/// the other IP family is not.
#[test]
fn is_reply_reads_the_swapped_addresses() {
    use core::net::Ipv6Addr;
    use proto::wire::{emit_frame, parse_frame_view, IpRepr};
    let swap = |mut ip: IpRepr| {
        match &mut ip {
            IpRepr::V4 { src, dst, .. } => core::mem::swap(src, dst),
            IpRepr::V6 { src, dst, .. } => core::mem::swap(src, dst),
        }
        ip
    };
    let mut buf = [0u8; 256];
    for ip in [
        IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
        IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1)),
    ] {
        for vlan in [false, true] {
            let h = headers(ip, vlan, Opcode::SendOnly, 1, 7);
            let t = HeaderTemplate::new(&h.eth, &h.ip, &h.udp);
            let mut back = h;
            back.ip = swap(h.ip);
            let n = emit_frame(&back, &[1, 2, 3, 4], &mut buf).unwrap();
            assert!(t.is_reply(&parse_frame_view(&buf[..n]).unwrap()));
            let n = emit_frame(&h, &[1, 2, 3, 4], &mut buf).unwrap();
            assert!(
                !t.is_reply(&parse_frame_view(&buf[..n]).unwrap()),
                "same way"
            );
            let other = match ip {
                IpAddr::V4(_) => headers(
                    IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1)),
                    vlan,
                    Opcode::SendOnly,
                    1,
                    7,
                ),
                IpAddr::V6(_) => headers(
                    IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
                    vlan,
                    Opcode::SendOnly,
                    1,
                    7,
                ),
            };
            let mut other_back = other;
            other_back.ip = swap(other.ip);
            let n = emit_frame(&other_back, &[1, 2, 3, 4], &mut buf).unwrap();
            assert!(
                !t.is_reply(&parse_frame_view(&buf[..n]).unwrap()),
                "other family"
            );
            // Another peer: the reply's source address changed.
            let mut stranger = back;
            match &mut stranger.ip {
                IpRepr::V4 { src, .. } => *src = Ipv4Addr::new(10, 9, 9, 9),
                IpRepr::V6 { src, .. } => *src = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 9, 9),
            }
            let n = emit_frame(&stranger, &[1, 2, 3, 4], &mut buf).unwrap();
            assert!(
                !t.is_reply(&parse_frame_view(&buf[..n]).unwrap()),
                "another peer"
            );
        }
    }
}

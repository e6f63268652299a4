//! What the attacker of these tests writes: frames rebuilt from real ones
//! with other sources, PSNs, opcodes or payloads (ICRC recomputed, so
//! only the checks of the transport can refuse them).

use core::net::Ipv4Addr;

use proto::wire::{
    cnp_headers, emit_frame, parse_frame, AethRepr, AtomicAckEthRepr, IpRepr, Opcode, RoceHeaders,
    CNP_RESERVED,
};

use crate::support::{hdr, rewrite};

/// An address no endpoint of the pair has.
pub const STRANGER: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 99);

/// `frame` as if sent from `src`.
pub fn from_ip(frame: &[u8], src: Ipv4Addr) -> Vec<u8> {
    rewrite(frame, |h| {
        if let IpRepr::V4 { src: s, .. } = &mut h.ip {
            *s = src;
        }
    })
}

/// Emit `h` with `payload` (ICRC computed).
pub fn emit(h: &RoceHeaders, payload: &[u8]) -> Vec<u8> {
    let mut buf = vec![0u8; 9000];
    let n = emit_frame(h, payload, &mut buf).unwrap();
    buf.truncate(n);
    buf
}

/// An ACK, NAK or RNR NAK with AETH `syndrome` for `psn`, built on the
/// headers of `ack` (a real ACK from the peer).
pub fn ack_at(ack: &[u8], psn: u32, syndrome: u8) -> Vec<u8> {
    rewrite(ack, |h| {
        h.bth.psn = psn;
        h.aeth = Some(AethRepr {
            syndrome,
            msn: h.aeth.map_or(0, |a| a.msn),
        });
    })
}

/// An ATOMIC ACKNOWLEDGE for `psn` carrying `orig`, on `ack`'s headers.
pub fn atomic_ack_at(ack: &[u8], psn: u32, orig: u64) -> Vec<u8> {
    rewrite(ack, |h| {
        h.bth.opcode = Opcode::AtomicAcknowledge;
        h.bth.psn = psn;
        h.atomic_ack_eth = Some(AtomicAckEthRepr { orig });
    })
}

/// A READ response `op` for `psn` with `payload`, on `ack`'s headers.
pub fn read_response_at(ack: &[u8], op: Opcode, psn: u32, payload: &[u8]) -> Vec<u8> {
    let mut h = parse_frame(ack).unwrap().headers;
    h.bth.opcode = op;
    h.bth.psn = psn;
    if op == Opcode::ReadRespMiddle {
        h.aeth = None;
    }
    emit(&h, payload)
}

/// A CNP for QP `dest_qp` with P_Key `pkey`, on the addresses of `frame`
/// (a real frame from the peer).
pub fn cnp_like(frame: &[u8], dest_qp: u32, pkey: u16) -> Vec<u8> {
    let h = hdr(frame);
    emit(
        &cnp_headers(h.eth, h.ip, h.udp.src_port, dest_qp, pkey),
        &CNP_RESERVED,
    )
}

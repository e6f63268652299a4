//! Headers and payloads the fuzz targets build and mutate from their
//! input.

use proto::wire::{AethRepr, AtomicAckEthRepr, AtomicEthRepr, DethRepr, RethRepr, RoceHeaders};

use crate::input::Input;

/// Give `h` exactly the extension headers its opcode has (new ones from
/// the input; RETH and AtomicETH addresses near `iova`), so that it
/// can be emitted.
pub fn conform(h: &mut RoceHeaders, input: &mut Input<'_>, iova: u64) {
    let op = h.bth.opcode;
    if op.has_reth() != h.reth.is_some() {
        h.reth = op.has_reth().then(|| RethRepr {
            va: iova + u64::from(input.u16()),
            rkey: input.u32(),
            dma_len: u32::from(input.u16()),
        });
    }
    if op.has_aeth() != h.aeth.is_some() {
        h.aeth = op.has_aeth().then(|| AethRepr {
            syndrome: input.u8(),
            msn: input.u32() & 0xFF_FFFF,
        });
    }
    if op.has_atomic_eth() != h.atomic_eth.is_some() {
        h.atomic_eth = op.has_atomic_eth().then(|| AtomicEthRepr {
            va: iova + u64::from(input.u16()),
            rkey: input.u32(),
            swap_add: input.u64(),
            compare: input.u64(),
        });
    }
    if op.has_atomic_ack_eth() != h.atomic_ack_eth.is_some() {
        h.atomic_ack_eth = op
            .has_atomic_ack_eth()
            .then(|| AtomicAckEthRepr { orig: input.u64() });
    }
    if op.has_immdt() != h.immdt.is_some() {
        h.immdt = op.has_immdt().then(|| input.u32());
    }
    if op.has_ieth() != h.ieth.is_some() {
        h.ieth = op.has_ieth().then(|| input.u32());
    }
    if op.has_deth() != h.deth.is_some() {
        h.deth = op.has_deth().then(|| DethRepr {
            qkey: input.u32(),
            src_qp: input.u32() & 0xFF_FFFF,
        });
    }
}

/// A payload cut short, grown with input bytes, or resized and filled.
pub fn mutate_payload(payload: &mut Vec<u8>, input: &mut Input<'_>) {
    match input.below(3) {
        0 => payload.truncate(usize::from(input.u16()) % (payload.len() + 1)),
        1 => payload.extend_from_slice(input.take(64)),
        _ => {
            let n = usize::from(input.u16());
            payload.resize(n % 4200, input.u8());
        }
    }
}

/// A few raw bytes of `frame` changed or cut (its ICRC then mostly fails:
/// the validator's path).
pub fn flip(frame: &mut Vec<u8>, input: &mut Input<'_>) {
    for _ in 0..1 + input.below(3) {
        if frame.is_empty() {
            break;
        }
        let at = usize::from(input.u16()) % frame.len();
        match input.below(4) {
            0 => frame.truncate(at),
            _ => frame[at] ^= input.u8() | 1,
        }
    }
}

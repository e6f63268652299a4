//! Scatter/gather lists and inline data of work requests.
//!
//! A work request with one SGE (or none) keeps it in the request itself
//! (`SendWr::local`, `RecvWr::sge`): that path is unchanged and
//! allocates nothing. A QP created with more than one SGE a request, or
//! with inline data ([`SgeCaps`]), also holds a [`QpSgl`]: an arena of
//! SGEs for its send queue (`max_send_wr` x `max_send_sge` entries), one
//! for its receive queue, and one of inline bytes (`max_send_wr` x
//! `max_inline_data`), each allocated at its first use and then reused.
//! A posted request that needs one takes the next slot of its queue's
//! arena (the queues complete in order, and never hold more requests
//! than they have slots, so the slot of a request is free again before
//! it comes round), and says so in its [`WqeData`]; the request's own
//! length field holds the list's total length, so that segmentation,
//! RETH lengths, completions and the receive length check read it as
//! they read one SGE's.
//!
//! The requester gathers a packet's payload from the list ([`gather`],
//! into the QP's one-packet scratch buffer), the responder and the
//! completer scatter a packet's payload into it ([`scatter`]): per
//! packet, without allocating, every piece through the region table
//! with the QP's PD (rxe `copy_data`, which walks `cur_sge`/
//! `sge_offset` the same way).

use super::mr::{Access, MrTable};
use super::wqe::Sge;

/// Most SGEs a work request carries (rxe `RXE_MAX_SGE`, also its
/// `max_sge_rd`).
pub const MAX_SGE: u32 = 32;

/// Most inline bytes a send request carries (rxe `RXE_MAX_INLINE_DATA`:
/// the room of its largest WQE's SGE list, 32 x 16 bytes).
pub const MAX_INLINE_DATA: u32 = 512;

/// Bytes of one `ibv_sge` (what rxe counts its WQE's room in).
const SGE_BYTES: u32 = 16;

/// Largest packet payload (path MTU 4096): the gather buffer's size.
const MAX_PAYLOAD: usize = 4096;

/// The scatter/gather capacities of a QP (`ibv_qp_cap`'s
/// `max_send_sge`, `max_recv_sge`, `max_inline_data`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SgeCaps {
    /// SGEs a send request may carry (0 and 1 mean one).
    pub max_send_sge: u32,
    /// SGEs a receive request may carry (0 and 1 mean one).
    pub max_recv_sge: u32,
    /// Inline bytes a send request may carry.
    pub max_inline_data: u32,
}

impl Default for SgeCaps {
    /// One SGE each way, no inline data: a QP that needs no [`QpSgl`].
    fn default() -> Self {
        SgeCaps {
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        }
    }
}

impl SgeCaps {
    /// Whether the capacities are within [`MAX_SGE`] and
    /// [`MAX_INLINE_DATA`] (rxe `rxe_qp_chk_cap`: beyond is `EINVAL`).
    pub fn is_valid(&self) -> bool {
        self.max_send_sge <= MAX_SGE
            && self.max_recv_sge <= MAX_SGE
            && self.max_inline_data <= MAX_INLINE_DATA
    }

    /// What rxe grants a QP asked for these capacities (rxe
    /// `rxe_qp_init_req`): its send WQE holds
    /// max(`max_send_sge` x 16, `max_inline_data`) bytes, and both the
    /// SGEs and the inline data may fill that room. A QP asked for one
    /// SGE and no inline data gets 16 inline bytes, one asked for 512
    /// inline bytes 32 send SGEs.
    pub fn as_rxe_grants(&self) -> SgeCaps {
        let room = (self.max_send_sge * SGE_BYTES).max(self.max_inline_data);
        SgeCaps {
            max_send_sge: room / SGE_BYTES,
            max_recv_sge: self.max_recv_sge,
            max_inline_data: room,
        }
    }

    /// Whether a QP of these capacities needs a [`QpSgl`].
    pub fn needs_arena(&self) -> bool {
        self.max_send_sge > 1 || self.max_recv_sge > 1 || self.max_inline_data > 0
    }
}

/// Where a posted work request's data is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum WqeData {
    /// In the request itself: its one SGE (none: length 0).
    #[default]
    One,
    /// `n` SGEs at `slot` of the queue's SGE arena.
    List { slot: u32, n: u32 },
    /// Inline bytes (the request's length) at `slot` of the inline arena.
    Inline { slot: u32 },
}

/// What a queued request keeps of its [`WqeData`]: the kind, one byte;
/// a list's slot and length, or inline data's slot, go into the
/// request's SGE, whose key and address a list or inline data does not
/// use (its length stays the data's total). A queued request is then no
/// larger than before lists existed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(u8)]
pub(crate) enum DataKind {
    #[default]
    One,
    List,
    Inline,
}

impl WqeData {
    /// Store `self` in `sge` (see [`DataKind`]); the kind to keep.
    #[inline]
    pub(crate) fn pack(self, sge: &mut Sge) -> DataKind {
        match self {
            WqeData::One => DataKind::One,
            WqeData::List { slot, n } => {
                sge.addr = u64::from(slot);
                sge.lkey = n;
                DataKind::List
            }
            WqeData::Inline { slot } => {
                sge.addr = u64::from(slot);
                sge.lkey = 0;
                DataKind::Inline
            }
        }
    }

    /// What [`WqeData::pack`] stored as `kind` in `sge`.
    #[inline(always)]
    pub(crate) fn unpack(kind: DataKind, sge: &Sge) -> WqeData {
        match kind {
            DataKind::One => WqeData::One,
            DataKind::List => WqeData::List {
                slot: sge.addr as u32,
                n: sge.lkey,
            },
            DataKind::Inline => WqeData::Inline {
                slot: sge.addr as u32,
            },
        }
    }
}

/// A QP's arenas for SGE lists and inline data (see the module).
#[derive(Debug)]
pub struct QpSgl {
    caps: SgeCaps,
    max_send_wr: u32,
    max_recv_wr: u32,
    /// `max_send_wr` x `max_send_sge` SGEs, once a list was posted.
    send: Vec<Sge>,
    send_next: u32,
    /// `max_recv_wr` x `max_recv_sge` SGEs, once a list was posted.
    recv: Vec<Sge>,
    recv_next: u32,
    /// `max_send_wr` x `max_inline_data` bytes, once inline data was posted.
    inline: Vec<u8>,
    inline_next: u32,
    /// One packet's payload gathered from a send list.
    scratch: Vec<u8>,
}

impl QpSgl {
    /// Arenas for a QP of `caps` with these queue depths; nothing is
    /// allocated until a list or inline data is posted.
    pub(crate) fn new(caps: SgeCaps, max_send_wr: u32, max_recv_wr: u32) -> QpSgl {
        QpSgl {
            caps,
            max_send_wr: max_send_wr.max(1),
            max_recv_wr: max_recv_wr.max(1),
            send: Vec::new(),
            send_next: 0,
            recv: Vec::new(),
            recv_next: 0,
            inline: Vec::new(),
            inline_next: 0,
            scratch: Vec::new(),
        }
    }

    /// The QP's capacities.
    pub fn caps(&self) -> SgeCaps {
        self.caps
    }

    /// Keep a send request's list (at most `max_send_sge` entries, the
    /// caller checked) in the next send slot.
    pub(crate) fn put_send(&mut self, sges: &[Sge]) -> WqeData {
        let per = self.caps.max_send_sge as usize;
        if self.send.is_empty() {
            self.send = vec![Sge::default(); self.max_send_wr as usize * per];
            self.scratch = vec![0; MAX_PAYLOAD];
        }
        let slot = self.send_next;
        self.send_next = (slot + 1) % self.max_send_wr;
        let at = slot as usize * per;
        self.send[at..at + sges.len()].copy_from_slice(sges);
        WqeData::List {
            slot,
            n: sges.len() as u32,
        }
    }

    /// Keep a receive request's list in the next receive slot.
    pub(crate) fn put_recv(&mut self, sges: &[Sge]) -> WqeData {
        let per = self.caps.max_recv_sge as usize;
        if self.recv.is_empty() {
            self.recv = vec![Sge::default(); self.max_recv_wr as usize * per];
        }
        let slot = self.recv_next;
        self.recv_next = (slot + 1) % self.max_recv_wr;
        let at = slot as usize * per;
        self.recv[at..at + sges.len()].copy_from_slice(sges);
        WqeData::List {
            slot,
            n: sges.len() as u32,
        }
    }

    /// Copy a send request's inline data (at most `max_inline_data`
    /// bytes, the caller checked) into the next inline slot.
    pub(crate) fn put_inline(&mut self, data: &[u8]) -> WqeData {
        let per = self.caps.max_inline_data as usize;
        if self.inline.is_empty() {
            self.inline = vec![0; self.max_send_wr as usize * per];
        }
        let slot = self.inline_next;
        self.inline_next = (slot + 1) % self.max_send_wr;
        let at = slot as usize * per;
        self.inline[at..at + data.len()].copy_from_slice(data);
        WqeData::Inline { slot }
    }

    /// The send list at `slot`.
    pub(crate) fn send_list(&self, slot: u32, n: u32) -> &[Sge] {
        let at = slot as usize * self.caps.max_send_sge as usize;
        self.send.get(at..at + n as usize).unwrap_or(&[])
    }

    /// The receive list at `slot`.
    pub(crate) fn recv_list(&self, slot: u32, n: u32) -> &[Sge] {
        let at = slot as usize * self.caps.max_recv_sge as usize;
        self.recv.get(at..at + n as usize).unwrap_or(&[])
    }

    /// `len` inline bytes at message offset `off` of the data at `slot`.
    pub(crate) fn inline_bytes(&self, slot: u32, off: u32, len: u32) -> Option<&[u8]> {
        let at = slot as usize * self.caps.max_inline_data as usize + off as usize;
        self.inline.get(at..at + len as usize)
    }

    /// Gather `len` bytes at message offset `off` of the send list at
    /// `slot` into the scratch buffer and return them; `None` when a
    /// piece cannot be read (its L_Key unknown or of another PD than
    /// `pd`, its range or rights gone: a local protection error).
    pub(crate) fn gather_send(
        &mut self,
        mrs: &MrTable,
        pd: u32,
        slot: u32,
        n: u32,
        off: u32,
        len: u32,
    ) -> Option<&[u8]> {
        let at = slot as usize * self.caps.max_send_sge as usize;
        let sges = self.send.get(at..at + n as usize)?;
        let out = self.scratch.get_mut(..len as usize)?;
        gather(mrs, pd, sges, off, out).then_some(&*out)
    }
}

/// Copy `out.len()` bytes from message offset `off` of the list `sges`
/// into `out`, each piece read through its L_Key in PD `pd`
/// (`Access::NONE`: a local read). `false` when a piece cannot be read or
/// the list is shorter.
pub(crate) fn gather(mrs: &MrTable, pd: u32, sges: &[Sge], off: u32, out: &mut [u8]) -> bool {
    let mut skip = u64::from(off);
    let mut done = 0usize;
    for s in sges {
        if done == out.len() {
            break;
        }
        let len = u64::from(s.length);
        if skip >= len {
            skip -= len;
            continue;
        }
        let take = ((len - skip) as usize).min(out.len() - done);
        match mrs.slice(pd, s.lkey, s.addr.wrapping_add(skip), take, Access::NONE) {
            Ok(src) => out[done..done + take].copy_from_slice(src),
            Err(_) => return false,
        }
        done += take;
        skip = 0;
    }
    done == out.len()
}

/// Write `data` at message offset `off` of the list `sges`, each piece
/// through its L_Key in PD `pd` with LOCAL_WRITE. `false` when a piece
/// cannot be written (nothing lands outside a region: each piece is
/// checked before it is copied) or the list is shorter.
pub(crate) fn scatter(mrs: &mut MrTable, pd: u32, sges: &[Sge], off: u32, data: &[u8]) -> bool {
    let mut skip = u64::from(off);
    let mut done = 0usize;
    for s in sges {
        if done == data.len() {
            break;
        }
        let len = u64::from(s.length);
        if skip >= len {
            skip -= len;
            continue;
        }
        let take = ((len - skip) as usize).min(data.len() - done);
        if mrs
            .write(
                pd,
                s.lkey,
                s.addr.wrapping_add(skip),
                &data[done..done + take],
                Access::LOCAL_WRITE,
            )
            .is_err()
        {
            return false;
        }
        done += take;
        skip = 0;
    }
    done == data.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rxe_grants() {
        let g = SgeCaps::default().as_rxe_grants();
        assert_eq!((g.max_send_sge, g.max_inline_data), (1, 16));
        let g = SgeCaps {
            max_send_sge: 2,
            max_recv_sge: 3,
            max_inline_data: 512,
        }
        .as_rxe_grants();
        assert_eq!(
            (g.max_send_sge, g.max_recv_sge, g.max_inline_data),
            (32, 3, 512)
        );
        let g = SgeCaps {
            max_send_sge: 32,
            max_recv_sge: 1,
            max_inline_data: 0,
        }
        .as_rxe_grants();
        assert_eq!((g.max_send_sge, g.max_inline_data), (32, 512));
        assert!(g.is_valid());
        assert!(!SgeCaps {
            max_send_sge: 33,
            ..g
        }
        .is_valid());
        assert!(!SgeCaps {
            max_inline_data: 513,
            ..g
        }
        .is_valid());
    }
}

#[cfg(all(test, target_pointer_width = "64"))]
mod sizes {
    /// Lists and inline data cost a queued request nothing on the
    /// one-SGE path: a send request stays 80 bytes (its kind fits the
    /// padding), a receive grows from 24 to 32 (`docs/architecture.md`,
    /// "Memory per QP").
    #[test]
    fn a_queued_request_keeps_its_size() {
        use core::mem::size_of;
        assert_eq!(size_of::<super::super::requester::SendWqe>(), 80);
        assert_eq!(size_of::<super::super::responder::RecvWqe>(), 32);
    }
}

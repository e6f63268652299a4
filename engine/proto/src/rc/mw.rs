//! Memory windows (IBA Vol. 1, 10.6.7; Linux rxe `rxe_mw.c`): a window
//! opens part of a registered region to remote access under an R_Key of
//! its own, with rights of its own, and can be moved or closed without
//! touching the region.
//!
//! - Type 1 belongs to a protection domain; it is valid from allocation on
//!   and is (re)bound by a bind operation (verbs `ibv_bind_mw`, a BIND_MW
//!   work request the provider posts); a bind of zero length leaves it
//!   bound to nothing, which is how a type 1 is invalidated (IBA: a type 1
//!   is never invalidated by LOCAL_INV or SEND with invalidate, o10-37.2.26).
//! - Type 2 (rxe implements type 2B) starts free, is bound by a BIND_MW
//!   work request on a QP and from then on answers only that QP (rxe
//!   `lookup_mw`: `mw->qp != qp`), until a LOCAL_INV on the QP or a
//!   SEND with invalidate naming its R_Key frees it again.
//!
//! The windows live in [`super::MrTable`], beside the regions, so that one
//! R_Key lookup finds either ([`super::MrTable::check_remote`] and the
//! other `*_remote` accessors). A window's key keeps its upper 24 bits for
//! life; a bind sets the low 8 bits (the "key" byte) from the work
//! request (rxe `rxe_do_bind_mw`). Those upper 24 bits are reserved for it
//! in the table: no region key and no other window has them.

use super::mr::Access;

/// The type of a memory window (`enum ibv_mw_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MwType {
    /// Bound by `ibv_bind_mw`, belongs to its PD (`IBV_MW_TYPE_1`).
    One,
    /// Bound by a BIND_MW work request, answers only the QP that bound it
    /// (`IBV_MW_TYPE_2`).
    Two,
}

/// A bind of a window to part of a region (verbs `ibv_mw_bind_info` with
/// the window and the new R_Key of `ibv_send_wr.bind_mw`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MwBind {
    /// The window's R_Key now: names the window; must be its current key
    /// (rxe `rxe_bind_mw`: `mw->rkey != mw_rkey` fails).
    pub mw_rkey: u32,
    /// Its R_Key after the bind: only the low 8 bits count, the upper 24
    /// are the window's own (rxe `rxe_do_bind_mw`).
    pub rkey: u32,
    /// L_Key of the region to open.
    pub lkey: u32,
    /// Start of the window: an address inside the region.
    pub addr: u64,
    /// Bytes opened; 0 unbinds a type 1 (and is refused for a type 2).
    pub len: u64,
    /// The window's remote rights (`REMOTE_*`; `LOCAL_WRITE` is accepted
    /// and means nothing for a window).
    pub access: Access,
    /// Remote addresses count from the window's start instead of being
    /// I/O virtual addresses (`IBV_ACCESS_ZERO_BASED`; type 2 only).
    pub zero_based: bool,
}

/// Why a bind or an invalidation was refused (each is `-EINVAL` in rxe;
/// a refused bind completes with `IBV_WC_MW_BIND_ERR`, a refused local
/// invalidation with `IBV_WC_LOC_QP_OP_ERR`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MwError {
    /// No window has this key, or no region has the bind's L_Key.
    UnknownKey,
    /// The window is not in a state that allows it: a type 2 bound
    /// already (o10-37.2.30) or invalidated already, a type 1 named by an
    /// invalidation (o10-37.2.26).
    State,
    /// A protection domain differs: the QP's and a type 2 window's
    /// (C10-72), the region's and the window's, or the QP's and the
    /// window's for an invalidation; or a type 2 window bound to another
    /// QP than the one that invalidates it.
    Owner,
    /// The region lacks `MW_BIND` (C10-73), or the window would allow
    /// remote writes or atomics on a region without `LOCAL_WRITE`
    /// (C10-74), or a zero-based type 1 (o10-36.2.2).
    Rights,
    /// The range is not inside the region (C10-75), or a type 2 bind of
    /// zero length (o10-37.2.40).
    Range,
}

/// Where a window is bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Binding {
    /// Slot and L_Key of the region (the L_Key is compared on each use:
    /// a slot reused by another region is not this one).
    pub region: u32,
    pub lkey: u32,
    pub addr: u64,
    pub len: u64,
    pub access: Access,
    pub zero_based: bool,
    /// The QP a type 2 is bound through (None for a type 1).
    pub qpn: Option<u32>,
}

/// One memory window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Window {
    pub kind: MwType,
    pub pd: u32,
    /// The current R_Key.
    pub rkey: u32,
    /// None: a type 2 that is free, or a type 1 bound to nothing.
    pub binding: Option<Binding>,
}

impl Window {
    /// Whether an access through `qpn` of PD `pd` needing `need` may use
    /// this window at all (rxe `rxe_lookup_mw`: the same key, the
    /// window's PD, a type 2's own QP, a non-zero length, the rights, a
    /// valid state); the binding if so.
    #[inline]
    pub fn admits(&self, key: u32, pd: u32, qpn: u32, need: Access) -> Option<&Binding> {
        let b = self.binding.as_ref()?;
        let ok = self.rkey == key
            && self.pd == pd
            && b.qpn.is_none_or(|q| q == qpn)
            && b.len > 0
            && b.access.contains(need);
        ok.then_some(b)
    }
}

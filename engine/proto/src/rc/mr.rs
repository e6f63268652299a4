//! Memory regions: registration, keys, and the bounds and rights checks that
//! guard every access.
//!
//! Rule (`docs/reliable-connection.md`, "Responder", key, range and rights):
//! an RDMA WRITE/READ/atomic whose R_Key is unknown, whose range is outside
//! the region, or whose rights don't allow it gets NAK remote access error;
//! nothing is ever written outside a registered region. Every accessor here checks key, range and
//! rights before touching a byte and returns [`AccessError`] otherwise.
//!
//! Protection domains (IBA 10.2.3; Linux rxe `rxe_mr.c` `lookup_mr`, which
//! fails when `mr->pd != pd`): every region belongs to one PD, a number
//! the caller chooses (0 unless it says otherwise), and an access through
//! a QP names the QP's PD. A key of a region of another PD is unknown to
//! that access ([`AccessError::UnknownKey`]), compared in the same lookup
//! that finds the region by its key.

use core::fmt;
use core::ops::BitOr;

use super::error::VerbsError;
use super::mw::{Binding, MwBind, MwError, MwType, Window};
use super::random::{KeyPermutation, NumberMap, Seed};
use super::wqe::Sge;

/// Backing memory of a region. The core implements it for `Vec<u8>` and
/// `Box<[u8]>`; the datapath implements it over shared memory so that
/// application threads can see the bytes.
pub trait RegionMemory: Send {
    /// Length in bytes.
    fn len(&self) -> usize;
    /// The bytes, for reading.
    fn as_slice(&self) -> &[u8];
    /// The bytes, for writing.
    fn as_mut_slice(&mut self) -> &mut [u8];
    /// `len() == 0`.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl RegionMemory for Vec<u8> {
    fn len(&self) -> usize {
        Vec::len(self)
    }
    fn as_slice(&self) -> &[u8] {
        self
    }
    fn as_mut_slice(&mut self) -> &mut [u8] {
        self
    }
}

impl RegionMemory for Box<[u8]> {
    fn len(&self) -> usize {
        <[u8]>::len(self)
    }
    fn as_slice(&self) -> &[u8] {
        self
    }
    fn as_mut_slice(&mut self) -> &mut [u8] {
        self
    }
}

/// Access rights of a memory region (verbs `IBV_ACCESS_*`). Local read is
/// always allowed.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Access(u8);

impl Access {
    /// No rights beyond local read.
    pub const NONE: Access = Access(0);
    /// The local side may write (receive buffers, READ / atomic results).
    pub const LOCAL_WRITE: Access = Access(1);
    /// Remote peers may RDMA WRITE.
    pub const REMOTE_WRITE: Access = Access(2);
    /// Remote peers may RDMA READ.
    pub const REMOTE_READ: Access = Access(4);
    /// Remote peers may run atomics.
    pub const REMOTE_ATOMIC: Access = Access(8);
    /// Every right.
    pub const ALL: Access = Access(15);
    /// Memory windows may be bound to the region (`IBV_ACCESS_MW_BIND`,
    /// C10-73). A region's right only: not in [`Access::ALL`].
    pub const MW_BIND: Access = Access(16);

    /// Every right in `other` is also in `self`.
    pub const fn contains(self, other: Access) -> bool {
        self.0 & other.0 == other.0
    }

    /// Raw bits.
    pub const fn bits(self) -> u8 {
        self.0
    }

    /// The rights of `bits` (verbs `IBV_ACCESS_*` values), others dropped.
    pub const fn from_bits_truncate(bits: u8) -> Access {
        Access(bits & (Access::ALL.0 | Access::MW_BIND.0))
    }
}

impl BitOr for Access {
    type Output = Access;
    fn bitor(self, rhs: Access) -> Access {
        Access(self.0 | rhs.0)
    }
}

impl fmt::Debug for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names = [
            (Access::LOCAL_WRITE, "LOCAL_WRITE"),
            (Access::REMOTE_WRITE, "REMOTE_WRITE"),
            (Access::REMOTE_READ, "REMOTE_READ"),
            (Access::REMOTE_ATOMIC, "REMOTE_ATOMIC"),
            (Access::MW_BIND, "MW_BIND"),
        ];
        let mut first = true;
        write!(f, "Access(")?;
        for (a, n) in names {
            if self.contains(a) {
                if !first {
                    write!(f, "|")?;
                }
                write!(f, "{n}")?;
                first = false;
            }
        }
        write!(f, ")")
    }
}

/// Keys returned by registration: two different values (`docs/reliable-connection.md`,
/// "Memory keys"). Each is the image of a counter under the table's secret
/// 32-bit permutation ([`super::KeyPermutation`], keyed from the
/// endpoint's seed): unpredictable to whoever does not know the seed, and
/// never handed out twice until the counter wraps (2^31 registrations of
/// the table, far more than 2^24 registrations of any one slot).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MrKeys {
    /// Local key, used in scatter/gather entries.
    pub lkey: u32,
    /// Remote key, given to peers for RDMA WRITE/READ/atomics.
    pub rkey: u32,
}

/// Why an access to a memory region was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AccessError {
    /// No region has this key, or the region is of another protection
    /// domain than the access (rxe `lookup_mr`).
    UnknownKey,
    /// The range is not inside the region.
    OutOfBounds,
    /// The region's rights do not allow this access.
    NotPermitted,
    /// Atomic address not 8-byte aligned.
    Misaligned,
}

struct Region {
    memory: Box<dyn RegionMemory>,
    /// `memory.len()` at registration (saves a dynamic call per access; the
    /// slices are still taken with `get`, so a memory that shrank cannot
    /// cause a panic or an out-of-range access).
    len: u64,
    iova: u64,
    access: Access,
    keys: MrKeys,
    /// The protection domain it belongs to.
    pd: u32,
    /// Memory windows bound to it: it cannot be deregistered while any
    /// is (rxe `rxe_dereg_mr`: `num_mw > 0` fails).
    windows: u32,
}

/// Who reaches memory through an R_Key: a QP (its number, for a type 2
/// window) of a protection domain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct QpScope {
    /// The QP's protection domain.
    pub pd: u32,
    /// The QP's number.
    pub qpn: u32,
}

/// What an R_Key or L_Key names.
#[derive(Debug, Clone, Copy)]
enum Target {
    /// A region (its slot).
    Region(usize),
    /// A window (its slot).
    Window(usize),
}

/// The memory regions and memory windows of one endpoint.
pub struct MrTable {
    slots: Vec<Option<Region>>,
    free: Vec<u32>,
    /// Both keys of every region -> its slot: O(1) on the hot path.
    by_key: NumberMap<u32>,
    /// Memory windows ([`super::mw`]) and their free slots.
    windows: Vec<Option<Window>>,
    free_windows: Vec<u32>,
    /// A window's key without its low byte (`rkey >> 8`) -> its slot:
    /// those 24 bits are the window's for life, whatever key byte a bind
    /// gives it, and no region key has them.
    by_prefix: NumberMap<u32>,
    /// Keys are `permutation(counter)`, `counter` counting up.
    permutation: KeyPermutation,
    counter: u32,
}

impl Default for MrTable {
    fn default() -> MrTable {
        MrTable::with_seed(crate::endpoint::DEFAULT_SEED)
    }
}

/// Largest number of regions per endpoint.
const MAX_REGIONS: usize = 1 << 24;

/// Any of these rights makes an access remote: it must name the R_Key.
const REMOTE: Access =
    Access(Access::REMOTE_WRITE.0 | Access::REMOTE_READ.0 | Access::REMOTE_ATOMIC.0);

impl MrTable {
    /// An empty table whose keys come from the fixed [`crate::endpoint::DEFAULT_SEED`].
    pub fn new() -> MrTable {
        MrTable::default()
    }

    /// An empty table whose keys are derived from the secret `seed`.
    pub fn with_seed(seed: Seed) -> MrTable {
        MrTable {
            slots: Vec::new(),
            free: Vec::new(),
            by_key: NumberMap::default(),
            windows: Vec::new(),
            free_windows: Vec::new(),
            by_prefix: NumberMap::default(),
            permutation: KeyPermutation::new(seed),
            counter: 0,
        }
    }

    /// The next key no region of this table holds (nor ever held, until
    /// the counter wraps); never 0.
    fn draw_key(&mut self) -> u32 {
        loop {
            let k = self.permutation.apply(self.counter);
            self.counter = self.counter.wrapping_add(1);
            // Only keys registered under another table's choice
            // (`register_at`) can be in use already; the upper 24 bits of
            // a window's key are its own.
            if k != 0 && !self.by_key.contains_key(&k) && !self.by_prefix.contains_key(&(k >> 8)) {
                return k;
            }
        }
    }

    /// Register `memory` at I/O virtual address `iova` with `access` rights
    /// under two fresh keys, in protection domain 0. Returns `None` when
    /// the table is full or `iova + len` overflows.
    pub fn register(
        &mut self,
        memory: Box<dyn RegionMemory>,
        iova: u64,
        access: Access,
    ) -> Option<MrKeys> {
        self.register_in(0, memory, iova, access)
    }

    /// [`MrTable::register`] into protection domain `pd`: only QPs of `pd`
    /// reach the region by its keys.
    pub fn register_in(
        &mut self,
        pd: u32,
        memory: Box<dyn RegionMemory>,
        iova: u64,
        access: Access,
    ) -> Option<MrKeys> {
        iova.checked_add(memory.len() as u64)?;
        if self.by_key.len() / 2 >= MAX_REGIONS {
            return None;
        }
        let lkey = self.draw_key();
        let mut rkey = self.draw_key();
        while rkey == lkey {
            rkey = self.draw_key();
        }
        let keys = MrKeys { lkey, rkey };
        self.occupy(pd, memory, iova, access, keys);
        Some(keys)
    }

    /// Puts a region of `pd` with `keys` (both free) into a free slot.
    fn occupy(
        &mut self,
        pd: u32,
        memory: Box<dyn RegionMemory>,
        iova: u64,
        access: Access,
        keys: MrKeys,
    ) {
        let region = Region {
            len: memory.len() as u64,
            memory,
            iova,
            access,
            keys,
            pd,
            windows: 0,
        };
        let index = match self.free.pop() {
            Some(i) => {
                self.slots[i as usize] = Some(region);
                i
            }
            None => {
                self.slots.push(Some(region));
                (self.slots.len() - 1) as u32
            }
        };
        self.by_key.insert(keys.lkey, index);
        self.by_key.insert(keys.rkey, index);
    }

    /// Register `memory` under keys chosen elsewhere (as returned by
    /// [`MrTable::register`] of another table). Several tables that each
    /// register the same memory with the same keys then accept the same
    /// keys, which is how the queues of one device share its regions.
    /// Returns `None` when a key is taken, the two keys are equal, or
    /// `iova + len` overflows.
    pub fn register_at(
        &mut self,
        memory: Box<dyn RegionMemory>,
        iova: u64,
        access: Access,
        keys: MrKeys,
    ) -> Option<MrKeys> {
        iova.checked_add(memory.len() as u64)?;
        if keys.lkey == keys.rkey
            || self.by_key.contains_key(&keys.lkey)
            || self.by_key.contains_key(&keys.rkey)
            || self.by_prefix.contains_key(&(keys.lkey >> 8))
            || self.by_prefix.contains_key(&(keys.rkey >> 8))
            || self.by_key.len() / 2 >= MAX_REGIONS
        {
            return None;
        }
        self.occupy(0, memory, iova, access, keys);
        Some(keys)
    }

    /// Regions registered now.
    pub fn region_count(&self) -> usize {
        self.slots.len() - self.free.len()
    }

    /// Deregister the region whose L_Key is `lkey` and hand its memory
    /// back. Both its keys are unknown from then on, and never come back
    /// (see [`MrKeys`]). None, and nothing changed, for an unknown key or
    /// a region that memory windows are bound to
    /// ([`MrTable::bound_windows`]).
    pub fn deregister(&mut self, lkey: u32) -> Option<Box<dyn RegionMemory>> {
        let index = *self.by_key.get(&lkey)?;
        let slot = self.slots.get_mut(index as usize)?;
        if slot
            .as_ref()
            .is_none_or(|r| r.keys.lkey != lkey || r.windows > 0)
        {
            return None;
        }
        let region = slot.take()?;
        self.by_key.remove(&region.keys.lkey);
        self.by_key.remove(&region.keys.rkey);
        self.free.push(index);
        Some(region.memory)
    }

    /// Reregister the region whose L_Key is `lkey` (`ibv_rereg_mr`): new
    /// memory, start address and rights, the same keys, slot and
    /// protection domain ([`MrTable::set_pd`] moves it to another). Returns
    /// the memory it replaced; None (and nothing changed) for an unknown
    /// key or a range that wraps.
    pub fn reregister(
        &mut self,
        lkey: u32,
        memory: Box<dyn RegionMemory>,
        iova: u64,
        access: Access,
    ) -> Option<Box<dyn RegionMemory>> {
        iova.checked_add(memory.len() as u64)?;
        let index = *self.by_key.get(&lkey)?;
        let region = self.slots.get_mut(index as usize)?.as_mut()?;
        if region.keys.lkey != lkey {
            return None;
        }
        region.len = memory.len() as u64;
        region.iova = iova;
        region.access = access;
        Some(core::mem::replace(&mut region.memory, memory))
    }

    /// Move the region whose L_Key is `lkey` into protection domain `pd`
    /// (`ibv_rereg_mr` with `IBV_REREG_MR_CHANGE_PD`): from then on only
    /// QPs of `pd` reach it by its keys. Returns the PD it was in; None
    /// (and nothing changed) for an unknown key.
    pub fn set_pd(&mut self, lkey: u32, pd: u32) -> Option<u32> {
        let index = *self.by_key.get(&lkey)?;
        let region = self.slots.get_mut(index as usize)?.as_mut()?;
        if region.keys.lkey != lkey {
            return None;
        }
        Some(core::mem::replace(&mut region.pd, pd))
    }

    /// The region of `key`: its R_Key for a remote access (`need` has a
    /// remote right), its L_Key otherwise; and, for an access through a
    /// QP (`pd` is `Some`), a region of the QP's protection domain.
    #[inline]
    fn lookup(&self, key: u32, need: Access, pd: Option<u32>) -> Option<usize> {
        let i = *self.by_key.get(&key)? as usize;
        let r = self.slots.get(i)?.as_ref()?;
        let expected = if need.0 & REMOTE.0 != 0 {
            r.keys.rkey
        } else {
            r.keys.lkey
        };
        // IBA 10.2.3, rxe lookup_mr (`mr->pd != pd`): a key works only
        // through a QP of the region's PD; another PD's key is unknown.
        (expected == key && pd.is_none_or(|pd| pd == r.pd)).then_some(i)
    }

    /// What `key` names for an access needing `need`: the region of
    /// [`Self::lookup`], or, for a remote access through a QP (`via`), a
    /// window that admits it (rxe `check_rkey`: `rxe_lookup_mw` for a
    /// window's key, `lookup_mr` for a region's). A key no region nor
    /// window answers is unknown.
    #[inline]
    fn find(
        &self,
        key: u32,
        need: Access,
        pd: Option<u32>,
        via: Option<QpScope>,
    ) -> Result<Target, AccessError> {
        if let Some(i) = self.lookup(key, need, pd) {
            return Ok(Target::Region(i));
        }
        match via {
            Some(qp) if need.0 & REMOTE.0 != 0 => self.find_window(key, qp, need),
            _ => Err(AccessError::UnknownKey),
        }
    }

    /// The window of `key` if it admits a remote access needing `need`
    /// through `qp` (rxe `rxe_lookup_mw`: the same key, the window's PD, a
    /// type 2's own QP, bound with a non-zero length, the rights).
    #[cold]
    fn find_window(&self, key: u32, qp: QpScope, need: Access) -> Result<Target, AccessError> {
        let w = *self
            .by_prefix
            .get(&(key >> 8))
            .ok_or(AccessError::UnknownKey)? as usize;
        let win = self
            .windows
            .get(w)
            .and_then(Option::as_ref)
            .ok_or(AccessError::UnknownKey)?;
        win.admits(key, qp.pd, qp.qpn, need)
            .map(|_| Target::Window(w))
            .ok_or(AccessError::UnknownKey)
    }

    /// The address in the region that `addr` means through `target`: the
    /// same, or, through a zero-based window, that far from its start.
    #[inline]
    fn effective(&self, target: Target, addr: u64) -> Result<u64, AccessError> {
        match target {
            Target::Region(_) => Ok(addr),
            Target::Window(w) => match self.windows[w].and_then(|w| w.binding) {
                Some(b) if b.zero_based => b.addr.checked_add(addr).ok_or(AccessError::OutOfBounds),
                Some(_) => Ok(addr),
                None => Err(AccessError::UnknownKey),
            },
        }
    }

    /// The region slot and the byte offset in it of `[addr, addr + len)`
    /// through `target`, after the range and rights checks: a region's
    /// own; a window's range (and the region's, which may have changed
    /// since the bind) with the window's rights.
    #[inline]
    fn resolve(
        &self,
        target: Target,
        addr: u64,
        len: u64,
        need: Access,
    ) -> Result<(usize, usize), AccessError> {
        match target {
            Target::Region(i) => {
                let r = self.slots[i].as_ref().ok_or(AccessError::UnknownKey)?;
                Ok((i, Self::check_region(r, addr, len, need)?))
            }
            Target::Window(w) => {
                let b = self.windows[w]
                    .and_then(|w| w.binding)
                    .ok_or(AccessError::UnknownKey)?;
                let eff = self.effective(target, addr)?;
                let in_window = eff.checked_sub(b.addr).ok_or(AccessError::OutOfBounds)?;
                if in_window.checked_add(len).is_none_or(|end| end > b.len) {
                    return Err(AccessError::OutOfBounds);
                }
                let i = b.region as usize;
                let r = self
                    .slots
                    .get(i)
                    .and_then(Option::as_ref)
                    .filter(|r| r.keys.lkey == b.lkey)
                    .ok_or(AccessError::UnknownKey)?;
                // The window's rights were checked (`find_window`); the
                // region's range still bounds it.
                Ok((i, Self::check_region(r, eff, len, Access::NONE)?))
            }
        }
    }

    /// [`Self::find`] and [`Self::resolve`] in one.
    #[inline]
    fn locate(
        &self,
        key: u32,
        addr: u64,
        len: u64,
        need: Access,
        pd: Option<u32>,
        via: Option<QpScope>,
    ) -> Result<(usize, usize), AccessError> {
        let target = self.find(key, need, pd, via)?;
        self.resolve(target, addr, len, need)
    }

    /// Check that the region of `key` is in protection domain `pd` (the
    /// PD of the QP the access comes through), that `[addr, addr + len)`
    /// lies inside it and that it grants `need`; return the byte offset of
    /// `addr`. Regions only: a remote access through a QP, which may name
    /// a window, is [`MrTable::check_remote`].
    #[inline]
    pub fn check(
        &self,
        pd: u32,
        key: u32,
        addr: u64,
        len: u64,
        need: Access,
    ) -> Result<usize, AccessError> {
        self.locate(key, addr, len, need, Some(pd), None)
            .map(|(_, off)| off)
    }

    /// [`MrTable::check`] of a remote access through QP `qp`: the R_Key
    /// may be a region's or a memory window's (`rc::mw`). Returns
    /// the byte offset in the region.
    #[inline]
    pub fn check_remote(
        &self,
        qp: QpScope,
        key: u32,
        addr: u64,
        len: u64,
        need: Access,
    ) -> Result<usize, AccessError> {
        self.locate(key, addr, len, need, Some(qp.pd), Some(qp))
            .map(|(_, off)| off)
    }

    /// [`MrTable::check`] in whatever protection domain the region is:
    /// key, range and rights only. For a check made ahead of the access
    /// (a post), whose PD is checked when the bytes move: the region may
    /// change PD in between (`ibv_rereg_mr`).
    #[inline]
    pub fn check_any_pd(
        &self,
        key: u32,
        addr: u64,
        len: u64,
        need: Access,
    ) -> Result<usize, AccessError> {
        self.locate(key, addr, len, need, None, None)
            .map(|(_, off)| off)
    }

    /// The check of a posted scatter/gather entry: an entry of no bytes
    /// names no memory and passes; any other needs its key, range and
    /// `need` ([`MrTable::check_any_pd`]), else a local protection error
    /// (rxe's `lookup_mr` at post).
    #[inline]
    pub fn check_sge(&self, sge: &Sge, need: Access) -> Result<(), VerbsError> {
        if sge.length > 0
            && self
                .check_any_pd(sge.lkey, sge.addr, u64::from(sge.length), need)
                .is_err()
        {
            return Err(VerbsError::LocalProtection);
        }
        Ok(())
    }

    #[inline]
    fn check_region(r: &Region, addr: u64, len: u64, need: Access) -> Result<usize, AccessError> {
        if !r.access.contains(need) {
            return Err(AccessError::NotPermitted);
        }
        let offset = addr.checked_sub(r.iova).ok_or(AccessError::OutOfBounds)?;
        let end = offset.checked_add(len).ok_or(AccessError::OutOfBounds)?;
        if end > r.len {
            return Err(AccessError::OutOfBounds);
        }
        Ok(offset as usize)
    }

    /// Where the first `len` bytes at `addr` of the region of `key` lie
    /// in memory, if the access `need` would be allowed (the checks of
    /// [`MrTable::slice`], in whatever PD the region is: the hint comes
    /// before the QP is looked up): for a receiver to prefetch them.
    /// Nothing is read.
    #[inline]
    pub fn range_hint(
        &self,
        key: u32,
        addr: u64,
        len: usize,
        need: Access,
    ) -> Option<crate::endpoint::MemoryRange> {
        self.bytes(key, addr, len, need, None, None)
            .ok()
            .map(crate::endpoint::MemoryRange::of_bytes)
    }

    #[inline]
    fn bytes(
        &self,
        key: u32,
        addr: u64,
        len: usize,
        need: Access,
        pd: Option<u32>,
        via: Option<QpScope>,
    ) -> Result<&[u8], AccessError> {
        let (i, off) = self.locate(key, addr, len as u64, need, pd, via)?;
        self.slots[i]
            .as_ref()
            .and_then(|r| r.memory.as_slice().get(off..off + len))
            .ok_or(AccessError::OutOfBounds)
    }

    #[inline]
    fn bytes_mut(
        &mut self,
        key: u32,
        addr: u64,
        len: usize,
        need: Access,
        pd: Option<u32>,
        via: Option<QpScope>,
    ) -> Result<&mut [u8], AccessError> {
        let (i, off) = self.locate(key, addr, len as u64, need, pd, via)?;
        self.slots[i]
            .as_mut()
            .and_then(|r| r.memory.as_mut_slice().get_mut(off..off + len))
            .ok_or(AccessError::OutOfBounds)
    }

    /// The bytes `[addr, addr + len)` of the region, after the checks of
    /// [`MrTable::check`] (an access through a QP of PD `pd`).
    #[inline]
    pub fn slice(
        &self,
        pd: u32,
        key: u32,
        addr: u64,
        len: usize,
        need: Access,
    ) -> Result<&[u8], AccessError> {
        self.bytes(key, addr, len, need, Some(pd), None)
    }

    /// [`MrTable::slice`] of a remote access through QP `qp` (checked as
    /// [`MrTable::check_remote`]: a region's or a window's R_Key).
    #[inline]
    pub fn slice_remote(
        &self,
        qp: QpScope,
        key: u32,
        addr: u64,
        len: usize,
        need: Access,
    ) -> Result<&[u8], AccessError> {
        self.bytes(key, addr, len, need, Some(qp.pd), Some(qp))
    }

    /// The bytes `[addr, addr + len)` of the region for writing, after the
    /// checks of [`MrTable::check`] (an access through a QP of PD `pd`).
    #[inline]
    pub fn slice_mut(
        &mut self,
        pd: u32,
        key: u32,
        addr: u64,
        len: usize,
        need: Access,
    ) -> Result<&mut [u8], AccessError> {
        self.bytes_mut(key, addr, len, need, Some(pd), None)
    }

    /// [`MrTable::slice_mut`] of a remote access through QP `qp` (checked
    /// as [`MrTable::check_remote`]).
    #[inline]
    pub fn slice_mut_remote(
        &mut self,
        qp: QpScope,
        key: u32,
        addr: u64,
        len: usize,
        need: Access,
    ) -> Result<&mut [u8], AccessError> {
        self.bytes_mut(key, addr, len, need, Some(qp.pd), Some(qp))
    }

    /// Copy `data` into the region at `addr` (checked against `pd` and
    /// `need`, as [`MrTable::check`]).
    #[inline]
    pub fn write(
        &mut self,
        pd: u32,
        key: u32,
        addr: u64,
        data: &[u8],
        need: Access,
    ) -> Result<(), AccessError> {
        self.bytes_mut(key, addr, data.len(), need, Some(pd), None)?
            .copy_from_slice(data);
        Ok(())
    }

    /// [`MrTable::write`] of a remote access through QP `qp` (checked as
    /// [`MrTable::check_remote`]).
    #[inline]
    pub fn write_remote(
        &mut self,
        qp: QpScope,
        key: u32,
        addr: u64,
        data: &[u8],
        need: Access,
    ) -> Result<(), AccessError> {
        self.bytes_mut(key, addr, data.len(), need, Some(qp.pd), Some(qp))?
            .copy_from_slice(data);
        Ok(())
    }

    /// The application's own view of its region (`mr_slice`): the bytes
    /// `[addr, addr + len)` of the region of L_Key `key`, in whatever PD it
    /// is (local read: always allowed).
    pub fn slice_any_pd(&self, key: u32, addr: u64, len: usize) -> Result<&[u8], AccessError> {
        self.bytes(key, addr, len, Access::NONE, None, None)
    }

    /// The application's own write into its region (`mr_write`): copy
    /// `data` at `addr` of the region of L_Key `key`, in whatever PD it
    /// is (no right needed).
    pub fn write_any_pd(&mut self, key: u32, addr: u64, data: &[u8]) -> Result<(), AccessError> {
        self.bytes_mut(key, addr, data.len(), Access::NONE, None, None)?
            .copy_from_slice(data);
        Ok(())
    }

    /// Copy bytes of the region at `addr` into `out`: the application's
    /// own read (`mr_read`), in whatever PD the region is (local read:
    /// always allowed).
    pub fn read(&self, key: u32, addr: u64, out: &mut [u8]) -> Result<(), AccessError> {
        out.copy_from_slice(self.slice_any_pd(key, addr, out.len())?);
        Ok(())
    }

    /// Run an 8-byte atomic at `addr` through a QP of PD `pd` (checked as
    /// [`MrTable::check`], REMOTE_ATOMIC): compare-and-swap when `compare`
    /// is `Some`, fetch-and-add otherwise. Returns the original value.
    ///
    /// Byte order: the 64-bit word is read and written little-endian, the
    /// byte order of the x86/arm hosts this engine runs on, matching what a
    /// local application sees when it reads the word as a `u64`.
    pub fn atomic(
        &mut self,
        pd: u32,
        key: u32,
        addr: u64,
        compare: Option<u64>,
        swap_add: u64,
    ) -> Result<u64, AccessError> {
        self.atomic_in(pd, None, key, addr, compare, swap_add)
    }

    /// [`MrTable::atomic`] through QP `qp` (checked as
    /// [`MrTable::check_remote`]: a region's or a window's R_Key; the
    /// alignment is that of the address in the region).
    pub fn atomic_remote(
        &mut self,
        qp: QpScope,
        key: u32,
        addr: u64,
        compare: Option<u64>,
        swap_add: u64,
    ) -> Result<u64, AccessError> {
        self.atomic_in(qp.pd, Some(qp), key, addr, compare, swap_add)
    }

    /// Store the 8 bytes `value` at `addr` through QP `qp` as one aligned
    /// 64-bit write: an ATOMIC WRITE (IBA 1.5 9.4.8). Checked as
    /// [`MrTable::check_remote`] with REMOTE_WRITE (rxe check_rkey: an
    /// ATOMIC WRITE needs IB_ACCESS_REMOTE_WRITE), then the alignment of
    /// the address in the region (rxe `rxe_mr_do_atomic_write`: a
    /// misaligned address is RESPST_ERR_MISALIGNED_ATOMIC). The bytes land
    /// as they came, as rxe stores the payload's `u64` unchanged.
    pub fn atomic_write_remote(
        &mut self,
        qp: QpScope,
        key: u32,
        addr: u64,
        value: [u8; 8],
    ) -> Result<(), AccessError> {
        let need = Access::REMOTE_WRITE;
        let target = self.find(key, need, Some(qp.pd), Some(qp))?;
        if !self.effective(target, addr)?.is_multiple_of(8) {
            return Err(AccessError::Misaligned);
        }
        let (i, off) = self.resolve(target, addr, 8, need)?;
        self.slots[i]
            .as_mut()
            .and_then(|r| r.memory.as_mut_slice().get_mut(off..off + 8))
            .ok_or(AccessError::OutOfBounds)?
            .copy_from_slice(&value);
        Ok(())
    }

    fn atomic_in(
        &mut self,
        pd: u32,
        via: Option<QpScope>,
        key: u32,
        addr: u64,
        compare: Option<u64>,
        swap_add: u64,
    ) -> Result<u64, AccessError> {
        let need = Access::REMOTE_ATOMIC;
        let target = self.find(key, need, Some(pd), via)?;
        // Checked after the key so an unknown key reports UnknownKey.
        if !self.effective(target, addr)?.is_multiple_of(8) {
            return Err(AccessError::Misaligned);
        }
        let (i, off) = self.resolve(target, addr, 8, need)?;
        let bytes = self.slots[i]
            .as_mut()
            .and_then(|r| r.memory.as_mut_slice().get_mut(off..off + 8))
            .ok_or(AccessError::OutOfBounds)?;
        let mut word = [0u8; 8];
        word.copy_from_slice(bytes);
        let orig = u64::from_le_bytes(word);
        let new = match compare {
            Some(c) => {
                if orig == c {
                    swap_add
                } else {
                    orig
                }
            }
            None => orig.wrapping_add(swap_add),
        };
        bytes.copy_from_slice(&new.to_le_bytes());
        Ok(orig)
    }

    /// The slot of the window `key` names (by its upper 24 bits).
    fn window_slot(&self, key: u32) -> Option<usize> {
        let w = *self.by_prefix.get(&(key >> 8))? as usize;
        self.windows.get(w)?.as_ref().map(|_| w)
    }

    /// Allocate a memory window of `kind` in protection domain `pd`
    /// (`ibv_alloc_mw`; rxe `rxe_alloc_mw`): a type 1 starts valid and
    /// bound to nothing, a type 2 free. Returns its R_Key, whose upper 24
    /// bits name it for life; None when the table is full.
    pub fn alloc_window(&mut self, pd: u32, kind: MwType) -> Option<u32> {
        if self.by_prefix.len() >= MAX_REGIONS {
            return None;
        }
        // A key whose upper 24 bits no region key and no window has.
        let rkey = loop {
            let k = self.draw_key();
            let prefix = k & !0xFF;
            if !(0..=0xFF).any(|b| self.by_key.contains_key(&(prefix | b))) {
                break k;
            }
        };
        let window = Window {
            kind,
            pd,
            rkey,
            binding: None,
        };
        let slot = match self.free_windows.pop() {
            Some(i) => {
                self.windows[i as usize] = Some(window);
                i
            }
            None => {
                self.windows.push(Some(window));
                (self.windows.len() - 1) as u32
            }
        };
        self.by_prefix.insert(rkey >> 8, slot);
        Some(rkey)
    }

    /// Free the window that `key` names (any key byte: the upper 24 bits
    /// name it) (`ibv_dealloc_mw`; rxe `rxe_mw_cleanup`): its binding goes
    /// with it, and its keys are unknown from then on.
    pub fn dealloc_window(&mut self, key: u32) -> Result<(), MwError> {
        let w = self.window_slot(key).ok_or(MwError::UnknownKey)?;
        self.unbind(w);
        self.windows[w] = None;
        self.by_prefix.remove(&(key >> 8));
        self.free_windows.push(w as u32);
        Ok(())
    }

    /// The window's current R_Key and its type, for the window that `key`
    /// names (any key byte).
    pub fn window(&self, key: u32) -> Option<(u32, MwType)> {
        let w = self.windows[self.window_slot(key)?]?;
        Some((w.rkey, w.kind))
    }

    /// Regions' windows bound: how many windows are bound to the region
    /// of L_Key `lkey` (it cannot be deregistered while any is).
    pub fn bound_windows(&self, lkey: u32) -> u32 {
        self.lookup(lkey, Access::NONE, None)
            .and_then(|i| self.slots[i].as_ref())
            .map_or(0, |r| r.windows)
    }

    /// Drop window `w`'s binding, if any.
    fn unbind(&mut self, w: usize) {
        let Some(b) = self.windows[w].as_mut().and_then(|w| w.binding.take()) else {
            return;
        };
        if let Some(r) = self
            .slots
            .get_mut(b.region as usize)
            .and_then(Option::as_mut)
            .filter(|r| r.keys.lkey == b.lkey)
        {
            r.windows = r.windows.saturating_sub(1);
        }
    }

    /// Bind a window through QP `qp` (a BIND_MW work request reaching the
    /// requester; rxe `rxe_bind_mw`, `rxe_check_bind_mw`,
    /// `rxe_do_bind_mw`). The checks, in rxe's order:
    /// - the window's current key is `bind.mw_rkey`;
    /// - a type 1 is valid (always, until freed) and not zero-based
    ///   (o10-36.2.2); a type 2 is free (o10-37.2.30), of the QP's PD
    ///   (C10-72), and the bind has a length (o10-37.2.40);
    /// - with a length: the region of `bind.lkey` exists, is of the
    ///   window's PD, has `MW_BIND` (C10-73), has `LOCAL_WRITE` if the
    ///   window allows remote writes or atomics (C10-74), and holds the
    ///   whole range (C10-75; a zero-based range counts from the
    ///   region's start).
    ///
    /// Then the window takes the key byte of `bind.rkey`, the range and
    /// rights, and, a type 2, the QP; a type 1 bound with zero length is
    /// bound to nothing. Returns the window's new R_Key.
    pub fn bind_window(&mut self, qp: QpScope, bind: &MwBind) -> Result<u32, MwError> {
        let w = self.window_slot(bind.mw_rkey).ok_or(MwError::UnknownKey)?;
        let win = self.windows[w].ok_or(MwError::UnknownKey)?;
        if win.rkey != bind.mw_rkey {
            return Err(MwError::UnknownKey);
        }
        match win.kind {
            MwType::One if bind.zero_based => return Err(MwError::Rights),
            MwType::One => {}
            MwType::Two if win.binding.is_some() => return Err(MwError::State),
            MwType::Two if qp.pd != win.pd => return Err(MwError::Owner),
            MwType::Two if bind.len == 0 => return Err(MwError::Range),
            MwType::Two => {}
        }
        let binding = if bind.len == 0 {
            None
        } else {
            let i = self
                .lookup(bind.lkey, Access::NONE, None)
                .ok_or(MwError::UnknownKey)?;
            let r = self.slots[i].as_ref().ok_or(MwError::UnknownKey)?;
            if r.pd != win.pd {
                return Err(MwError::Owner);
            }
            if !r.access.contains(Access::MW_BIND) {
                return Err(MwError::Rights);
            }
            let writes = Access::REMOTE_WRITE | Access::REMOTE_ATOMIC;
            if bind.access.bits() & writes.bits() != 0 && !r.access.contains(Access::LOCAL_WRITE) {
                return Err(MwError::Rights);
            }
            let fits = if bind.zero_based {
                bind.len <= r.len && bind.addr.checked_add(bind.len).is_some()
            } else {
                bind.addr >= r.iova
                    && bind
                        .addr
                        .checked_add(bind.len)
                        .is_some_and(|end| end <= r.iova + r.len)
            };
            if !fits {
                return Err(MwError::Range);
            }
            Some(Binding {
                region: i as u32,
                lkey: bind.lkey,
                addr: bind.addr,
                len: bind.len,
                access: Access(bind.access.bits() & REMOTE.0),
                zero_based: bind.zero_based,
                qpn: (win.kind == MwType::Two).then_some(qp.qpn),
            })
        };
        self.unbind(w);
        if let Some(b) = binding {
            if let Some(r) = self.slots[b.region as usize].as_mut() {
                r.windows += 1;
            }
        }
        let rkey = (win.rkey & !0xFF) | (bind.rkey & 0xFF);
        let slot = self.windows[w].as_mut().ok_or(MwError::UnknownKey)?;
        slot.rkey = rkey;
        slot.binding = binding;
        Ok(rkey)
    }

    /// Invalidate the type 2 window of R_Key `rkey` through QP `qp`: a
    /// LOCAL_INV on the QP (`remote` false) or a SEND with invalidate
    /// received on it (rxe `rxe_invalidate_mw`,
    /// `rxe_check_invalidate_mw`). Refused for a key no window has now
    /// (exactly: the key byte counts), a type 1 (o10-37.2.26), a window
    /// already free, a window of another PD than the QP's, and, from a
    /// peer, a window bound through another QP. The window is free from
    /// then on; its key stays its own until the next bind.
    pub fn invalidate_window(
        &mut self,
        qp: QpScope,
        rkey: u32,
        remote: bool,
    ) -> Result<(), MwError> {
        let w = self.window_slot(rkey).ok_or(MwError::UnknownKey)?;
        let win = self.windows[w].ok_or(MwError::UnknownKey)?;
        if win.rkey != rkey {
            return Err(MwError::UnknownKey);
        }
        if win.kind == MwType::One {
            return Err(MwError::State);
        }
        let Some(b) = win.binding else {
            return Err(MwError::State);
        };
        if win.pd != qp.pd || (remote && b.qpn != Some(qp.qpn)) {
            return Err(MwError::Owner);
        }
        self.unbind(w);
        Ok(())
    }

    /// Free every type 2 window bound through QP `qpn` (the QP is
    /// destroyed: rxe holds the QP while a window is bound to it; here
    /// the QP's number may come back, and must not find them bound).
    pub fn release_windows_of(&mut self, qpn: u32) {
        for w in 0..self.windows.len() {
            let bound_here = self.windows[w]
                .and_then(|w| w.binding)
                .is_some_and(|b| b.qpn == Some(qpn));
            if bound_here {
                self.unbind(w);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rc::{MwBind, MwError, MwType};

    #[test]
    fn keys_chosen_by_one_table_register_in_another() {
        let mut a = MrTable::new();
        let _first = a.register(Box::new(vec![0u8; 8]), 0, Access::ALL).unwrap();
        let k = a
            .register(Box::new(vec![0u8; 64]), 0x2000, Access::ALL)
            .unwrap();
        let mut b = MrTable::new();
        assert_eq!(
            b.register_at(Box::new(vec![0u8; 64]), 0x2000, Access::ALL, k),
            Some(k)
        );
        assert_eq!(b.check(0, k.rkey, 0x2000, 64, Access::REMOTE_WRITE), Ok(0));
        // The keys are taken: a second registration under them fails.
        assert!(b
            .register_at(Box::new(vec![0u8; 8]), 0, Access::ALL, k)
            .is_none());
        // b's own draws avoid the keys registered under a's choice.
        for _ in 0..4 {
            let other = b.register(Box::new(vec![0u8; 8]), 0, Access::ALL).unwrap();
            assert!(![k.lkey, k.rkey].contains(&other.lkey));
            assert!(![k.lkey, k.rkey].contains(&other.rkey));
        }
        assert!(b.deregister(k.lkey).is_some());
        assert_eq!(
            b.check(0, k.rkey, 0x2000, 1, Access::REMOTE_WRITE),
            Err(AccessError::UnknownKey)
        );
    }

    #[test]
    fn reregister_keeps_the_keys_and_changes_range_and_rights() {
        let mut t = MrTable::new();
        let k = t
            .register(Box::new(vec![0u8; 64]), 0x1000, Access::ALL)
            .unwrap();
        let old = t
            .reregister(k.lkey, Box::new(vec![7u8; 16]), 0x5000, Access::REMOTE_READ)
            .unwrap();
        assert_eq!(old.len(), 64);
        assert_eq!(t.check(0, k.rkey, 0x5000, 16, Access::REMOTE_READ), Ok(0));
        assert!(t.check(0, k.rkey, 0x1000, 8, Access::REMOTE_READ).is_err());
        assert!(t.check(0, k.rkey, 0x5000, 17, Access::REMOTE_READ).is_err());
        assert!(t.check(0, k.rkey, 0x5000, 8, Access::REMOTE_WRITE).is_err());
        // Only the L_Key names the region; nothing changes otherwise.
        assert!(t
            .reregister(k.rkey, Box::new(vec![0u8; 8]), 0, Access::ALL)
            .is_none());
        assert!(t
            .reregister(k.lkey ^ 1, Box::new(vec![0u8; 8]), 0, Access::ALL)
            .is_none());
        assert!(t
            .reregister(k.lkey, Box::new(vec![0u8; 8]), u64::MAX, Access::ALL)
            .is_none());
        assert_eq!(t.check(0, k.rkey, 0x5000, 16, Access::REMOTE_READ), Ok(0));
        assert!(t.deregister(k.lkey).is_some());
    }

    #[test]
    fn a_key_works_only_through_its_regions_protection_domain() {
        let mut t = MrTable::new();
        let k = t
            .register_in(7, Box::new(vec![0u8; 64]), 0x1000, Access::ALL)
            .unwrap();
        // The region's own PD: every accessor reaches it.
        assert_eq!(t.check(7, k.rkey, 0x1000, 64, Access::REMOTE_WRITE), Ok(0));
        assert_eq!(t.check(7, k.lkey, 0x1008, 8, Access::LOCAL_WRITE), Ok(8));
        assert!(t
            .write(7, k.rkey, 0x1000, &[5; 8], Access::REMOTE_WRITE)
            .is_ok());
        assert_eq!(
            t.slice(7, k.lkey, 0x1000, 8, Access::NONE),
            Ok(&[5u8; 8][..])
        );
        assert_eq!(t.atomic(7, k.rkey, 0x1010, None, 3), Ok(0));
        // Another PD (0 included): as if no region had the key, for both
        // keys and every accessor, whatever the range and rights.
        for pd in [0, 6, 8, u32::MAX] {
            for (key, need) in [
                (k.rkey, Access::REMOTE_WRITE),
                (k.rkey, Access::REMOTE_READ),
                (k.lkey, Access::LOCAL_WRITE),
                (k.lkey, Access::NONE),
            ] {
                assert_eq!(
                    t.check(pd, key, 0x1000, 8, need),
                    Err(AccessError::UnknownKey)
                );
                assert_eq!(
                    t.slice(pd, key, 0x1000, 8, need),
                    Err(AccessError::UnknownKey)
                );
                assert_eq!(
                    t.write(pd, key, 0x1000, &[9; 8], need),
                    Err(AccessError::UnknownKey)
                );
            }
            assert_eq!(
                t.atomic(pd, k.rkey, 0x1010, None, 1),
                Err(AccessError::UnknownKey)
            );
            // Misaligned too: the key is unknown before the address counts.
            assert_eq!(
                t.atomic(pd, k.rkey, 0x1004, None, 1),
                Err(AccessError::UnknownKey)
            );
        }
        // Nothing was written through another PD.
        let mut out = [0u8; 24];
        t.read(k.lkey, 0x1000, &mut out).unwrap();
        assert_eq!(out[..8], [5; 8]);
        assert_eq!(out[16..], 3u64.to_le_bytes());
        // The application's own accesses and the posts' early check do not
        // look at the PD.
        assert_eq!(
            t.check_any_pd(k.lkey, 0x1000, 8, Access::LOCAL_WRITE),
            Ok(0)
        );
        assert!(t.write_any_pd(k.lkey, 0x1000, &[1; 8]).is_ok());
        assert_eq!(t.slice_any_pd(k.lkey, 0x1000, 8), Ok(&[1u8; 8][..]));
        // `register` is PD 0.
        let z = t.register(Box::new(vec![0u8; 8]), 0, Access::ALL).unwrap();
        assert_eq!(t.check(0, z.rkey, 0, 8, Access::REMOTE_WRITE), Ok(0));
        assert_eq!(
            t.check(7, z.rkey, 0, 8, Access::REMOTE_WRITE),
            Err(AccessError::UnknownKey)
        );
    }

    #[test]
    fn set_pd_moves_a_region_to_another_domain_and_back() {
        let mut t = MrTable::new();
        let k = t
            .register_in(1, Box::new(vec![0u8; 16]), 0x100, Access::ALL)
            .unwrap();
        assert_eq!(t.set_pd(k.lkey, 2), Some(1));
        assert_eq!(
            t.check(1, k.rkey, 0x100, 8, Access::REMOTE_READ),
            Err(AccessError::UnknownKey)
        );
        assert_eq!(t.check(2, k.rkey, 0x100, 8, Access::REMOTE_READ), Ok(0));
        assert_eq!(t.check(2, k.lkey, 0x100, 8, Access::LOCAL_WRITE), Ok(0));
        // A reregistration keeps the PD it is in.
        assert!(t
            .reregister(k.lkey, Box::new(vec![0u8; 32]), 0x200, Access::ALL)
            .is_some());
        assert_eq!(t.check(2, k.rkey, 0x200, 32, Access::REMOTE_READ), Ok(0));
        assert_eq!(
            t.check(1, k.rkey, 0x200, 8, Access::REMOTE_READ),
            Err(AccessError::UnknownKey)
        );
        assert_eq!(t.set_pd(k.lkey, 1), Some(2));
        assert_eq!(t.check(1, k.rkey, 0x200, 32, Access::REMOTE_READ), Ok(0));
        // Only the L_Key names the region; nothing changes otherwise.
        assert_eq!(t.set_pd(k.rkey, 5), None);
        assert_eq!(t.set_pd(k.lkey ^ 1, 5), None);
        assert_eq!(t.check(1, k.rkey, 0x200, 32, Access::REMOTE_READ), Ok(0));
        assert!(t.deregister(k.lkey).is_some());
        assert_eq!(t.set_pd(k.lkey, 1), None);
    }

    #[test]
    fn a_slot_reused_after_deregistration_takes_the_new_regions_pd() {
        let mut t = MrTable::new();
        let a = t
            .register_in(3, Box::new(vec![0u8; 8]), 0, Access::ALL)
            .unwrap();
        t.deregister(a.lkey).unwrap();
        let b = t
            .register_in(4, Box::new(vec![0u8; 8]), 0, Access::ALL)
            .unwrap();
        assert_eq!(t.slots.len(), 1);
        assert_eq!(t.check(4, b.rkey, 0, 8, Access::REMOTE_WRITE), Ok(0));
        assert_eq!(
            t.check(3, b.rkey, 0, 8, Access::REMOTE_WRITE),
            Err(AccessError::UnknownKey)
        );
    }

    #[test]
    fn lkey_and_rkey_differ_and_each_works_only_on_its_side() {
        let mut t = MrTable::new();
        let k = t
            .register(Box::new(vec![0u8; 64]), 0x40, Access::ALL)
            .unwrap();
        assert_ne!(k.lkey, k.rkey);
        assert_eq!(t.check(0, k.rkey, 0x40, 8, Access::REMOTE_WRITE), Ok(0));
        assert_eq!(t.check(0, k.lkey, 0x40, 8, Access::LOCAL_WRITE), Ok(0));
        // The L_Key is not a remote key, nor the R_Key a local one.
        assert_eq!(
            t.check(0, k.lkey, 0x40, 8, Access::REMOTE_WRITE),
            Err(AccessError::UnknownKey)
        );
        assert_eq!(
            t.check(0, k.rkey, 0x40, 8, Access::LOCAL_WRITE),
            Err(AccessError::UnknownKey)
        );
        // Deregistration names the L_Key.
        assert!(t.deregister(k.rkey).is_none());
        assert!(t.deregister(k.lkey).is_some());
    }

    #[test]
    fn a_deregistered_key_is_not_reissued_to_the_same_slot() {
        // One slot registered and deregistered over and over: no key comes
        // back (they are a permutation of a counter), and none is the
        // old `index << 8 | generation` shape.
        let mut t = MrTable::with_seed([9, 9]);
        let mut seen = std::collections::HashSet::new();
        for _ in 0..100_000 {
            let k = t.register(Box::new(vec![0u8; 8]), 0, Access::ALL).unwrap();
            assert!(seen.insert(k.lkey) && seen.insert(k.rkey));
            t.deregister(k.lkey).unwrap();
        }
        assert_eq!(t.slots.len(), 1);
    }

    #[test]
    fn keys_depend_on_the_seed() {
        let k = |seed| {
            MrTable::with_seed(seed)
                .register(Box::new(vec![0u8; 8]), 0, Access::ALL)
                .unwrap()
        };
        assert_ne!(k([1, 2]), k([1, 3]));
        assert_eq!(k([1, 2]), k([1, 2]));
    }

    #[test]
    fn checks_key_range_and_rights() {
        let mut t = MrTable::new();
        let k = t
            .register(
                Box::new(vec![0u8; 100]),
                0x1000,
                Access::REMOTE_WRITE | Access::LOCAL_WRITE,
            )
            .unwrap();
        assert_eq!(t.check(0, k.rkey, 0x1000, 100, Access::REMOTE_WRITE), Ok(0));
        assert_eq!(
            t.check(0, k.rkey, 0x1010, 10, Access::REMOTE_WRITE),
            Ok(0x10)
        );
        assert_eq!(
            t.check(0, k.rkey, 0x1000, 101, Access::REMOTE_WRITE),
            Err(AccessError::OutOfBounds)
        );
        assert_eq!(
            t.check(0, k.rkey, 0xFFF, 1, Access::REMOTE_WRITE),
            Err(AccessError::OutOfBounds)
        );
        assert_eq!(
            t.check(0, k.rkey, u64::MAX, 2, Access::REMOTE_WRITE),
            Err(AccessError::OutOfBounds)
        );
        assert_eq!(
            t.check(0, k.rkey, 0x1000, 8, Access::REMOTE_READ),
            Err(AccessError::NotPermitted)
        );
        assert_eq!(
            t.check(0, k.rkey ^ 0x100, 0x1000, 8, Access::REMOTE_WRITE),
            Err(AccessError::UnknownKey)
        );
        assert!(t
            .write(0, k.rkey, 0x1050, &[1; 5], Access::REMOTE_WRITE)
            .is_ok());
        assert_eq!(
            t.write(0, k.rkey, 0x1050, &[1; 5], Access::REMOTE_ATOMIC),
            Err(AccessError::NotPermitted)
        );
        let mut out = [0u8; 5];
        t.read(k.lkey, 0x1050, &mut out).unwrap();
        assert_eq!(out, [1; 5]);
    }

    #[test]
    fn stale_key_after_deregister_is_refused() {
        let mut t = MrTable::new();
        let k = t.register(Box::new(vec![0u8; 8]), 0, Access::ALL).unwrap();
        assert!(t.deregister(k.lkey).is_some());
        assert!(t.deregister(k.lkey).is_none());
        let k2 = t.register(Box::new(vec![0u8; 8]), 0, Access::ALL).unwrap();
        assert_ne!(k.lkey, k2.lkey);
        assert_eq!(
            t.check(0, k.rkey, 0, 8, Access::NONE),
            Err(AccessError::UnknownKey)
        );
    }

    #[test]
    fn atomics_compare_swap_and_fetch_add() {
        let mut t = MrTable::new();
        let k = t
            .register(Box::new(vec![0u8; 16]), 0x100, Access::REMOTE_ATOMIC)
            .unwrap();
        assert_eq!(t.atomic(0, k.rkey, 0x108, None, 5), Ok(0));
        assert_eq!(t.atomic(0, k.rkey, 0x108, Some(4), 9), Ok(5));
        assert_eq!(t.atomic(0, k.rkey, 0x108, Some(5), 9), Ok(5));
        assert_eq!(t.atomic(0, k.rkey, 0x108, None, 0), Ok(9));
        assert_eq!(
            t.atomic(0, k.rkey, 0x104, None, 0),
            Err(AccessError::Misaligned)
        );
        assert_eq!(
            t.atomic(0, k.rkey, 0x110, None, 0),
            Err(AccessError::OutOfBounds)
        );
    }

    #[test]
    fn a_windows_upper_key_bits_are_its_own_and_no_region_key_has_them() {
        let mut t = MrTable::with_seed([5, 6]);
        let mut prefixes = std::collections::HashSet::new();
        for i in 0..2000 {
            if i % 3 == 0 {
                let w = t.alloc_window(0, MwType::Two).unwrap();
                assert!(prefixes.insert(w >> 8), "a window's prefix is unique");
            } else {
                let k = t.register(Box::new(vec![0u8; 8]), 0, Access::ALL).unwrap();
                assert!(!prefixes.contains(&(k.lkey >> 8)));
                assert!(!prefixes.contains(&(k.rkey >> 8)));
            }
        }
        // Region keys registered elsewhere under a window's prefix are
        // refused.
        let p = *prefixes.iter().next().unwrap();
        let keys = MrKeys {
            lkey: (p << 8) | 1,
            rkey: 0x1234_5678,
        };
        assert!(t
            .register_at(Box::new(vec![0u8; 8]), 0, Access::ALL, keys)
            .is_none());
    }

    #[test]
    fn a_type_2_window_answers_only_the_qp_it_was_bound_through() {
        let mut t = MrTable::new();
        let k = t
            .register_in(
                2,
                Box::new(vec![0u8; 64]),
                0x1000,
                Access::LOCAL_WRITE | Access::MW_BIND,
            )
            .unwrap();
        let mw = t.alloc_window(2, MwType::Two).unwrap();
        let qp = QpScope { pd: 2, qpn: 0x11 };
        let other = QpScope { pd: 2, qpn: 0x12 };
        let bind = MwBind {
            mw_rkey: mw,
            rkey: mw + 1,
            lkey: k.lkey,
            addr: 0x1010,
            len: 16,
            access: Access::REMOTE_WRITE,
            zero_based: false,
        };
        let key = t.bind_window(qp, &bind).unwrap();
        assert_eq!(key, (mw & !0xFF) | ((mw + 1) & 0xFF));
        assert_eq!(
            t.check_remote(qp, key, 0x1010, 16, Access::REMOTE_WRITE),
            Ok(0x10)
        );
        assert_eq!(
            t.check_remote(other, key, 0x1010, 16, Access::REMOTE_WRITE),
            Err(AccessError::UnknownKey)
        );
        // Not through the region-only accessors, nor as a local key.
        assert!(t.check(2, key, 0x1010, 8, Access::REMOTE_WRITE).is_err());
        assert!(t.check_any_pd(key, 0x1010, 8, Access::NONE).is_err());
        assert_eq!(
            t.invalidate_window(other, key, true),
            Err(MwError::Owner),
            "from a peer, only through its QP"
        );
        assert_eq!(t.bound_windows(k.lkey), 1);
        assert!(t.deregister(k.lkey).is_none(), "bound: the region stays");
        assert_eq!(t.invalidate_window(qp, key, true), Ok(()));
        assert_eq!(t.invalidate_window(qp, key, true), Err(MwError::State));
        assert_eq!(
            t.check_remote(qp, key, 0x1010, 16, Access::REMOTE_WRITE),
            Err(AccessError::UnknownKey)
        );
        assert!(t.deregister(k.lkey).is_some());
    }

    /// A memory whose `len` promises more than its slices hold.
    struct Liar(Vec<u8>);
    impl RegionMemory for Liar {
        fn len(&self) -> usize {
            1000
        }
        fn as_slice(&self) -> &[u8] {
            &self.0
        }
        fn as_mut_slice(&mut self) -> &mut [u8] {
            &mut self.0
        }
    }

    #[test]
    fn a_lying_region_memory_gets_errors_not_panics() {
        let mut t = MrTable::new();
        let k = t
            .register(Box::new(Liar(vec![0; 10])), 0, Access::ALL)
            .unwrap();
        assert_eq!(
            t.write(0, k.rkey, 500, &[1; 8], Access::REMOTE_WRITE),
            Err(AccessError::OutOfBounds)
        );
        assert!(t.slice(0, k.lkey, 0, 10, Access::NONE).is_ok());
        assert_eq!(
            t.atomic(0, k.rkey, 16, None, 1),
            Err(AccessError::OutOfBounds)
        );
    }
}

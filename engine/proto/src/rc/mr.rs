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

use super::random::{KeyPermutation, NumberMap, Seed};

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

    /// Every right in `other` is also in `self`.
    pub const fn contains(self, other: Access) -> bool {
        self.0 & other.0 == other.0
    }

    /// Raw bits.
    pub const fn bits(self) -> u8 {
        self.0
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
}

/// The memory regions of one endpoint.
pub struct MrTable {
    slots: Vec<Option<Region>>,
    free: Vec<u32>,
    /// Both keys of every region -> its slot: O(1) on the hot path.
    by_key: NumberMap<u32>,
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
            // (`register_at`) can be in use already.
            if k != 0 && !self.by_key.contains_key(&k) {
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
            || self.by_key.len() / 2 >= MAX_REGIONS
        {
            return None;
        }
        self.occupy(0, memory, iova, access, keys);
        Some(keys)
    }

    /// Deregister the region whose L_Key is `lkey` and hand its memory
    /// back. Both its keys are unknown from then on, and never come back
    /// (see [`MrKeys`]).
    pub fn deregister(&mut self, lkey: u32) -> Option<Box<dyn RegionMemory>> {
        let index = *self.by_key.get(&lkey)?;
        let slot = self.slots.get_mut(index as usize)?;
        if slot.as_ref().is_none_or(|r| r.keys.lkey != lkey) {
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

    #[inline]
    fn region(&self, key: u32, need: Access, pd: Option<u32>) -> Result<&Region, AccessError> {
        self.lookup(key, need, pd)
            .and_then(|i| self.slots[i].as_ref())
            .ok_or(AccessError::UnknownKey)
    }

    #[inline]
    fn region_mut(
        &mut self,
        key: u32,
        need: Access,
        pd: Option<u32>,
    ) -> Result<&mut Region, AccessError> {
        match self.lookup(key, need, pd) {
            Some(i) => self.slots[i].as_mut().ok_or(AccessError::UnknownKey),
            None => Err(AccessError::UnknownKey),
        }
    }

    /// Check that the region of `key` is in protection domain `pd` (the
    /// PD of the QP the access comes through), that `[addr, addr + len)`
    /// lies inside it and that it grants `need`; return the byte offset of
    /// `addr`.
    #[inline]
    pub fn check(
        &self,
        pd: u32,
        key: u32,
        addr: u64,
        len: u64,
        need: Access,
    ) -> Result<usize, AccessError> {
        let r = self.region(key, need, Some(pd))?;
        Self::check_region(r, addr, len, need)
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
        let r = self.region(key, need, None)?;
        Self::check_region(r, addr, len, need)
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
        self.bytes(key, addr, len, need, None)
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
    ) -> Result<&[u8], AccessError> {
        let r = self.region(key, need, pd)?;
        let off = Self::check_region(r, addr, len as u64, need)?;
        r.memory
            .as_slice()
            .get(off..off + len)
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
    ) -> Result<&mut [u8], AccessError> {
        let r = self.region_mut(key, need, pd)?;
        let off = Self::check_region(r, addr, len as u64, need)?;
        r.memory
            .as_mut_slice()
            .get_mut(off..off + len)
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
        self.bytes(key, addr, len, need, Some(pd))
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
        self.bytes_mut(key, addr, len, need, Some(pd))
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
        self.bytes_mut(key, addr, data.len(), need, Some(pd))?
            .copy_from_slice(data);
        Ok(())
    }

    /// The application's own view of its region (`mr_slice`): the bytes
    /// `[addr, addr + len)` of the region of L_Key `key`, in whatever PD it
    /// is (local read: always allowed).
    pub fn slice_any_pd(&self, key: u32, addr: u64, len: usize) -> Result<&[u8], AccessError> {
        self.bytes(key, addr, len, Access::NONE, None)
    }

    /// The application's own write into its region (`mr_write`): copy
    /// `data` at `addr` of the region of L_Key `key`, in whatever PD it
    /// is (no right needed).
    pub fn write_any_pd(&mut self, key: u32, addr: u64, data: &[u8]) -> Result<(), AccessError> {
        self.bytes_mut(key, addr, data.len(), Access::NONE, None)?
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
        if !addr.is_multiple_of(8) {
            // Checked after the key so an unknown key reports UnknownKey.
            self.region(key, Access::REMOTE_ATOMIC, Some(pd))?;
            return Err(AccessError::Misaligned);
        }
        let bytes = self.slice_mut(pd, key, addr, 8, Access::REMOTE_ATOMIC)?;
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
}

#[cfg(test)]
mod tests {
    use super::*;

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

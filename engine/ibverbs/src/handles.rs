//! The objects the drop-in handed to the program, by address: what the
//! kernel's object table (uverbs' IDR) is to rdma-core. Every exported verb
//! turns the program's pointer back into its object through [`get`], which
//! refuses NULL, a pointer it never handed out, one already destroyed and
//! one of another kind, with `EINVAL` (what uverbs answers for an unknown
//! handle) instead of reading it.
//!
//! Each object type starts with the `verbs.h` structure the program sees,
//! in an `UnsafeCell` (the program and the drop-in both write fields of
//! it), at a fixed offset from the object's start ([`Object::PUBLIC`]).

use std::collections::HashMap;
use std::ffi::c_int;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::{LazyLock, PoisonError, RwLock};

/// What an address in the table holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Context,
    Pd,
    Mr,
    Channel,
    Cq,
    Qp,
    Mw,
    Ah,
    Srq,
}

/// A type whose boxes are handed to the program.
///
/// # Safety
/// `PUBLIC` must be the offset of the `verbs.h` structure the program's
/// pointer points at, inside `Self`.
pub unsafe trait Object: Sized + Send + Sync {
    const KIND: Kind;
    const PUBLIC: usize;
}

/// Hashes an address: the multiplicative hash of its bits (addresses of
/// boxes are distinct and 8-aligned; SipHash's resistance is not needed).
#[derive(Default)]
struct AddressHasher(u64);

impl Hasher for AddressHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
        }
    }
    fn write_usize(&mut self, n: usize) {
        self.0 = (n as u64 >> 3).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

type Table = HashMap<usize, Kind, BuildHasherDefault<AddressHasher>>;

static LIVE: LazyLock<RwLock<Table>> = LazyLock::new(|| RwLock::new(Table::default()));

/// Hands `obj` to the program: the address of its public structure.
pub fn publish<T: Object, P>(obj: Box<T>) -> *mut P {
    let p = Box::into_raw(obj) as usize;
    LIVE.write()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(p, T::KIND);
    (p + T::PUBLIC) as *mut P
}

/// The live object of kind `T` whose public structure is at `public`.
///
/// # Safety
/// The program must not destroy the object while the reference lives
/// (the verbs contract: no verb on an object after, or concurrently with,
/// its destruction).
pub unsafe fn get<'a, T: Object, P>(public: *const P) -> Result<&'a T, c_int> {
    let p = (public as usize).wrapping_sub(T::PUBLIC);
    if public.is_null() {
        return Err(libc::EINVAL);
    }
    match LIVE.read().unwrap_or_else(PoisonError::into_inner).get(&p) {
        // SAFETY: the table holds `p` only between `publish`, which made it
        // from a `Box<T>` of this kind, and `retire`; the caller keeps it
        // alive for 'a.
        Some(&k) if k == T::KIND => Ok(unsafe { &*(p as *const T) }),
        _ => Err(libc::EINVAL),
    }
}

/// Takes the object back from the program (its destroy verb succeeded).
///
/// # Safety
/// No reference from [`get`] to it may be used afterwards (the program
/// called the destroy verb, so it uses the object no more).
pub unsafe fn retire<T: Object, P>(public: *const P) -> Result<Box<T>, c_int> {
    let p = (public as usize).wrapping_sub(T::PUBLIC);
    let mut live = LIVE.write().unwrap_or_else(PoisonError::into_inner);
    match live.get(&p) {
        Some(&k) if k == T::KIND => {
            live.remove(&p);
            // SAFETY: made by `Box::into_raw` in `publish` for this kind,
            // and out of the table now: nobody else takes it back.
            Ok(unsafe { Box::from_raw(p as *mut T) })
        }
        _ => Err(libc::EINVAL),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::UnsafeCell;

    #[repr(C)]
    struct Thing {
        header: u64,
        public: UnsafeCell<u32>,
    }
    // SAFETY: the test touches it from one thread.
    unsafe impl Sync for Thing {}
    // SAFETY: `public` sits at offset 8 (repr(C), after a u64).
    unsafe impl Object for Thing {
        const KIND: Kind = Kind::Cq;
        const PUBLIC: usize = 8;
    }

    #[repr(C)]
    struct Other(u64);
    // SAFETY: the public structure is the whole object.
    unsafe impl Object for Other {
        const KIND: Kind = Kind::Qp;
        const PUBLIC: usize = 0;
    }

    #[test]
    fn refuses_null_unknown_retired_and_other_kinds() {
        let p: *mut u32 = publish(Box::new(Thing {
            header: 7,
            public: UnsafeCell::new(3),
        }));
        // SAFETY (whole test): the objects are alive until retired, and
        // retired ones are only looked up, never read.
        unsafe {
            assert_eq!(get::<Thing, _>(p).unwrap().header, 7);
            assert_eq!(
                get::<Thing, u32>(std::ptr::null()).err(),
                Some(libc::EINVAL)
            );
            let local = 5u32;
            assert_eq!(get::<Thing, _>(&local).err(), Some(libc::EINVAL));
            assert_eq!(get::<Other, _>(p).err(), Some(libc::EINVAL));
            let t = retire::<Thing, _>(p).unwrap();
            assert_eq!(*t.public.get(), 3);
            drop(t);
            assert_eq!(get::<Thing, _>(p).err(), Some(libc::EINVAL));
            assert_eq!(retire::<Thing, _>(p).err(), Some(libc::EINVAL));
            let o: *mut Other = publish(Box::new(Other(1)));
            assert_eq!(get::<Other, _>(o).unwrap().0, 1);
            drop(retire::<Other, _>(o).unwrap());
        }
    }
}

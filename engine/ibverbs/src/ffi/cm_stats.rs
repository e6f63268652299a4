//! The drop-in librdmacm's other private entry points (version node
//! `ROCE_XDP_PRIVATE_1`):
//! - `roce_xdp_set_cm_counters`: it hands us a function that reads its CM
//!   agent's counters, and the stats channel (`roce-xdp stats`) shows them
//!   under `cm` beside the engine's (docs/rdma-cm-drop-in.md). The agent
//!   lives in librdmacm.so.1, the stats channel here.
//! - `roce_xdp_share_cm`: attached to a shared engine (`roce-xdp service`,
//!   docs/shared-engine.md), the service hands each process the MADs for
//!   it: REQs for the service IDs it listens on, answers by the top byte of
//!   the communication IDs its agent draws. This tells librdmacm that byte
//!   and publishes its listeners.

use std::ffi::{c_char, CStr};
use std::sync::Mutex;

/// librdmacm's reader: writes up to `cap` counter names (static,
/// NUL-terminated) and values, returns how many it has.
pub type CmCountersFn = unsafe extern "C" fn(*mut *const c_char, *mut u64, usize) -> usize;

static READER: Mutex<Option<CmCountersFn>> = Mutex::new(None);

/// More than `CmCounters` has (22 today).
const MAX_COUNTERS: usize = 64;

/// `roce_xdp_set_cm_counters(read)`: registers (or, NULL, forgets) the
/// CM counters' reader. The reader is called from the stats server's
/// thread, never under the engine's lock.
#[no_mangle]
unsafe extern "C" fn roce_xdp_set_cm_counters(read: Option<CmCountersFn>) {
    *READER.lock().unwrap_or_else(|e| e.into_inner()) = read;
}

/// The CM's counters, `None` when no librdmacm registered.
pub fn cm_counters() -> Option<Vec<(String, u64)>> {
    let read = (*READER.lock().unwrap_or_else(|e| e.into_inner()))?;
    let mut names = [std::ptr::null::<c_char>(); MAX_COUNTERS];
    let mut values = [0u64; MAX_COUNTERS];
    // SAFETY: the registered reader's contract: it writes at most
    // MAX_COUNTERS entries into the two arrays.
    let n = unsafe { read(names.as_mut_ptr(), values.as_mut_ptr(), MAX_COUNTERS) };
    let n = n.min(MAX_COUNTERS);
    Some(
        names[..n]
            .iter()
            .zip(&values[..n])
            .filter(|(p, _)| !p.is_null())
            // SAFETY: non-NULL names are the reader's static C strings.
            .map(|(&p, &v)| {
                (
                    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned(),
                    v,
                )
            })
            .collect(),
    )
}

/// `roce_xdp_share_cm(ids, n)`: publishes the `n` service IDs at `ids`
/// that the CM agent listens on to the service this process is attached
/// to, and returns the top byte its communication IDs must have (1..=255);
/// 0 when the engine runs in this process (nothing to share, `ids`
/// unread); -1 with errno ENODEV when no engine is open, EINVAL for a NULL
/// `ids` with `n` > 0.
#[no_mangle]
unsafe extern "C" fn roce_xdp_share_cm(ids: *const u64, n: usize) -> std::ffi::c_int {
    let Ok(shell) = super::engine() else {
        super::set_errno(libc::ENODEV);
        return -1;
    };
    let ids: &[u64] = match (ids.is_null(), n) {
        (_, 0) => &[],
        (true, _) => {
            super::set_errno(libc::EINVAL);
            return -1;
        }
        // SAFETY: the caller's contract: `ids` points to `n` u64s.
        (false, n) => unsafe { std::slice::from_raw_parts(ids, n) },
    };
    std::ffi::c_int::from(shell.share_cm(ids))
}

//! The drop-in librdmacm's second private entry point (version node
//! `ROCE_XDP_PRIVATE_1`): it hands us a function that reads its CM
//! agent's counters, and the stats channel (`roce-xdp stats`) shows them
//! under `cm` beside the engine's (docs/rdma-cm-drop-in.md). The agent
//! lives in librdmacm.so.1, the stats channel here.

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

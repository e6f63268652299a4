//! Measurement threads: each side of a measurement runs on its own thread
//! that first enters its side's network namespace (`setns`), so sockets,
//! interface lookups and XDP attachments happen there.

use std::thread::JoinHandle;

use engine::testbed::netns::Side;

use crate::error::HarnessError;

/// Runs `f` on a new thread inside `side`'s network namespace.
pub fn spawn_in<T, F>(side: &Side, f: F) -> JoinHandle<Result<T, HarnessError>>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, HarnessError> + Send + 'static,
{
    let side = side.clone();
    std::thread::spawn(move || {
        side.enter()?;
        f()
    })
}

/// Joins a measurement thread, turning a panic into an error.
pub fn join<T>(h: JoinHandle<Result<T, HarnessError>>) -> Result<T, HarnessError> {
    h.join().map_err(|p| {
        HarnessError::Panicked(
            p.downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default(),
        )
    })?
}

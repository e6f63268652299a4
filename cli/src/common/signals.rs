//! Ctrl-C and SIGTERM for commands that stop cleanly.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use anyhow::Context as _;

/// A flag raised by SIGINT / SIGTERM, so a run stops, detaches and
/// finishes its output; a second signal ends the process at once (exit
/// 130).
pub fn stop_flag() -> anyhow::Result<Arc<AtomicBool>> {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register_conditional_shutdown(sig, 130, stop.clone())
            .context("installing the signal handler")?;
        signal_hook::flag::register(sig, stop.clone()).context("installing the signal handler")?;
    }
    Ok(stop)
}

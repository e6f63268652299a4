//! Logging with `tracing`: `--log-level` (a level or a filter directive)
//! wins over `RUST_LOG`; without either only warnings and errors are
//! printed, to stderr, so the tools' stdout stays a clean table or JSON.

use tracing_subscriber::EnvFilter;

use crate::errors::UserError;

/// Installs the global subscriber.
pub fn init(level: Option<&str>) -> anyhow::Result<()> {
    let filter = match level {
        Some(l) => EnvFilter::try_new(l).map_err(|e| {
            UserError::Usage(format!(
                "--log-level {l:?} is not a level (error, warn, info, debug, trace) or filter: {e}"
            ))
        })?,
        None => EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn")),
    };
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(true)
        .try_init()
        .map_err(|e| anyhow::anyhow!("installing the logger: {e}"))?;
    Ok(())
}

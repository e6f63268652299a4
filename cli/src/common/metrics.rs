//! `--metrics ADDR:PORT`: the stats snapshot over HTTP for Prometheus
//! (engine::stats::MetricsServer answering `GET /metrics`; the metrics are
//! listed in docs/usage.md). `serve` starts it with its datapath's
//! snapshot ([`crate::common::datapath::Datapath::snapshot_source`]); a
//! command with another snapshot (a shared engine's service) calls
//! [`start`] with its own.

use std::net::SocketAddr;

use engine::stats::{MetricsServer, Snapshot};

use crate::errors::UserError;

/// The value of `--metrics`: an IP address and a port, `127.0.0.1:9464`
/// or `[::1]:9464` (port 0: any free port).
pub fn parse_addr(s: &str) -> Result<SocketAddr, String> {
    s.parse().map_err(|_| {
        format!("{s:?} is not ADDR:PORT (e.g. 127.0.0.1:9464, [::1]:9464, 0.0.0.0:9464)")
    })
}

/// Serves `source()`'s snapshot on `http://ADDR/metrics` until the
/// returned server is dropped; a port already taken or an address not
/// on this host is the user's to fix.
pub fn start(
    addr: SocketAddr,
    source: impl Fn() -> Snapshot + Send + Sync + 'static,
) -> anyhow::Result<MetricsServer> {
    MetricsServer::start(addr, source).map_err(|e| {
        UserError::Usage(format!(
            "--metrics {addr}: cannot listen there ({e}): pick a free port on an address of this host"
        ))
        .into()
    })
}

/// The URL a server answers on (its bound port, when asked for port 0).
pub fn url(server: &MetricsServer) -> String {
    format!(
        "http://{}{}",
        server.local_addr(),
        engine::stats::METRICS_PATH
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses() {
        assert_eq!(
            parse_addr("127.0.0.1:9464").unwrap(),
            "127.0.0.1:9464".parse::<SocketAddr>().unwrap()
        );
        assert!(parse_addr("[::1]:0").is_ok());
        assert!(parse_addr("9464").unwrap_err().contains("not ADDR:PORT"));
        assert!(parse_addr("localhost:9464").is_err());
    }
}

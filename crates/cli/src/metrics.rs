//! `--metrics-listen ADDR`: the Prometheus metrics on a listener of their own, without
//! credentials (for `up`, `server` and the device daemon).

use std::net::SocketAddr;

use anyhow::Result;

/// Binds `addr` (None: metrics are not served on a listener of their own). An address
/// off this machine is allowed with a warning: whoever reaches it reads the metrics.
pub async fn bind(addr: Option<SocketAddr>) -> Result<Option<tokio::net::TcpListener>> {
    let Some(addr) = addr else { return Ok(None) };
    let listener = tokio::net::TcpListener::bind(addr).await.map_err(|e| {
        let hint = if e.kind() == std::io::ErrorKind::AddrInUse { " (another program uses it: choose another port)" } else { "" };
        anyhow::anyhow!("--metrics-listen: cannot listen on {addr}: {e}{hint}")
    })?;
    if !addr.ip().is_loopback() {
        tracing::warn!(
            "--metrics-listen {addr} is not a loopback address: anyone who can reach it can read the metrics, without credentials"
        );
        eprintln!("drover: warning: --metrics-listen {addr} is not a loopback address: anyone who can reach it can read the metrics");
    }
    Ok(Some(listener))
}

/// Runs `serve` in the background, logging why it stopped if it does.
pub fn spawn<F>(what: &'static str, serve: F)
where
    F: std::future::Future<Output = std::io::Result<()>> + Send + 'static,
{
    tokio::spawn(async move {
        if let Err(e) = serve.await {
            tracing::error!("serving the {what} metrics stopped: {e}");
        }
    });
}

/// The address a listener got, to print (`--metrics-listen 127.0.0.1:0` picks a port).
pub fn describe(listener: &tokio::net::TcpListener) -> String {
    listener.local_addr().map(|a| format!("http://{a}/metrics")).unwrap_or_else(|_| "?".into())
}

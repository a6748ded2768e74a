//! The device daemon's Prometheus metrics (`drover device --metrics-listen ADDR`): shims
//! it is linked to, output it forwarded, how often its link to the server was tried
//! again, and runs whose sandbox could not be set up. Each is an atomic to record; no
//! label is a session id.

use std::sync::Arc;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Registry, Unit};

/// Where setting up a run's sandbox failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SandboxFailure {
    /// Its task's worktree (checkout, skills) could not be prepared.
    Worktree,
    /// Its confinement could not be set up (or this device cannot confine runs).
    Confinement,
}

impl SandboxFailure {
    const ALL: [SandboxFailure; 2] = [SandboxFailure::Worktree, SandboxFailure::Confinement];

    fn as_str(self) -> &'static str {
        match self {
            SandboxFailure::Worktree => "worktree",
            SandboxFailure::Confinement => "confinement",
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StageLabel {
    stage: &'static str,
}

/// The device daemon's series; cheap to clone (every clone records into the same).
#[derive(Clone, Default)]
pub struct DeviceMetrics {
    shims: Gauge,
    forwarded: Counter,
    reconnects: Counter,
    link_up: Gauge,
    sandbox_failures: Family<StageLabel, Counter>,
}

impl std::fmt::Debug for DeviceMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceMetrics").field("shims", &self.shims.get()).field("forwarded", &self.forwarded.get()).finish()
    }
}

impl DeviceMetrics {
    /// A registry holding these series (every bounded label value at 0 from the start).
    pub fn registry(&self) -> Registry {
        for s in SandboxFailure::ALL {
            let _ = self.sandbox_failures.get_or_create(&StageLabel { stage: s.as_str() });
        }
        let mut r = Registry::default();
        r.register("drover_device_shims", "Session shims this daemon is linked to", self.shims.clone());
        r.register_with_unit("drover_device_forwarded", "Terminal output forwarded to the server", Unit::Bytes, self.forwarded.clone());
        r.register("drover_device_link_reconnects", "Times the link to the server was tried again", self.reconnects.clone());
        r.register("drover_device_link_up", "Whether the link to the server is up (1) or not (0)", self.link_up.clone());
        r.register(
            "drover_device_sandbox_failures",
            "Runs refused because their sandbox could not be set up, by stage",
            self.sandbox_failures.clone(),
        );
        r
    }

    /// `bytes` of output were forwarded.
    pub(crate) fn forwarded(&self, bytes: usize) {
        self.forwarded.inc_by(bytes as u64);
    }

    /// The link is tried again (after it dropped or a try failed).
    pub(crate) fn reconnecting(&self) {
        self.reconnects.inc();
    }

    /// The link came up (true) or went down.
    pub(crate) fn link(&self, up: bool) {
        self.link_up.set(i64::from(up));
    }

    /// A run's sandbox could not be set up.
    pub(crate) fn sandbox_failed(&self, stage: SandboxFailure) {
        self.sandbox_failures.get_or_create(&StageLabel { stage: stage.as_str() }).inc();
    }

    /// Counts a shim link until the guard is dropped.
    pub(crate) fn shim(&self) -> ShimGuard {
        self.shims.inc();
        ShimGuard(self.shims.clone())
    }
}

/// A shim link, counted in `drover_device_shims` while it lives.
pub(crate) struct ShimGuard(Gauge);

impl Drop for ShimGuard {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// Serves `/metrics` without credentials on `listener` until the process ends:
/// OpenMetrics when the scraper asks for it, else Prometheus' text format. `process`
/// gives, on every scrape, what the process as a whole holds now (its memory).
pub async fn serve(metrics: DeviceMetrics, listener: tokio::net::TcpListener, process: fn() -> Registry) -> std::io::Result<()> {
    use axum::http::{header, HeaderMap, StatusCode};
    let registry = Arc::new(metrics.registry());
    let scrape = move |headers: HeaderMap| {
        let registry = registry.clone();
        async move {
            let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()).unwrap_or("");
            let (content_type, body) = encode(&[&registry, &process()], accept);
            ([(header::CONTENT_TYPE, content_type)], body)
        }
    };
    let app = axum::Router::new()
        .route("/metrics", axum::routing::get(scrape))
        .fallback(|| async { (StatusCode::NOT_FOUND, "only /metrics is served here\n") });
    axum::serve(listener, app).await
}

/// `registries` as OpenMetrics text when `accept` asks for it, else Prometheus text 0.0.4.
fn encode(registries: &[&Registry], accept: &str) -> (&'static str, String) {
    use prometheus_client::encoding::{prometheus_text, text};
    let mut body = String::new();
    if accept.contains("application/openmetrics-text") {
        for r in registries {
            text::encode_registry(&mut body, r).expect("writing to a String");
        }
        text::encode_eof(&mut body).expect("writing to a String");
        return ("application/openmetrics-text; version=1.0.0; charset=utf-8", body);
    }
    for r in registries {
        prometheus_text::encode(&mut body, r).expect("writing to a String");
    }
    (prometheus_text::CONTENT_TYPE, body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_series_are_named_in_base_units_and_move() {
        let m = DeviceMetrics::default();
        let registry = m.registry();
        let guard = m.shim();
        m.forwarded(10);
        m.reconnecting();
        m.sandbox_failed(SandboxFailure::Confinement);
        let t = encode(&[&registry], "").1;
        for line in [
            "drover_device_shims 1",
            "drover_device_forwarded_bytes_total 10",
            "drover_device_link_reconnects_total 1",
            "drover_device_link_up 0",
            "drover_device_sandbox_failures_total{stage=\"confinement\"} 1",
            "drover_device_sandbox_failures_total{stage=\"worktree\"} 0",
        ] {
            assert!(t.lines().any(|l| l == line), "no line `{line}` in:\n{t}");
        }
        drop(guard);
        assert!(encode(&[&registry], "").1.lines().any(|l| l == "drover_device_shims 0"));
        assert!(encode(&[&registry, &Registry::default()], "application/openmetrics-text").1.trim_end().ends_with("# EOF"));
    }
}

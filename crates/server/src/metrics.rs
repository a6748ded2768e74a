//! The server's Prometheus metrics, served at `GET /metrics` (an owner's or admin's
//! personal token) and, with `--metrics-listen`, on a listener of their own.
//!
//! Two kinds: what this process counts as it goes (sessions ended, output stored,
//! webhook attempts, sign-in failures, spend, HTTP requests: counters and histograms
//! held in [`Metrics`], each a few atomics to record), and what the database or the
//! process knows now (live sessions per device, waiting runs and people, devices,
//! viewers, leases), read at scrape time into a registry of its own, so gauges the
//! database holds read the same on every replica. No label is ever an id: labels are
//! outcomes, device and agent names, models, route templates and fixed words.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{MatchedPath, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use drover_core::permissions::{workspace_allowed, WorkspaceAction};
use drover_core::Outcome;
use drover_store::Principal;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::{Registry, Unit};

use crate::auth::{Caller, Credential};
use crate::leases::Monitor;
use crate::{ApiError, AppState};

/// The `route` label of a request no route matched (the web app's pages, unknown paths):
/// the raw path never becomes a label.
pub const UNMATCHED: &str = "unmatched";

/// Distinct (agent, model) pairs spend is kept apart for; more are counted as model
/// `other` (models are what harnesses report, so a hostile device could make up many).
const MAX_SPEND_SERIES: usize = 200;

/// A label of one word.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabel {
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabel {
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabel {
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabel {
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SpendLabels {
    agent: String,
    model: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HttpLabels {
    route: String,
    method: &'static str,
    status: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DeviceLabel {
    device: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StructureLabel {
    structure: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HeapLabel {
    state: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct MonitorLabel {
    monitor: &'static str,
}

/// A kind of WebSocket the server holds open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Socket {
    /// A device's link.
    Device,
    /// A viewer's terminal.
    Viewer,
}

impl Socket {
    const ALL: [Socket; 2] = [Socket::Device, Socket::Viewer];

    fn as_str(self) -> &'static str {
        match self {
            Socket::Device => "device",
            Socket::Viewer => "viewer",
        }
    }
}

/// How a webhook delivery attempt went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WebhookResult {
    /// The receiver took it (2xx).
    Delivered,
    /// It failed and is tried again later.
    Retrying,
    /// It failed for the last time.
    Failed,
    /// The receiver answered 410: its endpoint is disabled.
    Gone,
}

impl WebhookResult {
    const ALL: [WebhookResult; 4] = [WebhookResult::Delivered, WebhookResult::Retrying, WebhookResult::Failed, WebhookResult::Gone];

    fn as_str(self) -> &'static str {
        match self {
            WebhookResult::Delivered => "delivered",
            WebhookResult::Retrying => "retrying",
            WebhookResult::Failed => "failed",
            WebhookResult::Gone => "gone",
        }
    }
}

/// Why a sign-in failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignInFailure {
    /// A wrong name or password.
    WrongPassword,
    /// Refused for too many attempts (any way of signing in: password, invitation,
    /// enrollment).
    RateLimited,
}

impl SignInFailure {
    const ALL: [SignInFailure; 2] = [SignInFailure::WrongPassword, SignInFailure::RateLimited];

    fn as_str(self) -> &'static str {
        match self {
            SignInFailure::WrongPassword => "wrong_password",
            SignInFailure::RateLimited => "rate_limited",
        }
    }
}

/// What the output writer records (`crate::writer`): handles on [`Metrics`]' series, or
/// on series of their own in tests.
#[derive(Clone)]
pub(crate) struct OutputMetrics {
    /// Bytes of output stored.
    pub bytes: Counter,
    /// Transactions that stored output.
    pub commits: Counter,
    /// How long each such transaction took.
    pub commit_seconds: Histogram,
    /// Bytes each stored.
    pub commit_bytes: Histogram,
    /// Bytes queued to the writer and not yet stored (or dropped).
    pub backlog: Gauge,
}

impl OutputMetrics {
    /// Series registered nowhere.
    pub(crate) fn new() -> OutputMetrics {
        OutputMetrics {
            bytes: Counter::default(),
            commits: Counter::default(),
            commit_seconds: Histogram::new(exponential_buckets(0.0005, 2.0, 16)),
            commit_bytes: Histogram::new(exponential_buckets(256.0, 4.0, 10)),
            backlog: Gauge::default(),
        }
    }

    /// Records a commit of `bytes` that took `took`.
    pub(crate) fn committed(&self, bytes: usize, took: Duration) {
        self.bytes.inc_by(bytes as u64);
        self.commits.inc();
        self.commit_seconds.observe(took.as_secs_f64());
        self.commit_bytes.observe(bytes as f64);
    }
}

/// The HTTP latency histogram's buckets, in seconds.
fn http_histogram() -> Histogram {
    Histogram::new([0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0])
}

/// The server's own series (see the module's documentation); one per process, in
/// [`AppState`].
pub struct Metrics {
    registry: Registry,
    sessions_ended: Family<OutcomeLabel, Counter>,
    pub(crate) output: OutputMetrics,
    sockets: Family<KindLabel, Gauge>,
    webhooks: Family<ResultLabel, Counter>,
    sign_in_failures: Family<ReasonLabel, Counter>,
    spend: Family<SpendLabels, Counter<f64, std::sync::atomic::AtomicU64>>,
    /// Distinct spend series made (see [`MAX_SPEND_SERIES`]).
    spend_series: AtomicUsize,
    http: Family<HttpLabels, Histogram, fn() -> Histogram>,
    /// More registries served with these (`drover up`'s local device's).
    extra: Mutex<Vec<Registry>>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// Every series, registered and at zero.
    pub fn new() -> Metrics {
        let mut m = Metrics {
            registry: Registry::default(),
            sessions_ended: Family::default(),
            output: OutputMetrics::new(),
            sockets: Family::default(),
            webhooks: Family::default(),
            sign_in_failures: Family::default(),
            spend: Family::default(),
            spend_series: AtomicUsize::new(0),
            http: Family::new_with_constructor(http_histogram as fn() -> Histogram),
            extra: Mutex::default(),
        };
        // Every bounded label value shows from the start, at 0: a rate over a series
        // that appears only at its first event misses that event.
        for o in Outcome::ALL.into_iter().filter(|o| !o.is_live()) {
            let _ = m.sessions_ended.get_or_create(&OutcomeLabel { outcome: o.as_str() });
        }
        for s in Socket::ALL {
            let _ = m.sockets.get_or_create(&KindLabel { kind: s.as_str() });
        }
        for r in WebhookResult::ALL {
            let _ = m.webhooks.get_or_create(&ResultLabel { result: r.as_str() });
        }
        for r in SignInFailure::ALL {
            let _ = m.sign_in_failures.get_or_create(&ReasonLabel { reason: r.as_str() });
        }
        m.register();
        m
    }

    fn register(&mut self) {
        let r = &mut self.registry;
        r.register("drover_sessions_ended", "Sessions ended, by outcome", self.sessions_ended.clone());
        r.register_with_unit("drover_output", "Terminal output stored", Unit::Bytes, self.output.bytes.clone());
        r.register("drover_output_commits", "Transactions that stored output (group commits)", self.output.commits.clone());
        let o = &self.output;
        r.register_with_unit(
            "drover_output_commit_duration",
            "How long a group commit of output took",
            Unit::Seconds,
            o.commit_seconds.clone(),
        );
        r.register_with_unit("drover_output_commit_size", "Output stored by one group commit", Unit::Bytes, o.commit_bytes.clone());
        r.register_with_unit("drover_output_backlog", "Output queued to the writer and not yet stored", Unit::Bytes, o.backlog.clone());
        r.register("drover_websocket_links", "WebSockets open on this server, by kind", self.sockets.clone());
        r.register("drover_webhook_deliveries", "Webhook delivery attempts, by result", self.webhooks.clone());
        r.register("drover_sign_in_failures", "Sign-ins refused, by reason", self.sign_in_failures.clone());
        r.register("drover_spend_usd", "What priced model responses cost, in US dollars, by agent and model", self.spend.clone());
        r.register_with_unit(
            "drover_http_request_duration",
            "HTTP requests, by route template, method and status class",
            Unit::Seconds,
            self.http.clone(),
        );
    }

    /// Serves `registry` with these (its names must not clash with the server's).
    pub fn include(&self, registry: Registry) {
        self.extra.lock().expect("metrics lock").push(registry);
    }

    /// A session ended with `outcome`.
    pub(crate) fn session_ended(&self, outcome: Outcome) {
        self.sessions_ended.get_or_create(&OutcomeLabel { outcome: outcome.as_str() }).inc();
    }

    /// A webhook delivery attempt went `result`.
    pub(crate) fn webhook(&self, result: WebhookResult) {
        self.webhooks.get_or_create(&ResultLabel { result: result.as_str() }).inc();
    }

    /// A sign-in failed.
    pub(crate) fn sign_in_failed(&self, why: SignInFailure) {
        self.sign_in_failures.get_or_create(&ReasonLabel { reason: why.as_str() }).inc();
    }

    /// `nano` nano-dollars more were spent by `agent` (None: a task-free session) on
    /// `model`.
    pub(crate) fn spent(&self, agent: Option<&str>, model: &str, nano: u64) {
        if nano == 0 {
            return;
        }
        let mut labels = SpendLabels { agent: agent.unwrap_or("none").to_string(), model: model.to_string() };
        if self.spend.get(&labels).is_none() && self.spend_series.fetch_add(1, Ordering::Relaxed) >= MAX_SPEND_SERIES {
            labels.model = "other".into();
        }
        self.spend.get_or_create(&labels).inc_by(drover_core::spend::usd(nano));
    }

    /// Counts an open WebSocket of `kind` until the guard is dropped.
    pub(crate) fn socket(self: &Arc<Self>, kind: Socket) -> SocketGuard {
        self.sockets.get_or_create(&KindLabel { kind: kind.as_str() }).inc();
        SocketGuard { metrics: self.clone(), kind }
    }

    fn request(&self, route: String, method: &axum::http::Method, status: StatusCode, took: Duration) {
        let labels = HttpLabels { route, method: method_label(method), status: status_class(status) };
        self.http.get_or_create(&labels).observe(took.as_secs_f64());
    }
}

/// What each model cost between the run's `previous` usage report (JSON; None: its
/// first) and `usage` (reports are running totals), in nano-dollars.
pub(crate) fn spent_since<'a>(previous: Option<&str>, usage: &'a drover_protocol::device::UsageReport) -> Vec<(&'a str, u64)> {
    let before: Option<drover_protocol::device::UsageReport> = previous.and_then(|j| serde_json::from_str(j).ok());
    let was = |model: &str| before.as_ref().and_then(|b| b.models.iter().find(|p| p.model == model)).map_or(0, |p| p.cost.total());
    usage.models.iter().map(|m| (m.model.as_str(), m.cost.total().saturating_sub(was(&m.model)))).filter(|(_, n)| *n > 0).collect()
}

/// An open WebSocket, counted in `drover_websocket_links` while it lives.
pub(crate) struct SocketGuard {
    metrics: Arc<Metrics>,
    kind: Socket,
}

impl Drop for SocketGuard {
    fn drop(&mut self) {
        self.metrics.sockets.get_or_create(&KindLabel { kind: self.kind.as_str() }).dec();
    }
}

/// A request's method as a label: the standard ones, else `other`.
fn method_label(m: &axum::http::Method) -> &'static str {
    use axum::http::Method;
    match *m {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        _ => "other",
    }
}

/// `2xx`, `4xx`, …
fn status_class(s: StatusCode) -> &'static str {
    match s.as_u16() {
        100..=199 => "1xx",
        200..=299 => "2xx",
        300..=399 => "3xx",
        400..=499 => "4xx",
        _ => "5xx",
    }
}

/// Middleware: times every request under its route's template (`/api/v1/sessions/{id}`),
/// or [`UNMATCHED`].
pub(crate) async fn track_http(State(state): State<AppState>, req: Request, next: axum::middleware::Next) -> Response {
    let route = req.extensions().get::<MatchedPath>().map_or_else(|| UNMATCHED.to_string(), |p| p.as_str().to_string());
    let method = req.method().clone();
    let started = Instant::now();
    let resp = next.run(req).await;
    state.metrics.request(route, &method, resp.status(), started.elapsed());
    resp
}

/// `GET /metrics` on the main listener: for an owner's or admin's personal API token
/// (what Prometheus sends as `Authorization: Bearer …`).
pub async fn scrape(State(state): State<AppState>, caller: Caller, headers: HeaderMap) -> Result<Response, ApiError> {
    match &caller.0 {
        Principal::Member { role, .. } if workspace_allowed(*role, WorkspaceAction::Administer) => {}
        Principal::Member { .. } => return Err(ApiError::Forbidden("only an owner or admin can read the metrics".into())),
        _ => return Err(ApiError::Forbidden("the metrics are read with an owner's or admin's personal API token".into())),
    }
    if !matches!(caller.1, Credential::Token(_)) {
        return Err(ApiError::Forbidden(
            "the metrics are read with a personal API token (`drover token create prometheus`), not a browser sign-in".into(),
        ));
    }
    Ok(render(&state, &headers).await)
}

/// `GET /metrics` on `--metrics-listen`: no credentials (whoever reaches that address
/// reads them).
async fn open_scrape(State(state): State<AppState>, headers: HeaderMap) -> Response {
    render(&state, &headers).await
}

/// Serves `/metrics` without credentials on `listener` until the process ends.
pub async fn serve(state: AppState, listener: tokio::net::TcpListener) -> std::io::Result<()> {
    let app = axum::Router::new()
        .route("/metrics", axum::routing::get(open_scrape))
        .fallback(|| async { (StatusCode::NOT_FOUND, "only /metrics is served here\n") })
        .with_state(state);
    axum::serve(listener, app).await
}

/// The metrics as text: OpenMetrics when the scraper asks for it, else Prometheus' text
/// format (0.0.4).
async fn render(state: &AppState, headers: &HeaderMap) -> Response {
    let now = match now_registry(state).await {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!("reading metrics from the database: {e}");
            return ApiError::Internal(format!("reading the metrics from the database failed: {e}")).into_response();
        }
    };
    let extra = state.metrics.extra.lock().expect("metrics lock");
    let mut registries = vec![&state.metrics.registry, &now];
    registries.extend(extra.iter());
    let (content_type, body) = encode(&registries, headers);
    ([(header::CONTENT_TYPE, HeaderValue::from_static(content_type))], body).into_response()
}

/// `registries` in the format the `Accept` header asks for.
fn encode(registries: &[&Registry], headers: &HeaderMap) -> (&'static str, String) {
    use prometheus_client::encoding::{prometheus_text, text};
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()).unwrap_or("");
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

/// What the database and this process know now, as gauges.
async fn now_registry(state: &AppState) -> Result<Registry, drover_store::StoreError> {
    let ws = state.workspace;
    let (gauges, devices) = tokio::try_join!(state.store.gauges(ws), state.store.list_devices(ws))?;
    let mut r = Registry::default();
    let live: Family<DeviceLabel, Gauge> = Family::default();
    let silent_after = chrono::Duration::from_std(state.config.liveness.device_silent_after).unwrap_or(chrono::Duration::MAX);
    let now = chrono::Utc::now();
    let (mut connected, mut silent) = (0, 0);
    for d in devices.iter().filter(|d| d.revoked_at.is_none()) {
        live.get_or_create(&DeviceLabel { device: d.name.clone() }).set(i64::from(d.live_sessions));
        connected += i64::from(state.devices.is_connected(d.id));
        let contact = d.last_contact_at.as_deref().and_then(drover_store::parse_time);
        silent += i64::from(contact.is_none_or(|t| now - t >= silent_after));
    }
    r.register("drover_sessions_live", "Sessions starting or running, by device", live);
    r.register("drover_runs_waiting_for_slot", "Task stages waiting for a device slot", gauge(gauges.waiting_for_slot));
    r.register("drover_attention_waiting", "What waits on a person: open attention items and questions", gauge(gauges.attention_waiting));
    r.register("drover_webhook_queue_depth", "Webhook deliveries waiting to be delivered", gauge(gauges.webhook_queue));
    r.register("drover_devices_connected", "Devices linked to a server now", gauge(connected as u64));
    r.register("drover_devices_silent", "Devices not heard from for the silent window", gauge(silent as u64));
    r.register("drover_viewers", "Viewers attached to a terminal on this server", gauge(u64::from(state.hubs.viewers())));
    let leases: Family<MonitorLabel, Gauge> = Family::default();
    for m in Monitor::ALL {
        leases.get_or_create(&MonitorLabel { monitor: m.as_str() }).set(i64::from(state.leases.holds(m)));
    }
    r.register("drover_leases_held", "Background monitors this server runs (1) or leaves to another replica (0)", leases);
    register_memory(&mut r, state);
    Ok(r)
}

/// The live structures' counts, the resident memory and the heap (see [`crate::live`]).
fn register_memory(r: &mut Registry, state: &AppState) {
    let items: Family<StructureLabel, Gauge> = Family::default();
    for (structure, n) in crate::live::counts(state) {
        items.get_or_create(&StructureLabel { structure }).set(gauge_value(n));
    }
    r.register("drover_live_items", "What this server holds in memory now, by structure (items; bytes for *_bytes)", items);
    register_process(r);
    if let Some((in_use, _)) = drover_store::sqlite_memory() {
        r.register("drover_sqlite_memory_bytes", "SQLite's heap in this process: page caches, prepared statements, schemas", gauge(in_use));
    }
}

/// This process's memory now: its resident memory and its heap (in use, and held free
/// by the allocator). The server's scrape has them; so has a lone device daemon's
/// (`drover device --metrics-listen`), through [`process_registry`].
fn register_process(r: &mut Registry) {
    if let Some(rss) = crate::live::resident_bytes() {
        r.register("process_resident_memory_bytes", "Resident memory of this process", gauge(rss));
    }
    if let Some(h) = crate::live::heap() {
        let heap: Family<HeapLabel, Gauge> = Family::default();
        heap.get_or_create(&HeapLabel { state: "in_use" }).set(gauge_value(h.in_use));
        heap.get_or_create(&HeapLabel { state: "free" }).set(gauge_value(h.free));
        r.register("drover_heap_bytes", "The heap: bytes allocated and in use, and bytes the allocator holds resident beyond them", heap);
    }
}

/// A registry of this process's memory as it is now (resident memory, the heap): for a
/// process that is not a server, such as a lone device daemon, to serve beside its own.
pub fn process_registry() -> Registry {
    let mut r = Registry::default();
    register_process(&mut r);
    r
}

/// A gauge reading `v`.
fn gauge(v: u64) -> Gauge {
    let g = Gauge::default();
    g.set(gauge_value(v));
    g
}

/// `v` as a gauge holds it (saturating at `i64::MAX`).
fn gauge_value(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(m: &Metrics) -> String {
        encode(&[&m.registry], &HeaderMap::new()).1
    }

    #[test]
    fn names_follow_prometheus_conventions_and_bounded_labels_start_at_zero() {
        let m = Metrics::new();
        let t = text(&m);
        for line in [
            "drover_sessions_ended_total{outcome=\"completed\"} 0",
            "drover_output_bytes_total 0",
            "drover_output_commits_total 0",
            "drover_output_commit_duration_seconds_count 0",
            "drover_output_commit_size_bytes_count 0",
            "drover_output_backlog_bytes 0",
            "drover_websocket_links{kind=\"device\"} 0",
            "drover_webhook_deliveries_total{result=\"delivered\"} 0",
            "drover_sign_in_failures_total{reason=\"wrong_password\"} 0",
        ] {
            assert!(t.lines().any(|l| l == line), "no line `{line}` in:\n{t}");
        }
        assert!(!t.contains("outcome=\"running\""), "live outcomes never end a session");
    }

    #[test]
    fn spend_and_requests_are_labelled_by_name_and_template_only() {
        let m = Metrics::new();
        m.spent(Some("bot"), "claude-x", 1_500_000_000);
        m.spent(None, "gpt-y", 0);
        m.request("/api/v1/sessions/{id}".into(), &axum::http::Method::GET, StatusCode::NOT_FOUND, Duration::from_millis(3));
        let t = text(&m);
        assert!(t.contains("drover_spend_usd_total{agent=\"bot\",model=\"claude-x\"} 1.5"), "{t}");
        assert!(!t.contains("gpt-y"), "nothing spent, no series: {t}");
        assert!(
            t.contains("drover_http_request_duration_seconds_count{route=\"/api/v1/sessions/{id}\",method=\"GET\",status=\"4xx\"} 1"),
            "{t}"
        );
    }

    #[test]
    fn spend_is_what_each_model_cost_since_the_last_report() {
        use drover_protocol::device::{ModelUsage, UsageReport};
        let model = |name: &str, nano: u64| ModelUsage {
            model: name.into(),
            tokens: Default::default(),
            turns: 1,
            cost: drover_core::spend::Cost { generation: nano, cache_read: 0 },
            unpriced_turns: 0,
        };
        let first = UsageReport { models: vec![model("a", 100)], ..Default::default() };
        assert_eq!(spent_since(None, &first), [("a", 100)]);
        let json = serde_json::to_string(&first).unwrap();
        let second = UsageReport { models: vec![model("a", 150), model("b", 7)], ..Default::default() };
        assert_eq!(spent_since(Some(&json), &second), [("a", 50), ("b", 7)]);
        assert!(spent_since(Some(&serde_json::to_string(&second).unwrap()), &second).is_empty(), "the same report again spent nothing");
    }

    #[test]
    fn spend_series_are_capped() {
        let m = Metrics::new();
        for i in 0..MAX_SPEND_SERIES + 5 {
            m.spent(Some("bot"), &format!("model-{i}"), 1);
        }
        let t = text(&m);
        assert_eq!(t.lines().filter(|l| l.starts_with("drover_spend_usd_total{")).count(), MAX_SPEND_SERIES + 1);
        assert!(t.contains("drover_spend_usd_total{agent=\"bot\",model=\"other\"} "), "{t}");
    }

    #[tokio::test]
    async fn a_socket_is_counted_while_open() {
        let m = Arc::new(Metrics::new());
        let g = m.socket(Socket::Viewer);
        assert!(text(&m).contains("drover_websocket_links{kind=\"viewer\"} 1"));
        drop(g);
        assert!(text(&m).contains("drover_websocket_links{kind=\"viewer\"} 0"));
    }

    #[test]
    fn openmetrics_is_served_when_asked_for() {
        let m = Metrics::new();
        let mut h = HeaderMap::new();
        h.insert(header::ACCEPT, HeaderValue::from_static("application/openmetrics-text;version=1.0.0,text/plain;q=0.5"));
        let (ct, body) = encode(&[&m.registry], &h);
        assert!(ct.starts_with("application/openmetrics-text"));
        assert!(body.trim_end().ends_with("# EOF"), "{body}");
    }
}

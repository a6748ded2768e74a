//! Drover's server: the HTTP/WebSocket API under `/api/v1`, the device links, and the
//! per-session output hubs that fan a session's terminal out to its viewers.
//!
//! State that matters after a restart lives in the store; in memory are only the live
//! links (connected devices, attached viewers) and each live session's recent output.

pub mod api;
pub mod auth;
mod cluster;
mod contact;
mod device_link;
mod devices;
pub mod egress;
mod error;
pub mod forwarded;
mod guesses;
mod hub;
mod ingest;
mod leases;
mod limits;
mod link_guard;
mod live;
pub mod metrics;
mod monitor;
pub mod parking;
mod passwords;
pub mod push;
mod render;
pub mod request_id;
mod retention;
pub mod scheduler;
mod screens;
mod spend;
mod state;
mod tasks;
pub mod tls;
mod topology;
mod viewer;
mod viewers;
mod web;
pub mod webhooks;
mod writer;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

pub use error::ApiError;
pub use live::{read_heap_with, Heap};
pub use state::AppState;

/// Timings and limits of the server; every timer is here so tests can shorten them.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Grace between SIGTERM and SIGKILL on Stop.
    pub stop_grace: Duration,
    /// How long `POST /sessions` waits for the program to start.
    pub start_wait: Duration,
    /// How long to wait for a device to answer a snapshot request.
    pub snapshot_timeout: Duration,
    /// How long to wait for a device to confirm audited input.
    pub input_timeout: Duration,
    /// Default stillness window for ask.
    pub ask_still: Duration,
    /// Default timeout for ask.
    pub ask_timeout: Duration,
    /// How long a browser stays signed in.
    pub web_session_ttl: Duration,
    /// How long a one-time sign-in link works.
    pub login_link_ttl: Duration,
    /// Failed sign-ins allowed per client address and per member name in `login_window`.
    pub login_attempts: usize,
    /// The sliding window of `login_attempts`.
    pub login_window: Duration,
    /// The server's URL as agents on devices reach it (`DROVER_URL` in their runs).
    pub public_url: String,
    /// How often the scheduler looks at waiting stages without being woken.
    pub schedule_tick: Duration,
    /// Runs a stage gets without a hand-off before the task is flagged for a human.
    pub max_attempts: u32,
    /// The stale monitor's windows (Device silent, Sandbox retired).
    pub liveness: drover_core::liveness::LivenessRules,
    /// How often the stale monitor checks every live session.
    pub monitor_every: Duration,
    /// A task's run quiet and without progress this long (and not waiting on a person)
    /// has stalled and is replaced.
    pub stall_after: Duration,
    /// How failed webhook deliveries are retried.
    pub webhook_retry: drover_core::webhook::RetryPolicy,
    /// How often the webhook sender looks for due deliveries (the push sender too).
    pub webhook_poll: Duration,
    /// How long a member's batch of notices collects after the first before it is
    /// pushed as one.
    pub push_coalesce: Duration,
    /// A task-free session with no output, input or viewer for this long is stopped
    /// and ends `released` ("idle-parked"); None: never.
    pub park_after: Option<Duration>,
    /// A task run whose harness reports nothing through hooks, with a screen still this
    /// long and showing a prompt, is guessed to wait on a person; None: never guess.
    pub guess_after: Option<Duration>,
    /// How long finished sessions' recordings and events (and settled webhook
    /// deliveries) are kept.
    pub retention: Duration,
    /// How often the pruning job runs.
    pub prune_every: Duration,
    /// How long a monitor's lease lasts unless renewed (renewed every third of it): how
    /// soon another replica takes over the monitors of one that died.
    pub lease_ttl: Duration,
    /// Reverse proxies in front of the server (`--trusted-proxy`): only from these are
    /// forwarded-for headers believed.
    pub trusted_proxies: Vec<ipnet::IpNet>,
    /// Where webhook deliveries may go beyond the public internet.
    pub egress: Arc<drover_core::egress::EgressRules>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            stop_grace: Duration::from_secs(5),
            start_wait: Duration::from_secs(10),
            snapshot_timeout: Duration::from_secs(10),
            input_timeout: Duration::from_secs(10),
            ask_still: Duration::from_millis(1500),
            ask_timeout: Duration::from_secs(60),
            web_session_ttl: Duration::from_secs(7 * 24 * 3600),
            login_link_ttl: Duration::from_secs(15 * 60),
            login_attempts: 10,
            login_window: Duration::from_secs(5 * 60),
            public_url: "http://127.0.0.1:7070".into(),
            schedule_tick: Duration::from_secs(5),
            max_attempts: 3,
            liveness: drover_core::liveness::LivenessRules::default(),
            monitor_every: Duration::from_secs(30),
            stall_after: Duration::from_secs(30 * 60),
            webhook_retry: drover_core::webhook::RetryPolicy::default(),
            webhook_poll: Duration::from_millis(500),
            push_coalesce: drover_core::notify::COALESCE_WINDOW,
            park_after: Some(Duration::from_secs(24 * 3600)),
            guess_after: Some(Duration::from_secs(20)),
            retention: Duration::from_secs(30 * 24 * 3600),
            prune_every: Duration::from_secs(3600),
            lease_ttl: Duration::from_secs(6),
            trusted_proxies: Vec::new(),
            egress: Arc::default(),
        }
    }
}

/// Serves the API on `listener` until the process ends: over TLS with `tls`, else plain
/// HTTP.
pub async fn serve(state: AppState, listener: tokio::net::TcpListener, tls: Option<Arc<rustls::ServerConfig>>) -> std::io::Result<()> {
    use axum::serve::ListenerExt;
    state.topology.start(&state);
    leases::spawn(state.clone());
    scheduler::spawn(state.clone());
    monitor::spawn(state.clone());
    parking::spawn(state.clone());
    guesses::spawn(state.clone());
    webhooks::spawn(state.clone());
    push::spawn(state.clone());
    retention::spawn(state.clone());
    live::spawn(state.clone());
    screens::spawn(state.clone());
    let app = api::router(state).layer(axum::middleware::from_fn(request_id::tag));
    if let Some(config) = tls {
        // (Through `tap_io`, whose connection info is the listener's address type: axum
        // gives `ConnectInfo<SocketAddr>` to plain TCP listeners only.)
        let listener = tls::TlsListener::new(listener, config)?.tap_io(|_| {});
        return axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>()).await;
    }
    // Terminal traffic is many small writes: never let Nagle's algorithm hold them back.
    let listener = listener.tap_io(|tcp| {
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::warn!("TCP_NODELAY: {e}");
        }
    });
    axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>()).await
}

//! The state every handler shares.

use std::sync::Arc;

use drover_core::WorkspaceId;
use drover_store::Store;

use crate::devices::Devices;
use crate::hub::Hubs;
use crate::ServerConfig;

/// Shared server state; cheap to clone.
#[derive(Clone)]
pub struct AppState {
    /// The database.
    pub store: Store,
    /// Connected devices.
    pub(crate) devices: Arc<Devices>,
    /// Live sessions' output hubs.
    pub(crate) hubs: Arc<Hubs>,
    /// Timings and limits.
    pub config: Arc<ServerConfig>,
    /// This server's name among the replicas sharing the database (`rep_…`, new at
    /// every start).
    pub replica: String,
    /// Alone on the database, or one of several replicas: what differs between them.
    pub(crate) topology: Arc<dyn crate::topology::Topology>,
    /// What this replica knows of the others (replicas only).
    pub(crate) cluster: Arc<crate::cluster::Cluster>,
    /// Viewer counts stored and told to devices (replicas only).
    pub(crate) viewers: Arc<crate::viewers::ViewerCounts>,
    /// The Prometheus metrics this process counts.
    pub metrics: Arc<crate::metrics::Metrics>,
    /// The one writer of every link's output.
    pub(crate) output: Arc<crate::writer::OutputWriter>,
    /// Heartbeats waiting to be written together.
    pub(crate) contact: Arc<crate::contact::ContactBook>,
    /// The monitors' leases this server holds.
    pub(crate) leases: Arc<crate::leases::Leases>,
    /// The workspace this server serves by default.
    pub workspace: WorkspaceId,
    /// Wakes the scheduler (a stage may be staffable now).
    pub scheduler: Arc<tokio::sync::Notify>,
    /// Wakes every open terminal to check its viewer's access now (a member removed, a
    /// role changed, tokens revoked) rather than at its next periodic look.
    pub access_changed: Arc<tokio::sync::Notify>,
    /// Tasks with a hand-off under way (a merge can take a while): one at a time each.
    pub(crate) hand_offs: Arc<std::sync::Mutex<std::collections::HashSet<drover_core::TaskId>>>,
    /// Sign-in attempts per client address and member name.
    pub(crate) logins: Arc<crate::limits::LoginLimiter>,
    /// When each token's last use was last written (at most once a minute each).
    touched: Arc<std::sync::Mutex<std::collections::HashMap<String, std::time::Instant>>>,
}

impl AppState {
    /// New state over `store`.
    pub fn new(store: Store, workspace: WorkspaceId, config: ServerConfig) -> AppState {
        AppState {
            topology: crate::topology::select(&store),
            store,
            devices: Arc::new(Devices::default()),
            hubs: Arc::new(Hubs::default()),
            config: Arc::new(config.clone()),
            replica: format!("rep_{}", uuid::Uuid::now_v7().simple()),
            leases: Arc::default(),
            metrics: Arc::default(),
            output: Arc::default(),
            contact: Arc::default(),
            cluster: Arc::default(),
            viewers: Arc::default(),
            workspace,
            scheduler: Arc::new(tokio::sync::Notify::new()),
            access_changed: Arc::new(tokio::sync::Notify::new()),
            hand_offs: Arc::default(),
            logins: Arc::new(crate::limits::LoginLimiter::new(config.login_attempts, config.login_window)),
            touched: Arc::default(),
        }
    }

    /// Tokens whose last use is remembered (for `/metrics`).
    pub(crate) fn tokens_touched(&self) -> u64 {
        self.touched.lock().expect("touched lock").len() as u64
    }

    /// Whether the token with `digest` is due a "last used" write: at most once a minute
    /// per token, so a busy client costs no write per request.
    pub(crate) fn touch_due(&self, digest: &str) -> bool {
        const EVERY: std::time::Duration = std::time::Duration::from_secs(60);
        let now = std::time::Instant::now();
        let mut map = self.touched.lock().expect("touched lock");
        if map.get(digest).is_some_and(|t| now.duration_since(*t) < EVERY) {
            return false;
        }
        if map.len() >= 10_000 {
            map.retain(|_, t| now.duration_since(*t) < EVERY);
        }
        map.insert(digest.to_string(), now);
        true
    }
}

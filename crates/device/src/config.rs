//! The device daemon's settings.

use std::path::PathBuf;
use std::time::Duration;

/// Default heartbeat interval (DESIGN.md: every 15 s).
pub const HEARTBEAT: Duration = Duration::from_secs(15);

/// What the device daemon needs to run.
#[derive(Clone)]
pub struct DeviceConfig {
    /// The server's base URL (`http://host:port`).
    pub server_url: String,
    /// The device's credential.
    pub token: String,
    /// The device's name.
    pub name: String,
    /// Sessions it may run at once.
    pub slots: u32,
    /// Where session directories live (`<home>/sessions/<id>/`).
    pub home: PathBuf,
    /// The `drover` binary: its directory goes first on a task run's PATH.
    pub shim_exe: PathBuf,
    /// What starts each session's shim (a launcher running `shim_exe`).
    pub launcher: crate::launcher::ShimLauncher,
    /// How often to send a heartbeat.
    pub heartbeat: Duration,
    /// Default working directory for sessions that do not name one.
    pub default_cwd: PathBuf,
    /// Directories no run may reach (Drover's home: its database, credentials and every
    /// session's files), except the run's own worktree and temp inside them.
    pub protected: Vec<PathBuf>,
    /// How runs are sandboxed.
    pub sandbox: SandboxConfig,
    /// What an `https://` server's certificate is checked against (None: the system's
    /// roots).
    pub tls: Option<std::sync::Arc<rustls::ClientConfig>>,
    /// The server's certificate as this device knows it, if it keeps it.
    pub server_identity: Option<crate::identity::ServerIdentity>,
    /// Where the daemon counts what it does (`--metrics-listen`).
    pub metrics: crate::metrics::DeviceMetrics,
}

/// Everything but the credential, which is never printed nor logged.
impl std::fmt::Debug for DeviceConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceConfig")
            .field("server_url", &self.server_url)
            .field("token", &"(concealed)")
            .field("name", &self.name)
            .field("slots", &self.slots)
            .field("home", &self.home)
            .field("heartbeat", &self.heartbeat)
            .field("sandbox", &self.sandbox)
            .finish_non_exhaustive()
    }
}

/// The device owner's settings for the sandbox runs start in.
#[derive(Debug, Clone, Default)]
pub struct SandboxConfig {
    /// Run everything unconfined (`--unsandboxed`): shown as a warning on the device.
    pub unsandboxed: bool,
    /// More directories every run may read.
    pub read: Vec<PathBuf>,
    /// More directories every run may write.
    pub write: Vec<PathBuf>,
    /// More of the daemon's environment variables runs inherit.
    pub pass_env: Vec<String>,
    /// Limits each run's processes run under.
    pub limits: drover_core::confinement::Limits,
    /// Let runs make Unix-domain sockets (`--sandbox-unix-sockets`): they can then reach
    /// any named socket of the device's user.
    pub unix_sockets: bool,
}

impl DeviceConfig {
    /// The directory holding one directory per session.
    pub fn sessions_dir(&self) -> PathBuf {
        self.home.join("sessions")
    }

    /// Where task sandboxes' git worktrees live.
    pub fn worktrees_dir(&self) -> PathBuf {
        self.home.join("worktrees")
    }

    /// The WebSocket URL to connect to.
    pub fn connect_url(&self) -> String {
        let base = self.server_url.trim_end_matches('/');
        let ws = if let Some(rest) = base.strip_prefix("https://") {
            format!("wss://{rest}")
        } else if let Some(rest) = base.strip_prefix("http://") {
            format!("ws://{rest}")
        } else {
            base.to_string()
        };
        format!("{ws}/api/v1/device/connect")
    }
}

//! Arguments of the long-running commands: the server, `up`, the device daemon, and the database tools.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Subcommand};

/// Settings shared by `up` and `server`.
#[derive(Debug, Args)]
pub struct ServerArgs {
    /// Address to listen on. Plain HTTP only on loopback, unless --insecure-http or a
    /// --trusted-proxy says TLS ends in front of it; with --tls-cert, anywhere.
    #[arg(long, default_value = "127.0.0.1:7070", env = "DROVER_LISTEN")]
    pub listen: SocketAddr,
    /// The server's TLS certificate chain (PEM, leaf first): it then serves only HTTPS and
    /// WSS. Reloaded when the file changes, and on SIGHUP.
    #[arg(long, env = "DROVER_TLS_CERT", value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM).
    #[arg(long, env = "DROVER_TLS_KEY", value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Serve plain HTTP on a non-loopback address: every credential, keystroke and line of
    /// output crosses the network readable by anyone on the way.
    #[arg(long)]
    pub insecure_http: bool,
    /// A reverse proxy in front of this server, which ends TLS (an address or CIDR;
    /// repeatable). Only from these are `X-Forwarded-For`, `Forwarded` and
    /// `X-Forwarded-Proto` believed.
    #[arg(long = "trusted-proxy", value_name = "CIDR", value_parser = parse_net)]
    pub trusted_proxies: Vec<ipnet::IpNet>,
    /// A webhook host that may resolve to an address inside (loopback, a private network,
    /// this server's own): by default deliveries go only to the public internet.
    /// Repeatable.
    #[arg(long = "allow-webhook-host", value_name = "HOST")]
    pub allow_webhook_hosts: Vec<String>,
    /// Let webhooks reach any address inside (loopback, private and link-local ranges).
    #[arg(long)]
    pub allow_local_webhooks: bool,
    /// The URL people, devices and agents reach this server at (default: built from
    /// --listen, `https://` with --tls-cert). Set it to the name on the certificate, or to
    /// the proxy's address.
    #[arg(long, env = "DROVER_PUBLIC_URL", value_name = "URL")]
    pub public_url: Option<String>,
    /// The database: `sqlite:PATH` (default: drover.db in $DROVER_HOME) for one server,
    /// or `postgres://USER:PASSWORD@HOST:PORT/DATABASE` (PostgreSQL 14 or newer), which
    /// several `drover server` replicas may share. Created if missing.
    #[arg(long, env = "DROVER_DATABASE", hide_env_values = true, value_parser = parse_database, value_name = "URL")]
    pub database: Option<drover_store::Database>,
    /// Grace period in seconds between SIGTERM and SIGKILL when a session is stopped.
    #[arg(long, default_value_t = 5.0)]
    pub stop_grace: f64,
    /// How long a browser stays signed in, in seconds (default a week).
    #[arg(long, default_value_t = 7 * 24 * 3600, hide = true)]
    pub web_session_secs: u64,
    /// Seconds without contact from a device before its live sessions are flagged
    /// "Device silent" (and marked lost at the next check if still silent).
    #[arg(long, default_value_t = 15.0 * 60.0)]
    pub device_silent_secs: f64,
    /// Seconds a session may keep running after its sandbox finished before it is
    /// flagged "Sandbox retired".
    #[arg(long, default_value_t = 5.0 * 60.0)]
    pub sandbox_retired_secs: f64,
    /// Seconds between the stale monitor's checks of every live session.
    #[arg(long, default_value_t = 30.0)]
    pub monitor_secs: f64,
    /// Seconds a task's run may print nothing and show no progress (while not waiting
    /// on a person) before it is replaced with a fresh one.
    #[arg(long, default_value_t = 30.0 * 60.0)]
    pub stall_secs: f64,
    /// Seconds a task run whose harness reports nothing through hooks may show a still
    /// screen with a prompt before it is guessed to wait on a person (shown as a guess
    /// in the inbox and the task list); 0: never guess.
    #[arg(long, default_value_t = 20.0)]
    pub guess_after_secs: f64,
    /// Runs a task's stage gets without a hand-off (the first and its replacements)
    /// before the task is flagged for a person. Runs lost with their device do not count.
    #[arg(long, default_value_t = 3)]
    pub stage_runs: u32,
    /// Seconds a task-free session may go with no output, no input and no viewer before
    /// it is stopped and ends `released` ("idle-parked"); 0: never.
    #[arg(long, default_value_t = 24.0 * 3600.0)]
    pub park_after: f64,
    /// Seconds a member's batch of notices collects after the first before it is
    /// pushed to their browsers as one notification ("3 runs need you").
    #[arg(long, default_value_t = 10.0)]
    pub push_coalesce_secs: f64,
    /// Seconds before the first retry of a failed webhook delivery (doubling after).
    #[arg(long, default_value_t = 5.0)]
    pub webhook_retry_secs: f64,
    /// Attempts at a webhook delivery before it is given up as failed.
    #[arg(long, default_value_t = 12)]
    pub webhook_attempts: u32,
    /// Seconds finished sessions' recordings and events are kept (default 30 days).
    #[arg(long, default_value_t = 30.0 * 24.0 * 3600.0)]
    pub retention_secs: f64,
    /// Seconds between runs of the pruning job.
    #[arg(long, default_value_t = 3600.0)]
    pub prune_secs: f64,
    /// Seconds a replica's lease on a background monitor lasts unless renewed: how soon
    /// another replica takes over the monitors of one that died.
    #[arg(long, default_value_t = 6.0, hide = true)]
    pub lease_secs: f64,
    /// Also serve the Prometheus metrics at http://ADDR/metrics without credentials
    /// (default: only `GET /metrics` on --listen, with an owner's or admin's token). Keep
    /// it on loopback or a network only Prometheus reaches.
    #[arg(long, value_name = "ADDR")]
    pub metrics_listen: Option<SocketAddr>,
}

/// `drover up`.
#[derive(Debug, Args)]
pub struct UpArgs {
    /// Server settings.
    #[command(flatten)]
    pub server: ServerArgs,
    /// The local device's name (default: this machine's host name).
    #[arg(long)]
    pub name: Option<String>,
    /// Sessions the local device may run at once.
    #[arg(long, default_value_t = 8)]
    pub slots: u32,
    /// Seconds between the local device's heartbeats.
    #[arg(long, default_value_t = drover_device::HEARTBEAT.as_secs_f64())]
    pub heartbeat_secs: f64,
    /// The local device's sandbox.
    #[command(flatten)]
    pub sandbox: SandboxArgs,
}

/// How a device sandboxes the runs it starts (see the README's "Security model").
#[derive(Debug, Args)]
pub struct SandboxArgs {
    /// Run every session and task run on this device unconfined: they reach everything
    /// this user can (Drover's home and credentials included). The device is shown with
    /// a warning everywhere. Without it, a device whose kernel cannot sandbox refuses runs.
    #[arg(long)]
    pub unsandboxed: bool,
    /// A directory every run may also read (repeatable).
    #[arg(long, value_name = "DIR")]
    pub sandbox_read: Vec<std::path::PathBuf>,
    /// A directory every run may also write, e.g. a shared cache (repeatable).
    #[arg(long, value_name = "DIR")]
    pub sandbox_write: Vec<std::path::PathBuf>,
    /// Let runs make Unix-domain sockets of their own. Without it they cannot (pairs of
    /// connected sockets still work), because such a socket could reach any named socket
    /// of this user: the D-Bus session bus, a tmux server, Docker, each able to run
    /// commands outside the sandbox. Needed by tools that serve or dial a socket by path.
    #[arg(long)]
    pub sandbox_unix_sockets: bool,
    /// An environment variable of this daemon that runs also inherit (repeatable; the
    /// harnesses' API keys, locale, proxies and PATH are passed already; DROVER_* never are).
    #[arg(long, value_name = "NAME")]
    pub pass_env: Vec<String>,
    /// Memory each process of a run may allocate, in MiB (RLIMIT_DATA; 0: no limit).
    #[arg(long, default_value_t = drover_core::confinement::DEFAULT_MEMORY_BYTES >> 20, value_name = "MIB")]
    pub run_memory_mib: u64,
    /// Processes this user may have while a run starts more (RLIMIT_NPROC, which the
    /// kernel counts per user and does not apply to root; 0: no limit).
    #[arg(long, default_value_t = drover_core::confinement::DEFAULT_PROCESSES, value_name = "N")]
    pub run_processes: u64,
}

/// `drover device …`.
#[derive(Debug, Args)]
pub struct DeviceCmd {
    /// Device management commands.
    #[command(subcommand)]
    pub command: Option<DeviceSub>,
    /// Run the daemon with these settings.
    #[command(flatten)]
    pub run: DeviceRunArgs,
}

/// Running the device daemon.
#[derive(Debug, Args)]
pub struct DeviceRunArgs {
    /// The server's URL.
    #[arg(long, env = "DROVER_SERVER")]
    pub server: Option<String>,
    /// The one-time enrollment token from `drover device add` (traded for the device's
    /// own credential, kept in $DROVER_HOME/device-daemon/credential.json), or a device
    /// credential. Not needed once the device has enrolled: it starts from the saved one.
    #[arg(long, env = "DROVER_DEVICE_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// The device's name, as registered.
    #[arg(long)]
    pub name: Option<String>,
    /// Sessions it may run at once; without it, the slots `drover device add --slots`
    /// registered (the server keeps one number for the device).
    #[arg(long)]
    pub slots: Option<u32>,
    /// Seconds between heartbeats to the server.
    #[arg(long, default_value_t = drover_device::HEARTBEAT.as_secs_f64())]
    pub heartbeat_secs: f64,
    /// The device's sandbox.
    #[command(flatten)]
    pub sandbox: SandboxArgs,
    /// Serve the daemon's Prometheus metrics at http://ADDR/metrics, without
    /// credentials (default: off). Keep it on loopback or a network only Prometheus
    /// reaches.
    #[arg(long, value_name = "ADDR")]
    pub metrics_listen: Option<SocketAddr>,
}

/// Device management.
#[derive(Debug, Subcommand)]
pub enum DeviceSub {
    /// List devices: slots, live sessions, connection, last contact.
    List,
    /// Revoke a device's credential (owners and admins): it is refused from now on and
    /// its live sessions are marked lost; `device add` registers it again.
    Revoke {
        /// The device's name.
        name: String,
    },
    /// Install this enrolled device's daemon as a systemd service, enabled and started.
    Install(crate::args::DeviceInstallArgs),
    /// Register a device and print its one-time enrollment token (owners and admins).
    Add {
        /// The device's name.
        name: String,
        /// Sessions it may run at once.
        #[arg(long, default_value_t = 4)]
        slots: u32,
    },
}

/// Parses `--database` (a clap value parser).
fn parse_database(s: &str) -> Result<drover_store::Database, String> {
    drover_store::Database::parse(s).map_err(|e| e.to_string())
}

/// Which database a maintenance command works on.
#[derive(Debug, Args)]
pub struct DatabaseArgs {
    /// `sqlite:PATH` or `postgres://USER:PASSWORD@HOST:PORT/DATABASE` (default:
    /// drover.db in $DROVER_HOME).
    #[arg(long, env = "DROVER_DATABASE", hide_env_values = true, value_parser = parse_database, value_name = "URL")]
    pub database: Option<drover_store::Database>,
}

/// `drover export`.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// The database to export.
    #[command(flatten)]
    pub db: DatabaseArgs,
    /// The file to write (JSON lines); it must not exist yet.
    #[arg(long, short, value_name = "FILE")]
    pub out: std::path::PathBuf,
}

/// `drover import`.
#[derive(Debug, Args)]
pub struct ImportArgs {
    /// The file `drover export` wrote.
    pub file: std::path::PathBuf,
    /// The database to load it into: new or empty.
    #[command(flatten)]
    pub db: DatabaseArgs,
}

/// A network (`10.0.0.0/8`) or one address (`192.0.2.7`, `::1`).
fn parse_net(s: &str) -> Result<ipnet::IpNet, String> {
    s.parse::<ipnet::IpNet>()
        .or_else(|_| s.parse::<std::net::IpAddr>().map(ipnet::IpNet::from))
        .map_err(|_| format!("`{s}` is not an address or CIDR network (like 10.0.0.0/8 or 192.0.2.7)"))
}

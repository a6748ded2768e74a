//! `drover up` (server + local device), `drover server`, and `drover device` (daemon).

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use std::sync::Arc;

use drover_device::DeviceConfig;
use drover_server::{auth, AppState, ServerConfig};
use drover_store::{Database, Store};
use drover_tls::server::ServerCert;

use crate::args::{DeviceRunArgs, ServerArgs, UpArgs};
use crate::home::{self, ClientConfig, DeviceCredentialFile, Running};

struct Started {
    url: String,
    state: AppState,
    listener: tokio::net::TcpListener,
    /// The server's certificate, when it serves TLS.
    cert: Option<Arc<ServerCert>>,
}

impl Started {
    /// The TLS configuration to serve with, if any.
    fn tls(&self) -> Result<Option<Arc<rustls::ServerConfig>>> {
        self.cert.as_ref().map(|c| c.config()).transpose().context("setting up TLS")
    }
}

/// Plain HTTP is served only where nobody on the way can read it, unless told otherwise.
fn check_plain_listen(args: &ServerArgs) -> Result<()> {
    let addr = args.listen;
    if args.tls_cert.is_some() || addr.ip().is_loopback() || args.insecure_http || !args.trusted_proxies.is_empty() {
        return Ok(());
    }
    bail!(
        "refusing to serve plain HTTP on {addr}, which is not a loopback address: every token, keystroke and line of output would cross the network readable. Give the server a certificate (--tls-cert FILE --tls-key FILE), or put a TLS proxy in front and name it with --trusted-proxy CIDR, or pass --insecure-http to accept the risk"
    )
}

async fn start_server(home: &Path, args: &ServerArgs) -> Result<Started> {
    if !(0.0..=3600.0).contains(&args.stop_grace) {
        bail!("--stop-grace must be between 0 and 3600 seconds");
    }
    let database = args.database.clone().unwrap_or_else(|| Database::Sqlite(home.join("drover.db")));
    let store = Store::open(&database).await.with_context(|| format!("opening the database {}", database.display()))?;
    // The first owner is named after the login user (made a valid member name).
    let owner = std::env::var("USER")
        .ok()
        .filter(|u| !u.is_empty())
        .map(|u| drover_core::names::device_name_from_host(&u))
        .unwrap_or_else(|| "owner".into());
    let (workspace, _) = store.bootstrap("default", &owner).await?;
    check_plain_listen(args)?;
    let cert = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(ServerCert::load(cert, key).context("loading the TLS certificate")?),
        _ => None,
    };
    let listener = tokio::net::TcpListener::bind(args.listen).await.map_err(|e| {
        let hint = if e.kind() == std::io::ErrorKind::AddrInUse { " (another program uses it: pass --listen 127.0.0.1:PORT)" } else { "" };
        anyhow::anyhow!("cannot listen on {}: {e}{hint}", args.listen)
    })?;
    let addr = listener.local_addr()?;
    let host = if addr.ip().is_unspecified() { "127.0.0.1".to_string() } else { addr.ip().to_string() };
    let host = if host.contains(':') { format!("[{host}]") } else { host };
    let scheme = if cert.is_some() { "https" } else { "http" };
    let url = match &args.public_url {
        Some(u) => public_url(u)?,
        None => format!("{scheme}://{host}:{}", addr.port()),
    };
    if args.web_session_secs == 0 {
        bail!("--web-session-secs must be at least 1");
    }
    let config = ServerConfig {
        stop_grace: Duration::from_secs_f64(args.stop_grace),
        web_session_ttl: Duration::from_secs(args.web_session_secs),
        public_url: url.clone(),
        liveness: drover_core::liveness::LivenessRules {
            device_silent_after: seconds("--device-silent-secs", args.device_silent_secs)?,
            sandbox_retired_grace: seconds("--sandbox-retired-secs", args.sandbox_retired_secs)?,
        },
        monitor_every: seconds("--monitor-secs", args.monitor_secs)?,
        stall_after: seconds("--stall-secs", args.stall_secs)?,
        park_after: if args.park_after == 0.0 { None } else { Some(seconds("--park-after", args.park_after)?) },
        guess_after: if args.guess_after_secs == 0.0 { None } else { Some(seconds("--guess-after-secs", args.guess_after_secs)?) },
        max_attempts: match args.stage_runs {
            1..=100 => args.stage_runs,
            _ => bail!("--stage-runs must be between 1 and 100"),
        },
        webhook_retry: drover_core::webhook::RetryPolicy {
            base: seconds("--webhook-retry-secs", args.webhook_retry_secs)?,
            max_attempts: match args.webhook_attempts {
                1..=100 => args.webhook_attempts,
                _ => bail!("--webhook-attempts must be between 1 and 100"),
            },
            ..Default::default()
        },
        push_coalesce: seconds("--push-coalesce-secs", args.push_coalesce_secs)?,
        retention: seconds("--retention-secs", args.retention_secs)?,
        prune_every: seconds("--prune-secs", args.prune_secs)?,
        lease_ttl: seconds("--lease-secs", args.lease_secs)?,
        trusted_proxies: args.trusted_proxies.clone(),
        egress: Arc::new(drover_core::egress::EgressRules {
            allowed_hosts: args.allow_webhook_hosts.iter().map(|h| drover_core::egress::bare_host(h).to_ascii_lowercase()).collect(),
            allow_local: args.allow_local_webhooks,
            own: drover_server::egress::own_addresses(),
        }),
        ..ServerConfig::default()
    };
    if let Some(c) = &cert {
        c.watch();
    }
    Ok(Started { url, state: AppState::new(store, workspace, config), listener, cert })
}

/// `--public-url`, checked: an `http(s)://` URL with a host.
fn public_url(u: &str) -> Result<String> {
    let parsed = reqwest::Url::parse(u).map_err(|e| anyhow::anyhow!("--public-url `{u}` is not a URL: {e}"))?;
    if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
        bail!("--public-url must be an http:// or https:// URL with a host, like https://drover.example.com");
    }
    Ok(u.trim_end_matches('/').to_string())
}

/// A duration option given in seconds: more than 0 and at most ten years.
fn seconds(flag: &str, secs: f64) -> Result<Duration> {
    if !(secs > 0.0 && secs <= 10.0 * 365.0 * 24.0 * 3600.0) {
        bail!("{flag} must be more than 0 and at most 315360000 seconds (ten years)");
    }
    Ok(Duration::from_secs_f64(secs))
}

/// A member token for the CLI: the one in `client.json` if still valid, else a new one.
async fn client_token(state: &AppState, home: &Path) -> Result<String> {
    if let Some(c) = home::read_json::<ClientConfig>(&home.join("client.json")) {
        if auth::token_valid(&state.store, &c.token).await {
            return Ok(c.token);
        }
    }
    let (ws, owner) = state.store.bootstrap("default", "owner").await?;
    Ok(auth::issue_member_token(&state.store, ws, owner, "drover up (local CLI)").await?)
}

/// `drover up`.
pub async fn up(args: UpArgs) -> Result<()> {
    let home = home::home()?;
    home::ensure_private(&home)?;
    let _lock = home::lock(&home)?;
    let started = start_server(&home, &args.server).await?;
    let state = started.state.clone();
    let metrics_listener = crate::metrics::bind(args.server.metrics_listen).await?;
    let name = args.name.clone().unwrap_or_else(|| drover_core::names::device_name_from_host(&hostname()));
    drover_core::names::check_device_name(&name)?;
    if !(1..=1000).contains(&args.slots) {
        bail!("--slots must be between 1 and 1000");
    }
    let device = state.store.upsert_device(state.workspace, &name, args.slots).await?;
    let device_token = match home::read_json::<DeviceCredentialFile>(&home.join("device.json")) {
        Some(f) if f.name == name && auth::token_valid(&state.store, &f.token).await => f.token,
        _ => {
            state.store.revoke_device_tokens(device.id).await?;
            auth::issue_device_token(&state.store, state.workspace, device.id, "drover up (local device)").await?
        }
    };
    home::write_private_json(&home.join("device.json"), &DeviceCredentialFile { name: name.clone(), token: device_token.clone() })?;
    let token = client_token(&state, &home).await?;
    home::write_private_json(&home.join("client.json"), &ClientConfig { url: started.url.clone(), token })?;
    home::write_private_json(&home.join("up.json"), &Running { pid: std::process::id(), url: started.url.clone() })?;

    let url = started.url.clone();
    let tls = started.tls()?;
    // The local device reaches its own server over loopback and trusts exactly the
    // certificate it serves (its name is the public one, not 127.0.0.1).
    let device_tls = started.cert.as_ref().map(|c| c.pinned_client()).transpose().context("setting up TLS")?;
    let local_url = local_url(&started.listener, started.cert.is_some())?;
    let server = tokio::spawn(drover_server::serve(started.state, started.listener, tls));
    let exe = std::env::current_exe().context("finding the drover binary")?;
    let device_config = DeviceConfig {
        server_url: local_url,
        token: device_token,
        name: name.clone(),
        slots: args.slots,
        home: home.join("device"),
        shim_exe: exe.clone(),
        launcher: drover_device::ShimLauncher::new(exe),
        heartbeat: seconds("--heartbeat-secs", args.heartbeat_secs)?,
        default_cwd: default_cwd(),
        protected: vec![home.clone()],
        sandbox: sandbox_config(&args.sandbox),
        tls: device_tls,
        server_identity: None,
        metrics: drover_device::metrics::DeviceMetrics::default(),
    };
    // The local device's series are served with the server's.
    state.metrics.include(device_config.metrics.registry());
    let metrics_url = metrics_listener.as_ref().map(crate::metrics::describe);
    if let Some(l) = metrics_listener {
        crate::metrics::spawn("server", drover_server::metrics::serve(state.clone(), l));
    }
    let offer = drover_device::confine::offer(&device_config);
    let device_task = tokio::spawn(drover_device::run(device_config));
    let (_, owner) = state.store.bootstrap("default", "owner").await?;
    let link = drover_server::api::web::issue_login_link(&state, owner).await.map_err(|e| anyhow::anyhow!("{e}"))?;
    println!("Drover is running at {url}");
    println!("  open:   {url}{}   (signs this browser in; one use — `drover ui` prints another)", link.path);
    println!("  home:   {}", home.display());
    println!("  device: {name} ({} slots), runs {}", args.slots, offer.describe());
    print_missing(&offer);
    if let Some(url) = metrics_url {
        println!("  metrics: {url}");
    }
    println!("  try:    drover session start --device {name} -- bash");
    wait_for(server, device_task).await
}

/// The server's address on this machine, for the device inside `drover up`.
fn local_url(listener: &tokio::net::TcpListener, tls: bool) -> Result<String> {
    let addr = listener.local_addr()?;
    let ip = match addr.ip() {
        ip if ip.is_unspecified() && ip.is_ipv4() => "127.0.0.1".to_string(),
        ip if ip.is_unspecified() => "[::1]".to_string(),
        std::net::IpAddr::V6(ip) => format!("[{ip}]"),
        ip => ip.to_string(),
    };
    Ok(format!("{}://{ip}:{}", if tls { "https" } else { "http" }, addr.port()))
}

/// Says what this machine keeps from a sandboxed run, and why.
fn print_missing(offer: &drover_core::confinement::Offer) {
    if matches!(offer, drover_core::confinement::Offer::Sandboxed { .. }) {
        for missing in &drover_device::confine::containment().missing {
            println!("  note:   runs get {missing}");
        }
    }
}

async fn wait_for(
    server: tokio::task::JoinHandle<std::io::Result<()>>,
    device: tokio::task::JoinHandle<std::io::Result<()>>,
) -> Result<()> {
    tokio::select! {
        r = server => r.context("server task")?.context("the server stopped"),
        r = device => r.context("device task")?.context("the device daemon stopped"),
        _ = shutdown_signal() => {
            crate::logging::notice("drover: shutting down; running sessions keep running and are re-adopted on the next start");
            Ok(())
        }
    }
}

async fn shutdown_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("signal handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

/// `drover server`.
pub async fn server(args: ServerArgs) -> Result<()> {
    let home = home::home()?;
    home::ensure_private(&home)?;
    let _lock = home::lock(&home)?;
    let started = start_server(&home, &args).await?;
    let metrics_listener = crate::metrics::bind(args.metrics_listen).await?;
    let token = client_token(&started.state, &home).await?;
    home::write_private_json(&home.join("client.json"), &ClientConfig { url: started.url.clone(), token })?;
    home::write_private_json(&home.join("up.json"), &Running { pid: std::process::id(), url: started.url.clone() })?;
    let (_, owner) = started.state.store.bootstrap("default", "owner").await?;
    let link = drover_server::api::web::issue_login_link(&started.state, owner).await.map_err(|e| anyhow::anyhow!("{e}"))?;
    println!("Drover server is running at {}", started.url);
    println!("  open:   {}{}   (signs this browser in; one use — `drover ui` prints another)", started.url, link.path);
    println!("  register a device: drover device add NAME   (prints its token)");
    println!("  then on that machine: drover device --server {} --token TOKEN --name NAME", started.url);
    if let Some(l) = metrics_listener {
        println!("  metrics: {}", crate::metrics::describe(&l));
        crate::metrics::spawn("server", drover_server::metrics::serve(started.state.clone(), l));
    }
    let url = started.url.clone();
    let state = started.state.clone();
    let tls = started.tls()?;
    tokio::select! {
        r = drover_server::serve(started.state, started.listener, tls) => r.with_context(|| format!("serving {url}")),
        _ = shutdown_signal() => {
            // Another replica takes over the monitors at once instead of when the
            // leases lapse.
            if let Err(e) = state.store.release_leases(&state.replica).await {
                tracing::warn!("giving up the monitors' leases: {e}");
            }
            Ok(())
        }
    }
}

/// `drover device --server URL --token T`.
pub async fn device(args: DeviceRunArgs) -> Result<()> {
    home::ensure_private(&home::home()?)?;
    let home = home::home()?.join("device-daemon");
    home::ensure_private(&home)?;
    let _lock = home::lock(&home)?;
    // A device that enrolled before starts again from its saved credential: the server,
    // name and token it was given need not be given again.
    let saved = home::read_json::<SavedCredential>(&home.join("credential.json"));
    let server = match (args.server, &saved) {
        (Some(s), _) => s.trim_end_matches('/').to_string(),
        (None, Some(saved)) => saved.server.clone(),
        (None, None) => bail!("`drover device` needs --server URL and --token TOKEN (from `drover device add NAME` on the server) the first time, or a subcommand such as `drover device list`"),
    };
    let name = match (args.name, &saved) {
        (Some(n), _) => n,
        (None, Some(saved)) if saved.server == server => saved.name.clone(),
        (None, _) => drover_core::names::device_name_from_host(&hostname()),
    };
    drover_core::names::check_device_name(&name)?;
    let metrics_listener = crate::metrics::bind(args.metrics_listen).await?;
    let identity_file = home.join("server-certificate");
    let token = match (args.token, saved) {
        (Some(token), _) => device_credential(&home, &server, &name, token).await?,
        (None, Some(saved)) if saved.server == server && saved.name == name => saved.token,
        (None, _) => bail!(
            "this machine has no saved credential for device `{name}` on {server}: pass --token TOKEN from `drover device add {name}`"
        ),
    };
    let exe = std::env::current_exe().context("finding the drover binary")?;
    let config = DeviceConfig {
        server_url: server.clone(),
        token,
        name: name.clone(),
        slots: args.slots.unwrap_or(0),
        home,
        shim_exe: exe.clone(),
        launcher: drover_device::ShimLauncher::new(exe),
        heartbeat: seconds("--heartbeat-secs", args.heartbeat_secs)?,
        default_cwd: default_cwd(),
        protected: vec![home::home()?],
        sandbox: sandbox_config(&args.sandbox),
        tls: Some(crate::client::tls_config()?),
        server_identity: Some(drover_device::identity::ServerIdentity {
            file: identity_file.clone(),
            private_ca: crate::client::trust().is_private(),
        }),
        metrics: drover_device::metrics::DeviceMetrics::default(),
    };
    println!("Drover device `{name}` connecting to {server}");
    let offer = drover_device::confine::offer(&config);
    println!("  runs {}", offer.describe());
    print_missing(&offer);
    if let Some(l) = metrics_listener {
        println!("  metrics: {}", crate::metrics::describe(&l));
        let serve = drover_device::metrics::serve(config.metrics.clone(), l, drover_server::metrics::process_registry);
        crate::metrics::spawn("device", serve);
    }
    tokio::select! {
        r = drover_device::run(config) => r.context("the device daemon stopped"),
        _ = shutdown_signal() => Ok(()),
    }
}

/// The device's own credential, saved (0600) in `credential.json` with the server, name
/// and enrollment token (by digest) it came from. A one-time enrollment token (`dre_…`)
/// is traded for one on first connect; later starts with the same token use the saved
/// credential, and a new enrollment token (after `device add` again) is traded anew.
async fn device_credential(home: &Path, server: &str, name: &str, token: String) -> Result<String> {
    let path = home.join("credential.json");
    if !token.starts_with(auth::ENROLLMENT_TOKEN_PREFIX) {
        return Ok(token);
    }
    let enrollment = auth::digest(&token);
    let saved = home::read_json::<SavedCredential>(&path).filter(|c| c.server == server && c.name == name && c.enrollment == enrollment);
    if let Some(saved) = saved {
        return Ok(saved.token);
    }
    let client = crate::client::Client::anonymous(server)?;
    let (cred, seen): (drover_api::DeviceCredential, _) = client
        .post_noting_certificate("/api/v1/devices/enroll", &drover_api::Enroll { token, name: name.to_string() })
        .await
        .context("enrolling this device")?;
    // The certificate the server presented when this device enrolled: every later
    // connection is compared with it.
    if let Some(seen) = seen {
        std::fs::write(home.join("server-certificate"), format!("{seen}\n")).context("keeping the server's certificate fingerprint")?;
    }
    let saved = SavedCredential { server: server.to_string(), name: name.to_string(), enrollment, token: cred.token.clone() };
    home::write_private_json(&path, &saved)?;
    Ok(cred.token)
}

/// A device daemon's saved credential (`credential.json`, mode 0600).
#[derive(serde::Serialize, serde::Deserialize)]
struct SavedCredential {
    server: String,
    name: String,
    /// The SHA-256 of the enrollment token it was traded for.
    enrollment: String,
    token: String,
}

fn sandbox_config(args: &crate::args::SandboxArgs) -> drover_device::SandboxConfig {
    let nonzero = |v: u64| (v > 0).then_some(v);
    drover_device::SandboxConfig {
        unsandboxed: args.unsandboxed,
        read: args.sandbox_read.clone(),
        write: args.sandbox_write.clone(),
        pass_env: args.pass_env.clone(),
        unix_sockets: args.sandbox_unix_sockets,
        limits: drover_core::confinement::Limits {
            memory_bytes: nonzero(args.run_memory_mib).map(|m| m.saturating_mul(1 << 20)),
            processes: nonzero(args.run_processes),
        },
    }
}

fn default_cwd() -> PathBuf {
    dirs::home_dir().filter(|h| h.is_dir()).unwrap_or_else(|| PathBuf::from("/"))
}

/// This machine's host name ("local" if unknown).
pub fn hostname() -> String {
    nix::unistd::gethostname().ok().and_then(|h| h.into_string().ok()).unwrap_or_else(|| "local".into())
}

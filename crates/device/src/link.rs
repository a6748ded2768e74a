//! The device's connection to the server: connect (with jittered, capped backoff), say
//! hello, resume every session from the offset the server holds, then carry messages
//! both ways until the link drops — and start over.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use drover_core::backoff::{Backoff, Jitter};
use drover_core::SessionId;
use drover_protocol::device::{DeviceBinary, DeviceMessage, MergeResult, ServerMessage, Worktree};
use drover_protocol::shim::{SessionSpec, ShimRequest};
use drover_protocol::PROTOCOL_VERSION;
use drover_term::dir::SessionDir;
use futures_util::{SinkExt, StreamExt};
use rand::Rng;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;
use tracing::Instrument;

use crate::config::DeviceConfig;
use crate::metrics::SandboxFailure;
use crate::session::{spawn_session, Outgoing, Registry, SessionCmd, Uplink, OUTPUT_BUDGET};
use crate::spawn;

/// Waits between connection attempts: 200 ms doubling to 10 s, up to a quarter longer.
const RECONNECT: Backoff = Backoff { first: Duration::from_millis(200), cap: Duration::from_secs(10) };
/// How long the server has to answer the hello.
const WELCOME_TIMEOUT: Duration = Duration::from_secs(10);
/// Messages queued for the server before senders wait.
const UPLINK_QUEUE: usize = 512;

/// Why one connection ended.
#[derive(Debug, thiserror::Error)]
enum LinkError {
    #[error("cannot connect to {url}: {reason}")]
    Connect { url: String, reason: String },
    #[error("the server refused this device: {0}")]
    Refused(String),
    #[error("the server did not answer the hello")]
    NoWelcome,
    #[error("connection lost: {0}")]
    Lost(String),
}

/// Runs the device daemon until the process ends: re-adopts existing sessions, then
/// keeps a connection to the server.
pub async fn run(config: DeviceConfig) -> std::io::Result<()> {
    let span = tracing::info_span!("device", device = %config.name);
    run_linked(config).instrument(span).await
}

/// [`run`], inside the device's span.
async fn run_linked(config: DeviceConfig) -> std::io::Result<()> {
    std::fs::create_dir_all(config.sessions_dir())?;
    let registry = Registry::new(OUTPUT_BUDGET);
    let preparing: Preparing = Arc::new(Mutex::new(Default::default()));
    adopt_existing(&config, &registry).await;
    // Failed connections in a row; a refusal waits the longest at once.
    let mut failures = 0u32;
    loop {
        let result = connect_once(&config, &registry, &preparing).await;
        config.metrics.link(false);
        match result {
            Ok(()) => failures = 0,
            Err(LinkError::Refused(reason)) => {
                tracing::error!("{}", LinkError::Refused(reason));
                failures = u32::MAX;
            }
            Err(e) => tracing::warn!("{e}; reconnecting"),
        }
        failures = failures.saturating_add(1);
        let draw: f64 = rand::thread_rng().gen();
        tokio::time::sleep(RECONNECT.jittered(failures, Jitter::QuarterLonger, draw)).await;
        config.metrics.reconnecting();
    }
}

/// Finds session directories left by an earlier daemon and re-adopts their shims.
async fn adopt_existing(config: &DeviceConfig, registry: &Registry) {
    let Ok(entries) = std::fs::read_dir(config.sessions_dir()) else { return };
    for entry in entries.flatten() {
        let Some(id) = entry.file_name().to_str().and_then(|n| n.parse::<SessionId>().ok()) else { continue };
        let dir = SessionDir::new(entry.path());
        if !dir.spec().exists() {
            continue;
        }
        let shim = spawn::connect_existing(&dir).await;
        tracing::info!(session = %id, adopted = shim.is_some(), "found session from an earlier run");
        spawn_session(registry.clone(), &config.metrics, id, dir, shim);
    }
}

/// Task runs whose worktree is being checked out, and whether a Stop arrived meanwhile.
/// Task runs whose worktree is being checked out, with what the server asked of them
/// meanwhile.
type Preparing = Arc<Mutex<std::collections::HashMap<SessionId, Pending>>>;

/// What the server asked of a run still being prepared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Pending {
    /// Nothing yet: start it when ready.
    Start,
    /// Stop it once started.
    Stop,
    /// The server gave it up (lost, released): never start it.
    Release,
}

async fn connect_once(config: &DeviceConfig, registry: &Registry, preparing: &Preparing) -> Result<(), LinkError> {
    let url = config.connect_url();
    let mut request = url.as_str().into_client_request().map_err(|e| LinkError::Connect { url: url.clone(), reason: e.to_string() })?;
    let auth = format!("Bearer {}", config.token)
        .parse()
        .map_err(|_| LinkError::Refused("the device token is not a valid header value".into()))?;
    request.headers_mut().insert("authorization", auth);
    let connector = config.tls.clone().map(tokio_tungstenite::Connector::Rustls);
    let (ws, _) = tokio_tungstenite::connect_async_tls_with_config(request, None, true, connector).await.map_err(|e| match e {
        tokio_tungstenite::tungstenite::Error::Http(resp) if resp.status() == 401 || resp.status() == 403 => {
            LinkError::Refused(format!("HTTP {} (is the device token valid?)", resp.status()))
        }
        e => LinkError::Connect { url: url.clone(), reason: drover_tls::explain::tls_problem(&e).unwrap_or_else(|| e.to_string()) },
    })?;
    if let (Some(identity), Some(seen)) = (&config.server_identity, crate::identity::peer_fingerprint(&ws)) {
        identity.check(&seen);
    }
    let (mut sink, mut stream) = ws.split();
    let (up_tx, mut up_rx) = mpsc::channel::<Outgoing>(UPLINK_QUEUE);
    let writer = tokio::spawn(async move {
        // A message's share of the output budget is given back once it is written.
        while let Some(Outgoing { message, held }) = up_rx.recv().await {
            if sink.send(message).await.is_err() {
                return;
            }
            drop(held);
        }
    });
    let result = converse(config, registry, preparing, &up_tx, &mut stream).await;
    writer.abort();
    result
}

type WsStream =
    futures_util::stream::SplitStream<tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>>;

async fn converse(
    config: &DeviceConfig,
    registry: &Registry,
    preparing: &Preparing,
    up: &Uplink,
    stream: &mut WsStream,
) -> Result<(), LinkError> {
    let sessions: Vec<_> = registry.lock().values().map(|h| h.report()).collect();
    let sandbox = Some(crate::confine::offer(config));
    let hello = DeviceMessage::Hello { version: PROTOCOL_VERSION, name: config.name.clone(), slots: config.slots, sessions, sandbox };
    send(up, &hello).await;
    let welcome = tokio::time::timeout(WELCOME_TIMEOUT, stream.next()).await.map_err(|_| LinkError::NoWelcome)?;
    let (resume, release) = match welcome {
        Some(Ok(Message::Text(t))) => match serde_json::from_str::<ServerMessage>(&t) {
            Ok(ServerMessage::Welcome { resume, release, .. }) => (resume, release),
            Ok(ServerMessage::Refused { reason }) => return Err(LinkError::Refused(reason)),
            _ => return Err(LinkError::NoWelcome),
        },
        _ => return Err(LinkError::NoWelcome),
    };
    tracing::info!(server = %config.server_url, sessions = resume.len(), "connected");
    config.metrics.link(true);
    let resumed: HashSet<SessionId> = resume.iter().map(|(s, _)| *s).collect();
    let handles: Vec<_> = registry.lock().iter().map(|(id, h)| (*id, h.clone())).collect();
    for (id, handle) in handles {
        let cmd = match resume.iter().find(|(s, _)| *s == id) {
            Some((_, from)) => SessionCmd::Resume { from: *from, uplink: up.clone() },
            None if release.contains(&id) || !resumed.contains(&id) => SessionCmd::Release,
            None => continue,
        };
        let _ = handle.tx.send(cmd).await;
    }
    let heartbeat = {
        let up = up.clone();
        let every = config.heartbeat;
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.tick().await;
            loop {
                tick.tick().await;
                send(&up, &DeviceMessage::Heartbeat).await;
            }
        })
    };
    let result = loop {
        let msg = match stream.next().await {
            Some(Ok(m)) => m,
            Some(Err(e)) => break Err(LinkError::Lost(e.to_string())),
            None => break Err(LinkError::Lost("the server closed the connection".into())),
        };
        match msg {
            Message::Text(t) => match serde_json::from_str::<ServerMessage>(&t) {
                Ok(m) => dispatch(config, registry, preparing, up, m).await,
                Err(e) => tracing::warn!("undecodable message from the server: {e}"),
            },
            Message::Binary(b) => match DeviceBinary::decode(&b) {
                Ok(DeviceBinary::Input { session, data }) => {
                    if let Some(h) = handle(registry, session) {
                        let _ = h.tx.send(SessionCmd::Input(data)).await;
                    }
                }
                Ok(_) | Err(_) => tracing::warn!("unexpected binary frame from the server"),
            },
            Message::Close(_) => break Err(LinkError::Lost("the server closed the connection".into())),
            _ => {}
        }
    };
    heartbeat.abort();
    result
}

fn handle(registry: &Registry, id: SessionId) -> Option<crate::session::SessionHandle> {
    registry.lock().get(&id).cloned()
}

async fn send(up: &Uplink, msg: &DeviceMessage) {
    let _ = up.send(Message::Text(serde_json::to_string(msg).expect("serialises").into()).into()).await;
}

async fn dispatch(config: &DeviceConfig, registry: &Registry, preparing: &Preparing, up: &Uplink, msg: ServerMessage) {
    if let Some((session, cmd)) = route(config, registry, preparing, up, msg).await {
        to_session(registry, preparing, up, session, cmd).await;
    }
}

/// Carries out a message for the device itself; one for a session comes back as the
/// session's command.
async fn route(
    config: &DeviceConfig,
    registry: &Registry,
    preparing: &Preparing,
    up: &Uplink,
    msg: ServerMessage,
) -> Option<(SessionId, SessionCmd)> {
    match msg {
        ServerMessage::Start { spec, worktree: Some(worktree), skills } => {
            start_in_background(config, registry, preparing, up, *spec, worktree, skills);
            None
        }
        ServerMessage::Start { spec, worktree: None, skills } => {
            start_session(config, registry, up, *spec, None, skills, || false).await;
            None
        }
        ServerMessage::RemoveWorktree { worktree, force } => {
            remove_worktree(config, worktree, force).await;
            None
        }
        ServerMessage::Merge { req, worktree, message } => {
            let (root, up) = (config.worktrees_dir(), up.clone());
            tokio::spawn(
                async move {
                    let result = tokio::task::spawn_blocking(move || crate::merge::merge(&root, &worktree, &message))
                        .await
                        .unwrap_or_else(|e| MergeResult::Refused { reason: format!("the merge stopped unexpectedly: {e}") });
                    send(&up, &DeviceMessage::Merged { req, result }).await;
                }
                .in_current_span(),
            );
            None
        }
        ServerMessage::Prepare { sandbox, worktree, skills } => {
            let (config, up) = (config.clone(), up.clone());
            tokio::spawn(
                async move {
                    let problem = prepare_sandbox(&config, worktree, skills).await.err();
                    send(&up, &DeviceMessage::Prepared { sandbox, problem }).await;
                }
                .in_current_span(),
            );
            None
        }
        ServerMessage::CheckRepo { req, path, base } => {
            check_repo_in_background(up, req, path, base);
            None
        }
        ServerMessage::Prices { overrides } => {
            crate::usage::set_prices(drover_core::spend::PriceTable { overrides });
            None
        }
        ServerMessage::SendText { session, req, text } => Some((session, SessionCmd::Shim(ShimRequest::SendText { req, text }))),
        ServerMessage::Resize { session, cols, rows } => Some((session, SessionCmd::Shim(ShimRequest::Resize { cols, rows }))),
        ServerMessage::Stop { session, grace_ms } => Some((session, SessionCmd::Shim(ShimRequest::Stop { grace_ms }))),
        ServerMessage::Snapshot { session, req, first } => Some((session, SessionCmd::Shim(ShimRequest::Snapshot { req, first }))),
        ServerMessage::Viewers { session, interactive } => Some((session, SessionCmd::Shim(ShimRequest::Viewers { interactive }))),
        ServerMessage::Release { session } => Some((session, SessionCmd::Release)),
        ServerMessage::Ack { .. } | ServerMessage::Welcome { .. } | ServerMessage::Refused { .. } => None,
    }
}

/// Starts a task's run whose worktree is checked out first. A checkout can take
/// seconds: it runs on its own so every other session's input, stops and snapshots go
/// on; a Stop for the run meanwhile is kept.
fn start_in_background(
    config: &DeviceConfig,
    registry: &Registry,
    preparing: &Preparing,
    up: &Uplink,
    spec: SessionSpec,
    worktree: Worktree,
    skills: Vec<drover_protocol::device::SkillBundle>,
) {
    let id = spec.session;
    preparing.lock().expect("preparing lock").insert(id, Pending::Start);
    let (config, registry, preparing, up) = (config.clone(), registry.clone(), preparing.clone(), up.clone());
    tokio::spawn(
        async move {
            let released = || preparing.lock().expect("preparing lock").get(&id) == Some(&Pending::Release);
            start_session(&config, &registry, &up, spec, Some(worktree), skills, released).await;
            let stop = preparing.lock().expect("preparing lock").remove(&id) == Some(Pending::Stop);
            if let (true, Some(h)) = (stop, handle(&registry, id)) {
                let _ = h.tx.send(SessionCmd::Shim(ShimRequest::Stop { grace_ms: 2000 })).await;
            }
        }
        .in_current_span(),
    );
}

/// Removes a task's worktree (kept when it holds work and `force` is not set).
async fn remove_worktree(config: &DeviceConfig, worktree: Worktree, force: bool) {
    let root = config.worktrees_dir();
    let w = worktree.clone();
    match tokio::task::spawn_blocking(move || crate::worktree::remove(&root, &w, force)).await {
        Ok(Ok(())) => tracing::info!(dir = %worktree.dir, "worktree removed"),
        Ok(Err(e)) => tracing::warn!(dir = %worktree.dir, "worktree kept: {e}"),
        Err(e) => tracing::warn!("removing a worktree: {e}"),
    }
}

/// Checks a clone the server wants to register, and answers with what is wrong.
fn check_repo_in_background(up: &Uplink, req: u64, path: String, base: Option<String>) {
    let up = up.clone();
    tokio::spawn(
        async move {
            let checked =
                tokio::task::spawn_blocking(move || crate::worktree::check_clone(std::path::Path::new(&path), base.as_deref())).await;
            let problem = match checked {
                Ok(Ok(())) => None,
                Ok(Err(e)) => Some(e.to_string()),
                Err(e) => Some(format!("the check stopped unexpectedly: {e}")),
            };
            send(&up, &DeviceMessage::RepoChecked { req, problem }).await;
        }
        .in_current_span(),
    );
}

/// Hands a command to its session, or says why it cannot be: the session is still
/// being prepared (a Stop or Release is kept for when it starts) or is not here.
async fn to_session(registry: &Registry, preparing: &Preparing, up: &Uplink, session: SessionId, cmd: SessionCmd) {
    match handle(registry, session) {
        Some(h) => {
            let _ = h.tx.send(cmd).await;
        }
        None if preparing.lock().expect("preparing lock").contains_key(&session) => {
            let req = match cmd {
                SessionCmd::Shim(ShimRequest::Stop { .. }) => {
                    let mut preparing = preparing.lock().expect("preparing lock");
                    preparing.entry(session).and_modify(|p| *p = (*p).max(Pending::Stop));
                    return;
                }
                SessionCmd::Release => {
                    preparing.lock().expect("preparing lock").insert(session, Pending::Release);
                    return;
                }
                SessionCmd::Shim(ShimRequest::SendText { req, .. }) => Some(req),
                _ => return,
            };
            let reason = format!("session {session} is still starting (its worktree is being checked out)");
            send(up, &DeviceMessage::Failed { session, req, reason }).await;
        }
        None => {
            let req = match cmd {
                SessionCmd::Shim(ShimRequest::SendText { req, .. }) => Some(req),
                _ => None,
            };
            let reason = format!("session {session} is not on this device");
            send(up, &DeviceMessage::Failed { session, req, reason }).await;
        }
    }
}

/// A task's sandbox set up: its worktree (made or reused), the worktree's git
/// directories, and what placing the skills did (None without skills).
type Prepared = (std::path::PathBuf, crate::worktree::GitDirs, Option<Vec<drover_protocol::device::SkillReport>>);

/// Makes (or reuses) the task's worktree and places the workspace's skills in it.
async fn prepare_sandbox(
    config: &DeviceConfig,
    w: Worktree,
    skills: Vec<drover_protocol::device::SkillBundle>,
) -> Result<Prepared, String> {
    let root = config.worktrees_dir();
    let prepared = tokio::task::spawn_blocking(move || {
        let path = crate::worktree::ensure(&root, &w)?;
        let dirs = crate::worktree::git_dirs(std::path::Path::new(&w.repo_path), &path)?;
        Ok::<_, crate::worktree::WorktreeError>((path, dirs))
    });
    let (path, dirs) = match prepared.await {
        Ok(Ok(p)) => p,
        Ok(Err(e)) => return Err(e.to_string()),
        Err(e) => return Err(e.to_string()),
    };
    let report = match skills.is_empty() {
        true => None,
        false => {
            let sandbox = path.clone();
            Some(tokio::task::spawn_blocking(move || crate::skills::install(&sandbox, &skills)).await.unwrap_or_default())
        }
    };
    Ok((path, dirs, report))
}

/// Prepares and starts a run; `released` says whether the server gave it up meanwhile
/// (it is then never started).
#[tracing::instrument(name = "session", skip_all, fields(session = %spec.session))]
async fn start_session(
    config: &DeviceConfig,
    registry: &Registry,
    up: &Uplink,
    mut spec: SessionSpec,
    worktree: Option<Worktree>,
    skills: Vec<drover_protocol::device::SkillBundle>,
    released: impl Fn() -> bool,
) {
    let id = spec.session;
    if handle(registry, id).is_some() {
        return;
    }
    let mut git_dirs = None;
    if let Some(w) = worktree {
        // The agent is told to run `drover task …`: this device's drover is on its PATH.
        if let Some(bin_dir) = config.shim_exe.parent() {
            let inherited = spec.env.iter().find(|(k, _)| k == "PATH").map(|(_, v)| v.clone()).or_else(|| std::env::var("PATH").ok());
            let path = match inherited {
                Some(p) if !p.is_empty() => format!("{}:{p}", bin_dir.display()),
                _ => bin_dir.display().to_string(),
            };
            spec.env.retain(|(k, _)| k != "PATH");
            spec.env.push(("PATH".into(), path));
        }
        match prepare_sandbox(config, w, skills).await {
            Ok((path, dirs, report)) => {
                git_dirs = Some(dirs);
                spec.cwd = path.display().to_string();
                if let Some(report) = report {
                    send(up, &DeviceMessage::Skills { session: id, skills: report }).await;
                }
            }
            Err(e) => {
                config.metrics.sandbox_failed(SandboxFailure::Worktree);
                return start_failed(up, id, format!("the device could not prepare the sandbox: {e}")).await;
            }
        }
    }
    if released() {
        tracing::info!(session = %id, "not started: the server gave the run up while it was being prepared");
        return;
    }
    let dir = SessionDir::new(config.sessions_dir().join(id.to_string()));
    match prepare_and_start(config, &dir, spec, git_dirs).await {
        Ok(stream) => {
            tracing::info!("run started");
            let h = spawn_session(registry.clone(), &config.metrics, id, dir, Some(stream));
            let _ = h.tx.send(SessionCmd::Resume { from: 0, uplink: up.clone() }).await;
        }
        Err(e) => {
            start_failed(up, id, format!("the device could not start the session: {e}")).await;
            let _ = std::fs::remove_dir_all(dir.root());
        }
    }
}

async fn start_failed(up: &Uplink, id: drover_core::SessionId, reason: String) {
    let end = drover_core::RunEnd::StartFailed { reason };
    let ended_at = chrono::Utc::now().to_rfc3339();
    send(up, &DeviceMessage::Ended { session: id, end, started_at: None, ended_at, final_offset: 0 }).await;
}

async fn prepare_and_start(
    config: &DeviceConfig,
    dir: &SessionDir,
    mut spec: SessionSpec,
    git_dirs: Option<crate::worktree::GitDirs>,
) -> std::io::Result<tokio::net::UnixStream> {
    drover_term::dir::create_private_dir(dir.root())?;
    drover_term::dir::create_private_dir(&dir.tmp())?;
    let offer = crate::confine::offer(config);
    crate::confine::prepare(config, &offer, &mut spec, &dir.tmp(), git_dirs.as_ref()).map_err(|e| {
        config.metrics.sandbox_failed(SandboxFailure::Confinement);
        std::io::Error::other(e)
    })?;
    spec.link_secret = Some(spawn::link_secret());
    let spec = &spec;
    if let Some(dirs) = &git_dirs {
        let json = serde_json::to_vec(dirs).expect("git directories serialise");
        drover_term::dir::write_atomic(&dir.root().join(crate::evidence::GIT_DIRS), &json)?;
    }
    // A task run's worktree HEAD before it starts: later commits are its progress.
    if let Some((head, _)) = crate::evidence::worktree_head(&spec.cwd, git_dirs.as_ref()) {
        drover_term::dir::write_atomic(&dir.root().join(crate::evidence::BASE_HEAD), head.as_bytes())?;
    }
    drover_term::dir::write_atomic(&dir.spec(), &serde_json::to_vec_pretty(spec).expect("spec serialises"))?;
    let (launcher, shim_dir) = (config.launcher.clone(), dir.clone());
    tokio::task::spawn_blocking(move || launcher.start_shim(&shim_dir)).await.map_err(std::io::Error::other)??;
    spawn::connect_new(dir).await
}

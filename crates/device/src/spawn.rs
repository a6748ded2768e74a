//! Starting a shim as a process of its own session (so it outlives the daemon) and
//! connecting to its socket.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use drover_protocol::frame::write_frame;
use drover_protocol::shim::{SessionSpec, ShimFrame, ShimRequest};
use drover_term::dir::SessionDir;
use tokio::net::UnixStream;

/// How long a new shim has to open its socket.
const SHIM_READY: Duration = Duration::from_secs(10);

/// The shim's allocator settings: jemalloc (the `drover` binary's allocator) reads them
/// as it starts, and any other allocator ignores them. A shim is one thread that is idle
/// most of its life, so one arena, no per-thread cache, and freed pages handed back at
/// once: an idle session's shim then costs less than under glibc's allocator (figures in
/// the README's benchmark section). The run never sees them: its environment is exactly
/// the one its spec gives.
const SHIM_MALLOC_CONF: &str = "narenas:1,tcache:false,dirty_decay_ms:0,muzzy_decay_ms:0";

/// Starts `<exe> shim <dir>` detached: its own session, no terminal, log to `shim.log`.
/// Must be called within the tokio runtime, which reaps the shim if it ends while this
/// daemon lives (its one SIGCHLD handler for every shim, not a thread each); if the
/// daemon dies first, init does.
pub fn start_shim(exe: &Path, dir: &SessionDir) -> std::io::Result<()> {
    let log = std::fs::OpenOptions::new().create(true).append(true).open(dir.log())?;
    let mut cmd = tokio::process::Command::new(exe);
    cmd.arg("shim").arg(dir.root()).env("MALLOC_CONF", SHIM_MALLOC_CONF);
    cmd.stdin(Stdio::null()).stdout(log.try_clone()?).stderr(log).kill_on_drop(false);
    // SAFETY: setsid is async-signal-safe and touches no memory of the parent.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setsid() == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    // Dropped unawaited: the runtime reaps it in the background when it exits.
    drop(cmd.spawn()?);
    Ok(())
}

/// Connects to a shim's socket, waiting up to [`SHIM_READY`] for it to appear.
pub async fn connect_new(dir: &SessionDir) -> std::io::Result<UnixStream> {
    let deadline = Instant::now() + SHIM_READY;
    loop {
        match UnixStream::connect(dir.socket()).await {
            Ok(s) => return authenticate(dir, s).await,
            Err(e) if Instant::now() >= deadline => return Err(e),
            Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
}

/// Connects to the socket of a shim that should already be running.
pub async fn connect_existing(dir: &SessionDir) -> Option<UnixStream> {
    authenticate(dir, UnixStream::connect(dir.socket()).await.ok()?).await.ok()
}

/// A new random link secret for a session's `spec.json`.
pub fn link_secret() -> String {
    use rand::distributions::Alphanumeric;
    use rand::Rng;
    rand::thread_rng().sample_iter(&Alphanumeric).take(32).map(char::from).collect()
}

/// Presents the session's link secret (from its `spec.json`, which only the device's
/// user outside any run can read) as the connection's first frame.
async fn authenticate(dir: &SessionDir, mut stream: UnixStream) -> std::io::Result<UnixStream> {
    let spec: Option<SessionSpec> = std::fs::read(dir.spec()).ok().and_then(|b| serde_json::from_slice(&b).ok());
    if let Some(secret) = spec.and_then(|s| s.link_secret) {
        let frame = ShimFrame::Request(ShimRequest::Authenticate { secret }).encode();
        write_frame(&mut stream, &[&frame]).await.map_err(std::io::Error::other)?;
    }
    Ok(stream)
}

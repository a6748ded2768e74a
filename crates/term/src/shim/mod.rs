//! The shim: one process per session that owns the PTY, records every byte before anyone
//! sees it, keeps the screen state beside the stream and serves the device daemon over a
//! unix socket. It runs in its own session (setsid), so killing or upgrading the device
//! daemon does not stop the program; a restarted daemon reconnects to the socket.
//!
//! Lifecycle: read `spec.json` → bind `shim.sock` → start the program → serve → on exit
//! write `exit.json` → linger until the device releases it (or no device has been
//! connected for [`LINGER`]) → remove the socket and exit. Everything a later daemon
//! needs is in the session directory, so a shim that is gone loses nothing.

mod child;
mod link;
mod output;
mod state;
mod terminal;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use drover_protocol::shim::{SessionSpec, ShimExit};
use tokio::net::UnixListener;

use crate::dir::SessionDir;
use crate::screen::{Screen, StreamProgress};
pub use state::Shared;

/// How long a finished shim waits for a device to collect its end before exiting.
pub const LINGER: Duration = Duration::from_secs(10);

/// How long the shim keeps killing a program it cannot serve before it gives up.
const ABANDON: Duration = Duration::from_secs(10);
/// Milliseconds a session's screen stays unchanged and unread before it is packed, if
/// not [`crate::screen::QUIET`] (for tests that want every pause to pack it).
pub const QUIET_VAR: &str = "DROVER_SCREEN_QUIET_MS";

/// Why the shim could not run at all.
#[derive(Debug, thiserror::Error)]
pub enum ShimError {
    /// `spec.json` is missing or invalid.
    #[error("cannot read the session spec {path}: {reason}")]
    Spec {
        /// The file.
        path: String,
        /// What failed.
        reason: String,
    },
    /// Another shim already serves the session.
    #[error("another shim already serves the session in {0}")]
    Busy(String),
    /// The socket or recording could not be created.
    #[error("cannot set up the session directory: {0}")]
    Io(#[from] std::io::Error),
}

/// Runs the shim for the session in `dir` until it is done. Blocks; builds its own runtime.
pub fn run(dir: SessionDir) -> Result<(), ShimError> {
    let spec = read_spec(&dir)?;
    // Held until this process ends: a second shim for the session starts nothing.
    let _serving = serve_alone(&dir)?;
    // Whatever the run starts stays beneath the shim, however it detaches.
    crate::tree::become_subreaper()?;
    // The program starts before anything else is built. In its own PID namespace its
    // init is a fork of this process and keeps its own copy of every page this process
    // writes afterwards, so the less there is now (no runtime, screen or buffers yet),
    // the less an idle session's init holds.
    let started = (Instant::now(), chrono::Utc::now());
    let mut env = spec.env.clone();
    env.push(("DROVER_SESSION".into(), spec.session.to_string()));
    let program = start_program(&spec, &env);
    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            abandon(program.ok());
            return Err(e.into());
        }
    };
    rt.block_on(serve(dir, spec, started, program))
}

/// Ends a program the shim cannot serve (its session directory could not be set up),
/// with its process group and everything else beneath the shim, detached or not.
fn abandon(program: Option<crate::pty::Spawned>) {
    let Some(p) = program else { return };
    let pid = nix::unistd::Pid::from_raw(p.pid as i32);
    let _ = nix::sys::signal::killpg(pid, nix::sys::signal::Signal::SIGKILL);
    crate::tree::end_all(std::process::id(), ABANDON);
}

/// Locks the session's `shim.lock` for this shim, or says another holds it. The lock is
/// the kernel's (flock), so a shim that dies lets it go.
fn serve_alone(dir: &SessionDir) -> Result<std::fs::File, ShimError> {
    use std::os::fd::AsRawFd;
    let lock = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(dir.shim_lock())?;
    // SAFETY: flock(2) on a descriptor this function owns.
    if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == -1 {
        let e = std::io::Error::last_os_error();
        return Err(match e.raw_os_error() {
            Some(libc::EWOULDBLOCK) => ShimError::Busy(dir.root().display().to_string()),
            _ => ShimError::Io(e),
        });
    }
    Ok(lock)
}

fn read_spec(dir: &SessionDir) -> Result<SessionSpec, ShimError> {
    let path = dir.spec();
    let bytes = std::fs::read(&path).map_err(|e| ShimError::Spec { path: path.display().to_string(), reason: e.to_string() })?;
    serde_json::from_slice(&bytes).map_err(|e| ShimError::Spec { path: path.display().to_string(), reason: e.to_string() })
}

/// Serves the session whose program was started at `started` (monotonic and wall clock),
/// or could not be.
async fn serve(
    dir: SessionDir,
    spec: SessionSpec,
    started: (Instant, chrono::DateTime<chrono::Utc>),
    program: Result<crate::pty::Spawned, String>,
) -> Result<(), ShimError> {
    let SetUp { listener, recording, recorded, progress, screen } = match set_up(&dir, &spec) {
        Ok(set) => set,
        Err(e) => {
            abandon(program.ok());
            return Err(e);
        }
    };
    let shared = Arc::new(Shared::new(spec, dir.clone(), started, (recorded, progress), screen));
    match program {
        Ok(spawned) => {
            let _ = std::fs::write(dir.child_pid(), spawned.pid.to_string());
            child::start(shared.clone(), spawned, recording);
        }
        Err(e) => {
            let exit = ShimExit {
                status: None,
                start_error: Some(e),
                stop_requested: false,
                ended_at: chrono::Utc::now().to_rfc3339(),
                final_offset: 0,
            };
            let _ = dir.write_exit(&exit);
            shared.set_exit(exit);
        }
    }

    let accept = {
        let shared = shared.clone();
        tokio::spawn(async move {
            loop {
                match listener.accept().await {
                    Ok((stream, _)) => match peer_refusal(&stream) {
                        None => link::serve_client(shared.clone(), stream),
                        Some(why) => tracing::warn!("refused a connection to the shim's socket: {why}"),
                    },
                    Err(e) => tracing::warn!("accept failed: {e}"),
                }
            }
        })
    };
    linger(&shared).await;
    accept.abort();
    let _ = std::fs::remove_file(dir.socket());
    Ok(())
}

/// What serving the session takes.
struct SetUp {
    /// Its socket (its pid file beside it).
    listener: UnixListener,
    /// Its recording, written.
    recording: crate::recording::RecordingWriter,
    /// The same, read back.
    recorded: crate::recording::RecordingReader,
    /// How far the recording has come, for the screen.
    progress: Arc<StreamProgress>,
    /// The screen that follows the recording.
    screen: Screen,
}

/// Sets up what serving the session takes (see [`SetUp`]).
fn set_up(dir: &SessionDir, spec: &SessionSpec) -> Result<SetUp, ShimError> {
    let _ = std::fs::remove_file(dir.socket());
    let listener = UnixListener::bind(dir.socket())?;
    std::fs::write(dir.shim_pid(), std::process::id().to_string())?;
    let recording = crate::recording::RecordingWriter::open(&dir.output(), &dir.index())?;
    let recorded = crate::recording::RecordingReader::open(&dir.output(), &dir.index())?;
    let progress = Arc::new(StreamProgress::default());
    let quiet = std::env::var(QUIET_VAR).ok().and_then(|ms| ms.parse().ok()).map_or(crate::screen::QUIET, Duration::from_millis);
    let screen = Screen::start_packing_after(dir.output(), dir.index(), spec.cols, spec.rows, progress.clone(), quiet)?;
    Ok(SetUp { listener, recording, recorded, progress, screen })
}

/// Starts the program in its PTY, inside the sandbox its spec asks for (the device
/// decided it); the error is the session's reason.
fn start_program(spec: &SessionSpec, env: &[(String, String)]) -> Result<crate::pty::Spawned, String> {
    let launch = crate::pty::Launch {
        command: &spec.command,
        cwd: std::path::Path::new(&spec.cwd),
        env,
        cols: spec.cols,
        rows: spec.rows,
        confine: spec.policy.as_ref(),
    };
    crate::pty::spawn(&launch).map_err(|e| e.to_string())
}

/// Why a process that connected to the shim's socket is turned away: only the device's
/// own user, and never a process of the run itself (it would type into, read or stop its
/// own session past every check the server makes).
fn peer_refusal(stream: &tokio::net::UnixStream) -> Option<String> {
    let cred = match stream.peer_cred() {
        Ok(c) => c,
        Err(e) => return Some(format!("its credentials could not be read: {e}")),
    };
    let me = nix::unistd::getuid().as_raw();
    if cred.uid() != me {
        return Some(format!("uid {} is not the device's user ({me})", cred.uid()));
    }
    match cred.pid() {
        Some(pid) if pid > 0 && crate::tree::is_beneath(pid as u32, std::process::id()) => {
            Some(format!("process {pid} belongs to the run"))
        }
        _ => None,
    }
}

/// Waits until the program has ended and the device released the shim, or no device
/// has been connected for [`LINGER`] since the end.
async fn linger(shared: &Shared) {
    // Until the end, woken by what changes (the end is one), not by a timer: an idle
    // session's shim then sleeps.
    let mut changed = shared.changed.subscribe();
    while shared.exit().is_none() {
        if changed.changed().await.is_err() {
            break;
        }
    }
    let mut since_idle: Option<Instant> = None;
    loop {
        tokio::select! {
            _ = shared.released.notified() => {
                if shared.exit().is_some() {
                    owed_ends(shared).await;
                    return;
                }
            }
            _ = tokio::time::sleep(Duration::from_millis(200)) => {}
        }
        if shared.exit().is_none() {
            continue;
        }
        if shared.clients.load(Ordering::Acquire) > 0 {
            since_idle = None;
            continue;
        }
        let idle = *since_idle.get_or_insert_with(Instant::now);
        if idle.elapsed() >= LINGER {
            return;
        }
    }
}

/// Once released, waits (for at most [`LINGER`]) until every connection that follows the
/// output has been sent all of it and its end: a viewer that reads more slowly than the
/// device gets the tail it is still owed, not a closed socket.
async fn owed_ends(shared: &Shared) {
    let until = Instant::now() + LINGER;
    while shared.following.load(Ordering::Acquire) > 0 && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_shim_for_a_session_starts_nothing() {
        let root = tempfile::tempdir().unwrap();
        let dir = SessionDir::new(root.path().to_path_buf());
        let marker = root.path().join("started");
        let spec = serde_json::json!({
            "session": "ses_0123456789abcdef0123456789abcdef",
            "command": ["sh", "-c", format!("touch '{}'", marker.display())],
            "cwd": root.path(),
            "env": [["PATH", "/usr/bin:/bin"]],
            "cols": 80,
            "rows": 24,
        });
        std::fs::write(dir.spec(), serde_json::to_vec(&spec).unwrap()).unwrap();
        let _first = serve_alone(&dir).expect("the first shim's lock");
        match run(dir.clone()) {
            Err(ShimError::Busy(_)) => {}
            other => panic!("a second shim ran: {other:?}"),
        }
        std::thread::sleep(Duration::from_millis(200));
        assert!(!marker.exists(), "the second shim started the program");
    }
}

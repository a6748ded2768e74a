//! The shim launcher: one small process per device daemon (`drover shim-launcher`) from
//! which every session's shim is forked rather than exec'd.
//!
//! An exec'd `drover` relocates its executable's read-only-after-relocation data at
//! start, and those pages are then private to each process: most of what an idle
//! session's shim used to cost. Forked from one launcher, every shim shares the
//! launcher's relocated pages instead (figures in the README's benchmark section). The
//! launcher is exec'd with the shim's allocator settings, which its forks keep.
//!
//! The daemon holds one end of a socket pair, the launcher's standard input the other.
//! A request is a session directory (a little-endian `u32` length, then the path's
//! bytes); the answer is a little-endian `i32`: the new shim's process id, or a negated
//! `errno` when it could not be started. The launcher ends when the daemon's end closes
//! (the daemon ended), and its shims live on: each is in a session of its own.

use std::io::{Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use drover_term::dir::SessionDir;

/// The launcher's allocator settings, which every shim forked from it keeps: jemalloc
/// (the `drover` binary's allocator) reads them as it starts, and any other allocator
/// ignores them. A shim is one thread that is idle most of its life, so one arena, no
/// per-thread cache, and freed pages handed back at once (figures in the README's
/// benchmark section) except while its session prints (`drover_term::heap`). A run
/// never sees them: its environment is exactly its spec's.
const SHIM_MALLOC_CONF: &str = "narenas:1,tcache:false,dirty_decay_ms:0,muzzy_decay_ms:0";

/// The hidden subcommand that runs [`serve`].
pub const SUBCOMMAND: &str = "shim-launcher";

/// The longest session directory path a request may carry.
const MAX_PATH: usize = 4096;

/// How long the daemon waits for the launcher's answer before starting another.
const ANSWER: Duration = Duration::from_secs(10);

/// The daemon's handle on its launcher, started on the first shim and again whenever
/// the one before is gone. Clones share the launcher.
#[derive(Clone)]
pub struct ShimLauncher {
    exe: PathBuf,
    running: Arc<Mutex<Option<Running>>>,
}

/// A launcher this daemon started: its socket and its process. Held (never waited on)
/// while it is in use, so it stays unreaped if it ends and its pid cannot be reused
/// before a kill; dropped, the runtime reaps it in the background.
struct Running {
    link: UnixStream,
    process: tokio::process::Child,
}

/// Why a request failed: before the launcher took it (another launcher may be asked),
/// or after (it may yet fork a shim for it).
enum Failed {
    Unsent(std::io::Error),
    Unanswered(std::io::Error),
}

impl ShimLauncher {
    /// A launcher that runs `exe shim-launcher` (the `drover` binary) when first needed.
    pub fn new(exe: PathBuf) -> ShimLauncher {
        ShimLauncher { exe, running: Arc::new(Mutex::new(None)) }
    }

    /// Starts the shim of the session in `dir` (its `spec.json` written), returning its
    /// process id. Blocks for the fork; must be called within the tokio runtime, which
    /// reaps a launcher that ends while this daemon lives.
    ///
    /// A launcher found gone before it took the request is replaced and asked again. One
    /// that took it and gave no answer is killed, so that it cannot fork a second shim
    /// for a session whose start is reported failed, and the start fails.
    pub fn start_shim(&self, dir: &SessionDir) -> std::io::Result<u32> {
        let path = dir.root().as_os_str().as_bytes();
        if path.len() > MAX_PATH {
            return Err(std::io::Error::from_raw_os_error(libc::ENAMETOOLONG));
        }
        let mut running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        let mut retried = false;
        loop {
            let launcher = match running.as_mut() {
                Some(launcher) => launcher,
                None => running.insert(self.spawn()?),
            };
            match ask(&mut launcher.link, path) {
                Ok(pid) if pid > 0 => return Ok(pid as u32),
                Ok(errno) => return Err(std::io::Error::from_raw_os_error(-errno)),
                Err(Failed::Unsent(e)) if !retried => {
                    tracing::warn!("the shim launcher is gone ({e}); starting another");
                    *running = None;
                    retried = true;
                }
                Err(Failed::Unsent(e)) => {
                    *running = None;
                    return Err(e);
                }
                Err(Failed::Unanswered(e)) => {
                    let _ = launcher.process.start_kill();
                    *running = None;
                    return Err(std::io::Error::new(e.kind(), format!("the shim launcher did not answer: {e}")));
                }
            }
        }
    }

    /// Starts `exe shim-launcher` in a session of its own (a terminal's Ctrl-C is not
    /// for it) with the socket pair's other end as its standard input.
    fn spawn(&self) -> std::io::Result<Running> {
        let (ours, theirs) = UnixStream::pair()?;
        ours.set_read_timeout(Some(ANSWER))?;
        let mut cmd = tokio::process::Command::new(&self.exe);
        cmd.arg(SUBCOMMAND).env("MALLOC_CONF", SHIM_MALLOC_CONF);
        cmd.stdin(Stdio::from(OwnedFd::from(theirs))).stdout(Stdio::null()).kill_on_drop(false);
        // SAFETY: setsid is async-signal-safe and touches no memory of the parent.
        unsafe {
            cmd.pre_exec(|| {
                if libc::setsid() == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        Ok(Running { link: ours, process: cmd.spawn()? })
    }
}

/// One request and its answer.
fn ask(link: &mut UnixStream, path: &[u8]) -> Result<i32, Failed> {
    let mut request = (path.len() as u32).to_le_bytes().to_vec();
    request.extend_from_slice(path);
    link.write_all(&request).map_err(Failed::Unsent)?;
    let mut answer = [0u8; 4];
    link.read_exact(&mut answer).map_err(Failed::Unanswered)?;
    Ok(i32::from_le_bytes(answer))
}

/// The launcher: answers the daemon's requests on standard input until it closes. Must
/// be called while the process has one thread (before any runtime), as the forks are
/// of it.
pub fn serve() -> std::io::Result<()> {
    // Its shims are reaped as they end: the launcher never waits for them.
    // SAFETY: setting a signal's disposition; no handler runs.
    unsafe { libc::signal(libc::SIGCHLD, libc::SIG_IGN) };
    // SAFETY: standard input is the daemon's socket, and nothing else owns it.
    let mut link = unsafe { UnixStream::from_raw_fd(0) };
    loop {
        let mut len = [0u8; 4];
        match link.read_exact(&mut len) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
            Err(e) => return Err(e),
        }
        let len = u32::from_le_bytes(len) as usize;
        if len > MAX_PATH {
            return Err(std::io::Error::other(format!("a request of {len} bytes: not a session directory")));
        }
        let mut path = vec![0u8; len];
        link.read_exact(&mut path)?;
        let dir = SessionDir::new(PathBuf::from(std::ffi::OsStr::from_bytes(&path)));
        let answer = match launch(&dir) {
            Ok(pid) => pid,
            Err(e) => -e.raw_os_error().unwrap_or(libc::EIO),
        };
        link.write_all(&answer.to_le_bytes())?;
    }
}

/// Forks the shim of `dir`: its output to the session's `shim.log`, no terminal.
fn launch(dir: &SessionDir) -> std::io::Result<i32> {
    let log = std::fs::OpenOptions::new().create(true).append(true).open(dir.log())?;
    let null = std::fs::File::open("/dev/null")?;
    // SAFETY: this process has one thread, so the child is a whole copy of it.
    match unsafe { libc::fork() } {
        -1 => Err(std::io::Error::last_os_error()),
        0 => shim(dir, &log, &null),
        pid => Ok(pid),
    }
}

/// The forked child: becomes the shim and never returns.
fn shim(dir: &SessionDir, log: &std::fs::File, null: &std::fs::File) -> ! {
    use std::os::fd::AsRawFd;
    // SAFETY: plain system calls on descriptors this process owns; the child has one
    // thread. Standard input (the daemon's socket) is replaced.
    let ready = unsafe {
        libc::signal(libc::SIGCHLD, libc::SIG_DFL);
        libc::prctl(libc::PR_SET_NAME, c"drover-shim".as_ptr());
        libc::setsid() != -1
            && libc::dup2(null.as_raw_fd(), 0) != -1
            && libc::dup2(log.as_raw_fd(), 1) != -1
            && libc::dup2(log.as_raw_fd(), 2) != -1
    };
    if !ready {
        eprintln!("drover shim: cannot set up its process: {}", std::io::Error::last_os_error());
        std::process::exit(1);
    }
    // Past standard error, nothing of the launcher's is the shim's (the log and /dev/null
    // after their copies). Every such descriptor is close-on-exec too, so where the call
    // is missing (Linux before 5.9) no run gets one.
    // SAFETY: closes descriptors no one else in this process uses.
    unsafe { libc::close_range(3, libc::c_uint::MAX, 0) };
    let code = match drover_term::shim::run(dir.clone()) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("drover shim: {e}");
            1
        }
    };
    std::process::exit(code)
}

//! Starting a program in a pseudo-terminal, as the leader of its own session and process
//! group (so Stop can signal the whole group), with no shell in between, with exactly
//! the environment it is given and, when asked, inside the sandbox ([`crate::confine`])
//! and what holds its processes together ([`crate::contain`]), entered in the child
//! between clone and exec ([`crate::exec`]).

use std::fs::File;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use drover_core::confinement::{Access, Grant, Policy};

/// Why a program could not be started. The text is what the session's Reason shows.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    /// No command given.
    #[error("no command given")]
    NoCommand,
    /// The program is not on PATH / does not exist.
    #[error("command not found: {0}")]
    NotFound(String),
    /// The program exists but cannot be executed.
    #[error("{0} is not executable")]
    NotExecutable(String),
    /// The working directory is missing.
    #[error("working directory {0} does not exist or is not a directory")]
    BadCwd(String),
    /// The PTY could not be opened or the process not spawned.
    #[error("{0}")]
    Pty(String),
}

/// The master side of a PTY: resizing.
#[derive(Debug)]
pub struct Master(OwnedFd);

impl Master {
    /// Resizes the terminal (the kernel sends SIGWINCH to the foreground group).
    pub fn resize(&self, cols: u16, rows: u16) -> std::io::Result<()> {
        let ws = libc::winsize { ws_row: rows, ws_col: cols, ws_xpixel: 0, ws_ypixel: 0 };
        // SAFETY: TIOCSWINSZ reads one winsize from a valid pointer; the fd is open.
        if unsafe { libc::ioctl(self.0.as_raw_fd(), libc::TIOCSWINSZ, &ws) } == -1 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }
}

/// A running program and the master side of its PTY.
pub struct Spawned {
    /// The process the shim waits for, which leads the terminal's session and process
    /// group: the program itself, or, in its own PID namespace, the namespace's init.
    pub pid: u32,
    /// Reads what the program prints.
    pub reader: File,
    /// Writes what the program reads.
    pub writer: File,
    /// The master, for resizing.
    pub master: Master,
    /// In its own PID namespace: where the init writes the program's own wait status.
    pub program_status: Option<File>,
    /// Its pids cgroup, removed when dropped (after the run has ended).
    pub group: Option<crate::contain::RunGroup>,
}

impl Spawned {
    /// Whether output is waiting to be read (or the terminal has closed): said at once
    /// when called with `wait` false, after waiting for it with `wait` true.
    pub fn readable(&self) -> impl Fn(bool) -> bool + Send + 'static {
        let fd = self.reader.as_raw_fd();
        move |wait| {
            let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
            // SAFETY: one valid pollfd; the fd outlives every call, because the reader
            // is kept until the shim has read the terminal to its end.
            let n = unsafe { libc::poll(&mut p, 1, if wait { -1 } else { 0 }) };
            n == 1 && p.revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0
        }
    }
}

/// Makes the terminal's open file (shared by the master, the reader and the writer, which
/// are copies of one descriptor) non-blocking: reads and writes say `WouldBlock` instead
/// of waiting.
pub fn set_nonblocking(fd: &impl AsRawFd) -> std::io::Result<()> {
    let fd = fd.as_raw_fd();
    // SAFETY: F_GETFL / F_SETFL on an open descriptor.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags == -1 || unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) } == -1 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Resolves `program` the way execvp would, to give a clear error before spawning.
pub fn resolve(program: &str, path_var: Option<&str>, cwd: &Path) -> Result<PathBuf, SpawnError> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| p.metadata().map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0).unwrap_or(false);
    if program.contains('/') {
        let p = cwd.join(program);
        if !p.exists() {
            return Err(SpawnError::NotFound(program.to_string()));
        }
        return if executable(&p) { Ok(p) } else { Err(SpawnError::NotExecutable(program.to_string())) };
    }
    let path_var = path_var.unwrap_or("/usr/local/bin:/usr/bin:/bin");
    for dir in path_var.split(':').filter(|d| !d.is_empty()) {
        let p = Path::new(dir).join(program);
        if executable(&p) {
            return Ok(p);
        }
    }
    Err(SpawnError::NotFound(program.to_string()))
}

/// What to start and where.
pub struct Launch<'a> {
    /// Program and arguments.
    pub command: &'a [String],
    /// Working directory.
    pub cwd: &'a Path,
    /// The program's whole environment (nothing else is inherited); `TERM` is
    /// `xterm-256color` unless given.
    pub env: &'a [(String, String)],
    /// Terminal size.
    pub cols: u16,
    /// Terminal size.
    pub rows: u16,
    /// The sandbox to enter before exec (its own terminal is added to what it may
    /// open); None runs the program unconfined.
    pub confine: Option<&'a Policy>,
}

/// Starts a program in a new PTY.
pub fn spawn(launch: &Launch<'_>) -> Result<Spawned, SpawnError> {
    let program = launch.command.first().ok_or(SpawnError::NoCommand)?;
    if !launch.cwd.is_dir() {
        return Err(SpawnError::BadCwd(launch.cwd.display().to_string()));
    }
    let path_var = launch.env.iter().find(|(k, _)| k == "PATH").map(|(_, v)| v.as_str());
    let resolved = resolve(program, path_var, launch.cwd)?;
    let size = nix::pty::Winsize { ws_row: launch.rows, ws_col: launch.cols, ws_xpixel: 0, ws_ypixel: 0 };
    let pair = nix::pty::openpty(Some(&size), None).map_err(|e| SpawnError::Pty(format!("could not open a pseudo-terminal: {e}")))?;
    for fd in [&pair.master, &pair.slave] {
        cloexec(fd).map_err(|e| SpawnError::Pty(format!("could not set up the pseudo-terminal: {e}")))?;
    }
    let contain = launch.confine.map(|p| p.contain.clone()).unwrap_or_default();
    let group = match (&contain.cgroup, launch.confine) {
        (Some(parent), Some(policy)) => Some(
            crate::contain::RunGroup::create(Path::new(parent), &group_name(), policy.limits.processes)
                .map_err(|e| SpawnError::Pty(format!("could not make the run's pids cgroup in {parent}: {e}")))?,
        ),
        _ => None,
    };
    let prepared = match launch.confine {
        Some(policy) => {
            // The run may open its own terminal by name (`/dev/stdout` leads there), and
            // no other.
            let mut policy = policy.clone();
            if let Ok(name) = nix::unistd::ttyname(&pair.slave) {
                policy.grants.push(Grant { path: name.display().to_string(), access: Access::Devices });
            }
            if group.is_some() {
                // Counted per run by its cgroup, not per user.
                policy.limits.processes = None;
            }
            Some(crate::confine::prepare(&policy).map_err(|e| SpawnError::Pty(e.to_string()))?)
        }
        None => None,
    };
    let mut env: Vec<(String, String)> = Vec::with_capacity(launch.env.len() + 1);
    if !launch.env.iter().any(|(k, _)| k == "TERM") {
        env.push(("TERM".into(), "xterm-256color".into()));
    }
    env.extend(launch.env.iter().cloned());
    let namespace = contain.pid_namespace.then_some(crate::exec::Namespace { user: contain.user_namespace, own_proc: contain.own_proc });
    let procs = group.as_ref().map(crate::contain::RunGroup::procs);
    let mut argv = launch.command.to_vec();
    argv[0] = program.clone();
    let plan = crate::exec::Plan::new(crate::exec::PlanParts {
        program: &resolved,
        argv: &argv,
        env: &env,
        cwd: launch.cwd,
        tty: pair.slave.as_raw_fd(),
        confine: prepared.as_ref().map(crate::confine::Prepared::for_child),
        namespace: launch.confine.and(namespace),
        group: procs.as_deref(),
    })
    .map_err(|e| SpawnError::Pty(format!("could not start {program}: {e}")))?;
    let started = plan.start().map_err(|f| match (f.stage, f.errno) {
        (crate::exec::Stage::Exec, libc::EACCES) if launch.confine.is_some() => {
            SpawnError::NotExecutable(format!("{program} (inside the sandbox: {})", f.error()))
        }
        (crate::exec::Stage::Exec, libc::EACCES) => SpawnError::NotExecutable(program.clone()),
        (stage, _) => SpawnError::Pty(format!("{program}: {}: {}", stage.doing(), f.error())),
    })?;
    drop(pair.slave);
    let master = pair.master;
    let reader = File::from(master.try_clone().map_err(|e| SpawnError::Pty(e.to_string()))?);
    let writer = File::from(master.try_clone().map_err(|e| SpawnError::Pty(e.to_string()))?);
    Ok(Spawned { pid: started.pid, reader, writer, master: Master(master), program_status: started.status, group })
}

/// A name for a run's pids cgroup, unique on this machine while the shim lives, naming
/// the shim (so a group left by a killed shim can be told apart and removed).
fn group_name() -> String {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    format!("run-{}-{}", std::process::id(), NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
}

fn cloexec(fd: &OwnedFd) -> std::io::Result<()> {
    // SAFETY: F_SETFD on an open descriptor.
    if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC) } == -1 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use std::io::Read;

    use super::*;

    fn path_env() -> Vec<(String, String)> {
        vec![("PATH".into(), std::env::var("PATH").unwrap_or_default())]
    }

    /// Starts `launch` and returns everything it printed, once its terminal closes.
    pub(crate) fn printed(launch: &Launch<'_>) -> String {
        read_all(&mut spawn(launch).unwrap())
    }

    /// Everything `s` prints, until its terminal closes.
    pub(crate) fn read_all(s: &mut Spawned) -> String {
        let mut out = String::new();
        let mut buf = [0u8; 4096];
        while let Ok(n) = s.reader.read(&mut buf) {
            if n == 0 {
                break;
            }
            out.push_str(&String::from_utf8_lossy(&buf[..n]));
        }
        out
    }

    fn run(command: &[&str], env: &[(String, String)]) -> String {
        let command: Vec<String> = command.iter().map(|s| s.to_string()).collect();
        printed(&Launch { command: &command, cwd: Path::new("/"), env, cols: 80, rows: 24, confine: None })
    }

    #[test]
    fn resolve_finds_programs_on_path_and_reports_missing_ones() {
        let cwd = Path::new("/");
        assert!(resolve("sh", None, cwd).is_ok());
        assert!(matches!(resolve("definitely-not-a-command-xyz", None, cwd), Err(SpawnError::NotFound(_))));
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("plain.txt");
        std::fs::write(&plain, "x").unwrap();
        assert!(matches!(resolve(plain.to_str().unwrap(), None, cwd), Err(SpawnError::NotExecutable(_))));
        assert!(matches!(resolve("./nope", None, cwd), Err(SpawnError::NotFound(_))));
    }

    #[test]
    fn spawn_runs_in_a_pty_of_its_size_and_reports_bad_cwd() {
        let out = run(&["sh", "-c", "tty; stty size; exit 0"], &path_env());
        assert!(out.contains("/dev/pts/"), "{out}");
        assert!(out.contains("24 80"), "{out}");
        let command = vec!["sh".to_string()];
        let launch = Launch { command: &command, cwd: Path::new("/no/such/dir"), env: &[], cols: 80, rows: 24, confine: None };
        assert!(matches!(spawn(&launch), Err(SpawnError::BadCwd(_))));
    }

    #[test]
    fn the_program_gets_exactly_the_environment_it_is_given() {
        std::env::set_var("DROVER_PTY_TEST_SECRET", "leak");
        let mut env = path_env();
        env.push(("GIVEN".into(), "yes".into()));
        let out = run(&["sh", "-c", "echo given=$GIVEN secret=$DROVER_PTY_TEST_SECRET term=$TERM"], &env);
        assert!(out.contains("given=yes secret= term=xterm-256color"), "{out}");
    }

    #[test]
    fn the_program_leads_its_own_session_with_the_pty_as_controlling_terminal() {
        // pid, process group, session, controlling terminal (fields 1, 5, 6, 7).
        let out = run(&["sh", "-c", "cut -d' ' -f1,5,6,7 /proc/$$/stat"], &path_env());
        let fields: Vec<&str> = out.split_whitespace().collect();
        assert!(fields.len() == 4 && fields[0] == fields[1] && fields[0] == fields[2] && fields[3] != "0", "{out}");
    }
}

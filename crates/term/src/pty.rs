//! Starting a program in a pseudo-terminal, as the leader of its own session and process
//! group (so Stop can signal the whole group), with no shell in between.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use portable_pty::{CommandBuilder, MasterPty, PtySize};

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

/// A running program and the master side of its PTY.
pub struct Spawned {
    /// The program's process id, which is also its process group id.
    pub pid: u32,
    /// Reads what the program prints.
    pub reader: Box<dyn Read + Send>,
    /// Writes what the program reads.
    pub writer: Box<dyn Write + Send>,
    /// The master, for resizing.
    pub master: Box<dyn MasterPty + Send>,
}

impl Spawned {
    /// Whether more output is waiting to be read right now (without blocking).
    pub fn readable(&self) -> impl Fn() -> bool + Send + 'static {
        let fd = self.master.as_raw_fd();
        move || {
            let Some(fd) = fd else { return false };
            let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
            // SAFETY: one valid pollfd, zero timeout; the fd outlives the reader thread
            // because the master is kept until the shim exits.
            let n = unsafe { libc::poll(&mut p, 1, 0) };
            n == 1 && p.revents & libc::POLLIN != 0
        }
    }
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

/// Starts `command` in a new PTY of `cols`×`rows` in `cwd`, with `env` added to the
/// inherited environment (and `TERM=xterm-256color` unless given).
pub fn spawn(command: &[String], cwd: &Path, env: &[(String, String)], cols: u16, rows: u16) -> Result<Spawned, SpawnError> {
    let program = command.first().ok_or(SpawnError::NoCommand)?;
    if !cwd.is_dir() {
        return Err(SpawnError::BadCwd(cwd.display().to_string()));
    }
    let path_var = env.iter().find(|(k, _)| k == "PATH").map(|(_, v)| v.clone()).or_else(|| std::env::var("PATH").ok());
    let resolved = resolve(program, path_var.as_deref(), cwd)?;
    let pty = portable_pty::native_pty_system();
    let pair = pty
        .openpty(PtySize { rows, cols, pixel_width: 0, pixel_height: 0 })
        .map_err(|e| SpawnError::Pty(format!("could not open a pseudo-terminal: {e}")))?;
    let mut cmd = CommandBuilder::new(&resolved);
    cmd.get_argv_mut()[0] = program.into();
    cmd.args(&command[1..]);
    cmd.cwd(cwd);
    if !env.iter().any(|(k, _)| k == "TERM") {
        cmd.env("TERM", "xterm-256color");
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let child = pair.slave.spawn_command(cmd).map_err(|e| SpawnError::Pty(format!("could not start {program}: {e}")))?;
    drop(pair.slave);
    let pid = child.process_id().ok_or_else(|| SpawnError::Pty("the program has no process id".into()))?;
    // The shim waits for the process itself (waitpid), so the handle is not needed.
    drop(child);
    let reader = pair.master.try_clone_reader().map_err(|e| SpawnError::Pty(e.to_string()))?;
    let writer = pair.master.take_writer().map_err(|e| SpawnError::Pty(e.to_string()))?;
    Ok(Spawned { pid, reader, writer, master: pair.master })
}

/// Resizes the PTY (the kernel sends SIGWINCH to the foreground group).
pub fn resize(master: &dyn MasterPty, cols: u16, rows: u16) -> std::io::Result<()> {
    master.resize(PtySize { rows, cols, pixel_width: 0, pixel_height: 0 }).map_err(|e| std::io::Error::other(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn spawn_runs_in_a_pty_and_reports_bad_cwd() {
        let mut s = spawn(&["sh".into(), "-c".into(), "tty; exit 0".into()], Path::new("/"), &[], 80, 24).unwrap();
        let mut out = String::new();
        let mut buf = [0u8; 1024];
        while let Ok(n) = s.reader.read(&mut buf) {
            if n == 0 {
                break;
            }
            out.push_str(&String::from_utf8_lossy(&buf[..n]));
        }
        assert!(out.contains("/dev/pts/"), "{out}");
        assert!(matches!(spawn(&["sh".into()], Path::new("/no/such/dir"), &[], 80, 24), Err(SpawnError::BadCwd(_))));
    }
}

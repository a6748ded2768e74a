//! A `drover up` in a temporary home for the benchmarks, and the CLI against it.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

/// A running `drover up`.
pub struct Up {
    pub exe: PathBuf,
    pub home: tempfile::TempDir,
    pub child: Child,
}

impl Up {
    /// Starts `drover up` with many slots on a free port.
    pub fn start(exe: &Path) -> Result<Up> {
        let home = tempfile::tempdir()?;
        // DROVER_BENCH_LOG=FILE keeps the server's and device's log (at RUST_LOG or info).
        let (log, level) = match std::env::var_os("DROVER_BENCH_LOG") {
            Some(path) => (Stdio::from(std::fs::File::create(path)?), std::env::var("RUST_LOG").unwrap_or_else(|_| "info".into())),
            None => (Stdio::null(), "error".into()),
        };
        let mut child = Command::new(exe)
            .args(["up", "--listen", "127.0.0.1:0", "--name", "bench", "--slots", "1000", "--stop-grace", "1"])
            .env("DROVER_HOME", home.path())
            .env("RUST_LOG", level)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .context("starting drover up")?;
        let mut lines = BufReader::new(child.stdout.take().context("stdout")?).lines();
        loop {
            match lines.next() {
                Some(Ok(l)) if l.starts_with("Drover is running at ") => break,
                Some(_) => continue,
                None => bail!("drover up exited"),
            }
        }
        std::thread::spawn(move || for _ in lines {});
        let up = Up { exe: exe.to_path_buf(), home, child };
        let deadline = Instant::now() + Duration::from_secs(20);
        while !up.cli(&["device", "list"])?.contains("connected") {
            anyhow::ensure!(Instant::now() < deadline, "device never connected");
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(up)
    }

    /// Runs a CLI command; returns stdout.
    pub fn cli(&self, args: &[&str]) -> Result<String> {
        let out = Command::new(&self.exe).args(args).env("DROVER_HOME", self.home.path()).stdin(Stdio::null()).output()?;
        if !out.status.success() {
            bail!("drover {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        }
        Ok(String::from_utf8(out.stdout)?)
    }

    /// Starts a session; returns its id.
    pub fn start_session(&self, cols: u16, rows: u16, command: &[&str]) -> Result<String> {
        let (c, r) = (cols.to_string(), rows.to_string());
        let mut args = vec!["session", "start", "--device", "bench", "--cols", &c, "--rows", &r, "--"];
        args.extend_from_slice(command);
        Ok(self.cli(&args)?.trim().to_string())
    }

    /// Waits until the session is running.
    pub fn wait_running(&self, id: &str) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !self.cli(&["--json", "session", "show", id])?.contains("\"outcome\": \"running\"") {
            anyhow::ensure!(Instant::now() < deadline, "session {id} never ran");
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }

    /// The `up` process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Shim process ids of all sessions.
    pub fn shim_pids(&self) -> Vec<u32> {
        let Ok(entries) = std::fs::read_dir(self.home.path().join("device/sessions")) else { return Vec::new() };
        entries.flatten().filter_map(|e| std::fs::read_to_string(e.path().join("shim.pid")).ok()?.trim().parse().ok()).collect()
    }
}

/// Kills every shim and program of the sessions under `sessions` (a device's sessions
/// folder): they are their own process groups and outlive the daemon by design.
pub fn kill_sessions(sessions: &Path) {
    let Ok(entries) = std::fs::read_dir(sessions) else { return };
    for e in entries.flatten() {
        for f in ["child.pid", "shim.pid"] {
            if let Some(pid) = std::fs::read_to_string(e.path().join(f)).ok().and_then(|s| s.trim().parse::<i32>().ok()) {
                // SAFETY: kill only sends a signal.
                unsafe {
                    libc::kill(-pid, libc::SIGKILL);
                    libc::kill(pid, libc::SIGKILL);
                }
            }
        }
    }
}

impl Drop for Up {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        kill_sessions(&self.home.path().join("device/sessions"));
    }
}

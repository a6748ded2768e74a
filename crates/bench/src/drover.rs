//! A `drover up` in a temporary home for the benchmarks, and the CLI against it.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use futures_util::StreamExt;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;

/// A running `drover up`.
pub struct Up {
    pub exe: PathBuf,
    pub home: tempfile::TempDir,
    pub child: Child,
}

impl Up {
    /// Starts `drover up` with many slots on a free port.
    pub fn start(exe: &Path) -> Result<Up> {
        Up::start_on(exe, None)
    }

    /// Starts `drover up` with many slots on a free port, on `database` (a `--database`
    /// URL) or, with None, on SQLite in its home.
    pub fn start_on(exe: &Path, database: Option<&str>) -> Result<Up> {
        match database {
            Some(db) => Up::start_with(exe, &["--database", db]),
            None => Up::start_with(exe, &[]),
        }
    }

    /// Starts `drover up` with many slots on a free port and `extra` options.
    pub fn start_with(exe: &Path, extra: &[&str]) -> Result<Up> {
        // The files the bench's sessions print live in the temp directory, which a
        // sandboxed run may not read unless allowed.
        let tmp = std::env::temp_dir().display().to_string();
        let mut args =
            vec!["up", "--listen", "127.0.0.1:0", "--name", "bench", "--slots", "1000", "--stop-grace", "1", "--sandbox-read", &tmp];
        args.extend_from_slice(extra);
        let up = Up::spawn(exe, &args, "Drover is running at ")?;
        let deadline = Instant::now() + Duration::from_secs(20);
        while !up.cli(&["device", "list"])?.contains("connected") {
            anyhow::ensure!(Instant::now() < deadline, "device never connected");
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(up)
    }

    /// Starts `drover server` alone (no local device) on a free port, on `database` (a
    /// `--database` URL) or, with None, on SQLite in its home; `extra` are more options.
    pub fn server(exe: &Path, database: Option<&str>, extra: &[&str]) -> Result<Up> {
        let mut args = vec!["server", "--listen", "127.0.0.1:0", "--stop-grace", "1"];
        if let Some(db) = database {
            args.extend(["--database", db]);
        }
        args.extend_from_slice(extra);
        Up::spawn(exe, &args, "Drover server is running at ")
    }

    /// Spawns `exe args` in a new home and waits for the line starting with `ready`.
    fn spawn(exe: &Path, args: &[&str], ready: &str) -> Result<Up> {
        let home = tempfile::tempdir()?;
        // DROVER_BENCH_LOG=FILE keeps the server's and device's log (at RUST_LOG or info).
        let (log, level) = match std::env::var_os("DROVER_BENCH_LOG") {
            Some(path) => (Stdio::from(std::fs::File::create(path)?), std::env::var("RUST_LOG").unwrap_or_else(|_| "info".into())),
            None => (Stdio::null(), "error".into()),
        };
        let mut child = Command::new(exe)
            .args(args)
            .env("DROVER_HOME", home.path())
            .env("RUST_LOG", level)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .with_context(|| format!("starting drover {}", args[0]))?;
        let mut lines = BufReader::new(child.stdout.take().context("stdout")?).lines();
        loop {
            match lines.next() {
                Some(Ok(l)) if l.starts_with(ready) => break,
                Some(_) => continue,
                None => bail!("drover {} exited", args[0]),
            }
        }
        std::thread::spawn(move || for _ in lines {});
        Ok(Up { exe: exe.to_path_buf(), home, child })
    }

    /// The server's URL and a member token (from the `client.json` it wrote).
    pub fn client_config(&self) -> Result<(String, String)> {
        let c: serde_json::Value = serde_json::from_slice(&std::fs::read(self.home.path().join("client.json"))?)?;
        Ok((c["url"].as_str().context("url")?.to_string(), c["token"].as_str().context("token")?.to_string()))
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

    /// Waits until session `id` has printed at least `bytes` (stored), as `session show`
    /// counts them: a look that costs the server next to nothing, however fast the
    /// session prints.
    pub fn wait_stored(&self, id: &str, bytes: u64) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(600);
        loop {
            let stored = self.stored_bytes(id)?;
            if stored >= bytes {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("session {id} printed {stored} of {bytes} bytes in 10 minutes");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The bytes of output stored for session `id` so far.
    pub fn stored_bytes(&self, id: &str) -> Result<u64> {
        let show: serde_json::Value = serde_json::from_str(&self.cli(&["--json", "session", "show", id])?)?;
        show["output_bytes"].as_u64().context("`session show` without output_bytes")
    }

    /// The `up` process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Shim process ids of all sessions.
    pub fn shim_pids(&self) -> Vec<u32> {
        self.session_pids("shim.pid")
    }

    /// The process each shim waits for: the program, or its PID namespace's init.
    pub fn child_pids(&self) -> Vec<u32> {
        self.session_pids("child.pid")
    }

    fn session_pids(&self, file: &str) -> Vec<u32> {
        let Ok(entries) = std::fs::read_dir(self.home.path().join("device/sessions")) else { return Vec::new() };
        entries.flatten().filter_map(|e| std::fs::read_to_string(e.path().join(file)).ok()?.trim().parse().ok()).collect()
    }
}

/// Ms from opening a read-only viewer's WebSocket on `up` to its first screen.
pub async fn first_screen_ms(up: &Up, id: &str) -> Result<f64> {
    let (url, token) = up.client_config()?;
    let ws_url = format!("{}/api/v1/sessions/{id}/terminal?read_only=true", url.replacen("http", "ws", 1));
    let mut request = ws_url.as_str().into_client_request()?;
    request.headers_mut().insert("authorization", format!("Bearer {token}").parse()?);
    let t0 = Instant::now();
    let (ws, _) = tokio_tungstenite::connect_async(request).await?;
    let (_sink, mut stream) = ws.split();
    loop {
        match tokio::time::timeout(Duration::from_secs(30), stream.next()).await {
            Ok(Some(Ok(Message::Binary(_)))) => return Ok(t0.elapsed().as_secs_f64() * 1000.0),
            Ok(Some(Ok(_))) => continue,
            other => bail!("the viewer got no screen: {other:?}"),
        }
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

/// A PostgreSQL server for the benchmarks.
pub struct Postgres {
    /// `postgres://USER@HOST:PORT` (no database).
    pub base: String,
    /// Its postmaster's process id, when known (to measure its CPU).
    pub postmaster: Option<u32>,
}

impl Postgres {
    /// The server at `given` (a `--postgres` URL), else the repository's throwaway one
    /// (`scripts/postgres`, started if needed); Err says why there is none.
    pub fn find(given: Option<&str>) -> std::result::Result<Postgres, String> {
        match given {
            Some("off") => Err("--postgres off".into()),
            Some(url) => Ok(Postgres { base: url.trim_end_matches('/').to_string(), postmaster: None }),
            None => {
                let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
                let out = Command::new(root.join("scripts/postgres"))
                    .stdin(Stdio::null())
                    .output()
                    .map_err(|e| format!("cannot run scripts/postgres: {e}"))?;
                if !out.status.success() {
                    return Err(format!("scripts/postgres failed: {}", String::from_utf8_lossy(&out.stderr).trim()));
                }
                let base = String::from_utf8_lossy(&out.stdout).trim().to_string();
                let postmaster = std::fs::read_to_string(root.join("target/postgres/data/postmaster.pid"))
                    .ok()
                    .and_then(|s| s.lines().next()?.trim().parse().ok());
                Ok(Postgres { base, postmaster })
            }
        }
    }

    /// The URL of database `name` on this server.
    pub fn url(&self, name: &str) -> String {
        format!("{}/{name}", self.base)
    }

    /// Drops database `name` (best effort: the benchmarks' databases are throwaway).
    pub fn drop_database(&self, name: &str) {
        let url = self.url("postgres");
        let sql = format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)");
        let run = async move {
            use sqlx::Connection;
            let mut conn = sqlx::PgConnection::connect(&url).await?;
            sqlx::query(&sql).execute(&mut conn).await?;
            Ok::<_, sqlx::Error>(())
        };
        if let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() {
            if let Err(e) = rt.block_on(run) {
                eprintln!("  (could not drop database {name}: {e})");
            }
        }
    }
}

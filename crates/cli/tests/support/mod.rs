//! Test harness: starts a real `drover up` (or `server` + `device`) on a free port in a
//! temporary `$DROVER_HOME`, runs real `drover` commands against it, and cleans up every
//! process it started — including the shims, which outlive the daemon by design.
#![allow(dead_code)]

pub use drover_linkproxy as proxy;
pub mod term;
pub mod webhook;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The `drover` binary under test.
pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_drover"))
}

/// The PostgreSQL database the server kept in `home` uses when the suite runs on
/// PostgreSQL (`DROVER_TEST_DATABASE=postgres://user@host:port`, see `scripts/postgres`):
/// one per home, named after it, so a restarted server finds its data again. None: the
/// default, SQLite in the home.
pub fn test_database(home: &Path) -> Option<String> {
    let server = std::env::var("DROVER_TEST_DATABASE").ok().filter(|s| !s.is_empty())?;
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    home.hash(&mut h);
    Some(format!("{}/drover_test_{:016x}", server.trim_end_matches('/'), h.finish()))
}

/// Drops the PostgreSQL database `url` names, if it exists (a rerun starts clean).
pub fn drop_database(url: &str) {
    let Some((server, name)) = url.rsplit_once('/') else { return };
    let sql = format!("DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)", name.replace('"', ""));
    let _ = Command::new("psql").args(["-Xq", &format!("{server}/postgres"), "-c", &sql]).stdout(Stdio::null()).status();
}

/// Runs `sql` on the database of the server in `home` while it runs (as another client
/// of it would): `psql` on PostgreSQL, `sqlite3` on SQLite.
pub fn database_exec(home: &Path, sql: &str) {
    let out = match test_database(home) {
        Some(url) => Command::new("psql").args(["-Xq", &url, "-c", sql]).output().expect("psql (postgresql-client)"),
        None => Command::new("sqlite3").arg(home.join("drover.db")).arg(sql).output().expect("sqlite3"),
    };
    assert!(out.status.success(), "{sql}: {}", String::from_utf8_lossy(&out.stderr));
}

/// What `sql` selects from the database of the server in `home`, as `psql -At` or
/// `sqlite3` prints it (columns joined by `|`).
pub fn database_query(home: &Path, sql: &str) -> String {
    let out = match test_database(home) {
        Some(url) => Command::new("psql").args(["-XAtq", &url, "-c", sql]).output().expect("psql (postgresql-client)"),
        None => Command::new("sqlite3").arg(home.join("drover.db")).arg(sql).output().expect("sqlite3"),
    };
    assert!(out.status.success(), "{sql}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Everything the server in `home` stored, as text: its SQLite files, or a dump of its
/// PostgreSQL database.
pub fn database_text(home: &Path) -> String {
    match test_database(home) {
        Some(url) => {
            let out = Command::new("pg_dump").args(["--data-only", &url]).output().expect("pg_dump (postgresql-client)");
            assert!(out.status.success(), "pg_dump: {}", String::from_utf8_lossy(&out.stderr));
            String::from_utf8_lossy(&out.stdout).into_owned()
        }
        None => {
            let mut db = std::fs::read(home.join("drover.db")).unwrap();
            if let Ok(wal) = std::fs::read(home.join("drover.db-wal")) {
                db.extend(wal);
            }
            String::from_utf8_lossy(&db).into_owned()
        }
    }
}

/// A running Drover (server + local device) in a temporary home.
pub struct Drover {
    pub home: tempfile::TempDir,
    pub url: String,
    pub device: String,
    /// The local device's slots.
    pub slots: u32,
    /// Arguments `up` gets beyond the test's own (the sandbox's test allowance).
    pub up_args: Vec<String>,
    /// Environment variables `up` is started with, beyond the test's own.
    pub up_env: Vec<(String, String)>,
    up: Option<Child>,
    extra: Vec<Child>,
}

/// The sandbox allowance every test device gets unless a test asks for the strict
/// default: its runs may also write the system's temp directory (where the tests keep the
/// files their programs write), which the sandbox splits around Drover's home there.
pub fn test_sandbox_args() -> Vec<String> {
    vec!["--sandbox-write".into(), std::env::temp_dir().display().to_string()]
}

impl Drover {
    /// `drover up` on a free port.
    pub fn up() -> Drover {
        Drover::up_in(tempfile::tempdir().expect("tempdir"))
    }

    /// `drover up` on a free port in `home`.
    pub fn up_in(home: tempfile::TempDir) -> Drover {
        Drover::up_with_slots(home, 200)
    }

    /// `drover up` on a free port in `home`, with a device of `slots` slots.
    pub fn up_with_slots(home: tempfile::TempDir, slots: u32) -> Drover {
        Drover::up_with(home, slots, test_sandbox_args())
    }

    /// `drover up` with the sandbox's defaults and nothing allowed beyond them: what a
    /// fresh `drover up` gives its runs.
    pub fn up_strict() -> Drover {
        Drover::up_with(tempfile::tempdir().expect("tempdir"), 200, Vec::new())
    }

    /// `drover up` in `home` with `slots` slots and `up_args`.
    pub fn up_with(home: tempfile::TempDir, slots: u32, up_args: Vec<String>) -> Drover {
        Drover::up_env(home, slots, up_args, Vec::new())
    }

    /// [`Drover::up_with`], `up` started with `env` added to its environment.
    pub fn up_env(home: tempfile::TempDir, slots: u32, up_args: Vec<String>, up_env: Vec<(String, String)>) -> Drover {
        let mut d = Drover { home, url: String::new(), device: "testdev".into(), slots, up_args, up_env, up: None, extra: Vec::new() };
        d.start_up("127.0.0.1:0");
        d
    }

    /// Starts (or restarts) `drover up` on `listen`.
    pub fn start_up(&mut self, listen: &str) {
        let mut child = Command::new(bin());
        if let Some(db) = test_database(self.home.path()) {
            child.env("DROVER_DATABASE", db);
        }
        let mut child = child
            .args(["up", "--listen", listen, "--name", &self.device, "--slots", &self.slots.to_string(), "--stop-grace", "1"])
            .args(&self.up_args)
            .envs(self.up_env.iter().map(|(k, v)| (k, v)))
            .env("DROVER_HOME", self.home.path())
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn drover up");
        self.url = read_url(&mut child, "Drover is running at ");
        self.up = Some(child);
        self.wait_device_connected();
    }

    /// The `up` process id.
    pub fn up_pid(&self) -> u32 {
        self.up.as_ref().expect("up running").id()
    }

    /// `kill -9` the `up` process (server and device daemon; shims survive).
    pub fn kill_up(&mut self) {
        if let Some(mut c) = self.up.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Restarts `up` on the same address and home.
    pub fn restart_up(&mut self) {
        let listen = self.url.trim_start_matches("http://").to_string();
        self.kill_up();
        self.start_up(&listen);
    }

    /// Keeps a process to clean up at the end.
    pub fn adopt(&mut self, child: Child) {
        self.extra.push(child);
    }

    /// A `drover` command with this home.
    pub fn cmd(&self) -> Command {
        let mut c = Command::new(bin());
        c.env("DROVER_HOME", self.home.path()).env_remove("DROVER_URL").env_remove("DROVER_TOKEN").stdin(Stdio::null());
        c
    }

    /// Runs `drover ARGS`, returning its output.
    pub fn run(&self, args: &[&str]) -> Output {
        self.cmd().args(args).output().expect("run drover")
    }

    /// Runs `drover ARGS`, asserting success; returns stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "drover {args:?} failed: {}{}",
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        );
        String::from_utf8(out.stdout).expect("utf-8 stdout")
    }

    /// Runs `drover ARGS`, asserting failure; returns stderr.
    pub fn fails(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(!out.status.success(), "drover {args:?} should have failed: {}", String::from_utf8_lossy(&out.stdout));
        String::from_utf8_lossy(&out.stderr).into_owned()
    }

    /// `drover --json ARGS` parsed.
    pub fn json(&self, args: &[&str]) -> Value {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        serde_json::from_str(&self.ok(&all)).expect("json output")
    }

    /// Starts a session running `command`; returns its id.
    pub fn start(&self, command: &[&str]) -> String {
        let mut args = vec!["session", "start", "--device", &self.device, "--cols", "100", "--rows", "30", "--"];
        args.extend_from_slice(command);
        self.ok(&args).trim().to_string()
    }

    /// `session show --json`.
    pub fn show(&self, id: &str) -> Value {
        self.json(&["session", "show", id])
    }

    /// Waits until the session's outcome is not live; returns `show`.
    pub fn wait_ended(&self, id: &str, timeout: Duration) -> Value {
        self.wait_for(id, timeout, |s| s["outcome"] != "starting" && s["outcome"] != "running")
    }

    /// Waits until `pred(show)` holds.
    pub fn wait_for(&self, id: &str, timeout: Duration, pred: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + timeout;
        loop {
            let s = self.show(id);
            if pred(&s) {
                return s;
            }
            assert!(Instant::now() < deadline, "timed out waiting on {id}: {s}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits until the session's plain text contains `needle`.
    pub fn wait_text(&self, id: &str, needle: &str, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let text = self.ok(&["session", "tail", id, "--lines", "100000"]);
            if text.contains(needle) {
                return text;
            }
            assert!(Instant::now() < deadline, "timed out waiting for {needle:?} in {id}: {text}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The session's raw output stream as stored by the server.
    pub fn raw(&self, id: &str) -> Vec<u8> {
        let out = self.run(&["session", "tail", id, "--raw"]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        out.stdout
    }

    /// The device daemon's session directory for `id`.
    pub fn session_dir(&self, id: &str) -> PathBuf {
        self.home.path().join("device").join("sessions").join(id)
    }

    fn wait_device_connected(&self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let out = self.run(&["--json", "device", "list"]);
            if out.status.success() {
                let v: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
                if v.as_array().is_some_and(|a| a.iter().any(|d| d["connected"] == true)) {
                    return;
                }
            }
            assert!(Instant::now() < deadline, "device never connected");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Reads lines of `child`'s stdout until one starts with `prefix`; returns the rest.
pub fn read_url(child: &mut Child, prefix: &str) -> String {
    let stdout = child.stdout.take().expect("piped stdout");
    let mut lines = BufReader::new(stdout).lines();
    let url = loop {
        let line = lines.next().expect("process ended before printing its URL").expect("read stdout");
        if let Some(rest) = line.strip_prefix(prefix) {
            break rest.trim().to_string();
        }
    };
    // Keep draining so the process never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines.by_ref() {});
    url
}

/// Kills every shim and program under `home` (they are their own process groups).
pub fn kill_sessions(home: &Path) {
    for sub in ["device/sessions", "device-daemon/sessions", "sessions"] {
        let Ok(entries) = std::fs::read_dir(home.join(sub)) else { continue };
        for e in entries.flatten() {
            for file in ["child.pid", "shim.pid"] {
                if let Some(pid) = std::fs::read_to_string(e.path().join(file)).ok().and_then(|s| s.trim().parse::<i32>().ok()) {
                    unsafe {
                        libc::kill(-pid, libc::SIGKILL);
                        libc::kill(pid, libc::SIGKILL);
                    }
                }
            }
        }
    }
}

impl Drop for Drover {
    fn drop(&mut self) {
        self.kill_up();
        for c in &mut self.extra {
            let _ = c.kill();
            let _ = c.wait();
        }
        kill_sessions(self.home.path());
        // A server was started here (not a CLI home borrowing another's): its database
        // goes too, or a PostgreSQL pass would leave hundreds behind.
        if self.slots > 0 {
            if let Some(db) = test_database(self.home.path()) {
                drop_database(&db);
            }
        }
    }
}

/// Whether any live (non-zombie) process is left in process group `pgid`.
pub fn group_alive(pgid: i32) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else { return false };
    entries.flatten().any(|e| {
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else { return false };
        // pid (comm) state ppid pgrp …; comm may contain spaces, so split after the last ')'.
        let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else { return false };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        fields.len() > 2 && fields[0] != "Z" && fields[0] != "X" && fields[2] == pgid.to_string()
    })
}

/// Writes an executable script (a stand-in agent or CLI) at `path`.
pub fn executable(path: &Path, body: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, body).expect("write the script");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).expect("make it executable");
}

/// A git repository with one empty commit on `main`, made at `dir/repo`.
pub fn git_repo(dir: &Path) -> PathBuf {
    let repo = dir.join("repo");
    std::fs::create_dir(&repo).expect("repo folder");
    for args in
        [&["init", "-q", "-b", "main"][..], &["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "start"]]
    {
        let ok = Command::new("git").arg("-C").arg(&repo).args(args).status().expect("git").success();
        assert!(ok, "git {args:?}");
    }
    repo
}

/// Polls `f` every 50 ms until it gives a value; panics naming `what` after `timeout`.
pub fn wait_until<T>(what: &str, timeout: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Seconds as a Duration.
pub fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

impl Drover {
    /// A handle that runs CLI commands against an already running server (nothing to kill).
    pub fn attach_to(home: &Path, url: &str, device: &str) -> Drover {
        let home = tempfile::Builder::new().tempdir_in(home).expect("tempdir");
        // The CLI reads client.json from DROVER_HOME: point a fresh home at the server's.
        let parent = home.path().parent().expect("parent").to_path_buf();
        std::fs::copy(parent.join("client.json"), home.path().join("client.json")).expect("client.json");
        Drover {
            home,
            url: url.to_string(),
            device: device.to_string(),
            slots: 0,
            up_args: Vec::new(),
            up_env: Vec::new(),
            up: None,
            extra: Vec::new(),
        }
    }

    /// Waits until the device `name` is (or is not) connected.
    pub fn wait_device(&self, name: &str, connected: bool) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let v = self.json(&["device", "list"]);
            if v.as_array().is_some_and(|a| a.iter().any(|d| d["name"] == name && d["connected"] == connected)) {
                return;
            }
            assert!(Instant::now() < deadline, "device {name} never became connected={connected}: {v}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// A minimal HTTP/1.1 request over a real socket: (status, body).
pub fn http(url: &str, method: &str, path: &str, token: Option<&str>, body: &[u8]) -> (u16, String) {
    use std::io::{Read, Write};
    let host = url.trim_start_matches("http://");
    let mut s = std::net::TcpStream::connect(host).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let auth = token.map(|t| format!("Authorization: Bearer {t}\r\n")).unwrap_or_default();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\n{auth}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).unwrap();
    let _ = s.write_all(body);
    let mut resp = Vec::new();
    let _ = s.read_to_end(&mut resp);
    let text = String::from_utf8_lossy(&resp).into_owned();
    let status = text.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    (status, body)
}

impl Drover {
    /// The CLI's token from client.json.
    pub fn token(&self) -> String {
        let cfg: Value = serde_json::from_slice(&std::fs::read(self.home.path().join("client.json")).unwrap()).unwrap();
        cfg["token"].as_str().unwrap().to_string()
    }
}

/// `drover server` and `drover device` as separate processes with separate homes.
pub struct Split {
    pub server_home: tempfile::TempDir,
    pub device_home: tempfile::TempDir,
    pub url: String,
    pub token: String,
    pub name: String,
    pub cli: Drover,
    server_args: Vec<String>,
    device_args: Vec<String>,
    /// The URL the device dials: the server's, or a [`proxy::LinkProxy`]'s in front of it.
    pub device_url: String,
    server: Option<Child>,
    device: Option<Child>,
}

fn spawn_drover(home: &Path, args: &[&str]) -> Child {
    spawn_drover_on(home, test_database(home).as_deref(), args)
}

/// `drover ARGS` in `home`, its server (if it runs one) on database `db` (None: the
/// default, SQLite in the home); stdout piped, for [`read_url`].
pub fn spawn_drover_on(home: &Path, db: Option<&str>, args: &[&str]) -> Child {
    let mut c = Command::new(bin());
    if let Some(db) = db {
        c.env("DROVER_DATABASE", db);
    }
    c.args(args)
        .env("DROVER_HOME", home)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn drover")
}

impl Split {
    /// A server, a device `name` registered on it and its daemon, connected.
    pub fn start(name: &str) -> Split {
        Split::start_with(name, &[], &[])
    }

    /// [`Split::start`] with extra arguments for `drover server` and `drover device`
    /// (kept for restarts).
    pub fn start_with(name: &str, server_args: &[&str], device_args: &[&str]) -> Split {
        Split::start_via(name, server_args, device_args, |url| url.to_string())
    }

    /// [`Split::start_with`] with the device dialling the server through a link the
    /// test can cut ([`proxy::LinkProxy::cut`]) and restore.
    pub fn start_with_link(name: &str, server_args: &[&str], device_args: &[&str]) -> (Split, proxy::LinkProxy) {
        let mut link = None;
        let split = Split::start_via(name, server_args, device_args, |url| {
            let addr = url.trim_start_matches("http://").parse().expect("the server's address");
            let p = proxy::LinkProxy::start(addr).expect("a link proxy");
            let via = p.url();
            link = Some(p);
            via
        });
        (split, link.expect("made"))
    }

    fn start_via(name: &str, server_args: &[&str], device_args: &[&str], dial: impl FnOnce(&str) -> String) -> Split {
        let (server_home, device_home) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let server_args: Vec<String> = server_args.iter().map(|s| s.to_string()).collect();
        let mut args = vec!["server", "--listen", "127.0.0.1:0", "--stop-grace", "1"];
        args.extend(server_args.iter().map(String::as_str));
        let mut server = spawn_drover(server_home.path(), &args);
        let url = read_url(&mut server, "Drover server is running at ");
        let cli = Drover::attach_to(server_home.path(), &url, name);
        let cred = cli.json(&["device", "add", name, "--slots", "4"]);
        let token = cred["enrollment_token"].as_str().unwrap().to_string();
        let device_args = device_args.iter().map(|s| s.to_string()).collect();
        let device_url = dial(&url);
        let mut split = Split {
            server_home,
            device_home,
            url,
            token,
            name: name.into(),
            cli,
            server_args,
            device_args,
            device_url,
            server: Some(server),
            device: None,
        };
        split.start_device();
        split
    }

    /// Starts the device daemon and waits until it is connected.
    pub fn start_device(&mut self) {
        let allowance = test_sandbox_args();
        let mut args = vec!["device", "--server", &self.device_url, "--token", &self.token, "--name", &self.name, "--slots", "4"];
        args.extend(allowance.iter().map(String::as_str));
        args.extend(self.device_args.iter().map(String::as_str));
        self.device = Some(spawn_drover(self.device_home.path(), &args));
        self.cli.wait_device(&self.name, true);
    }

    /// Starts the device daemon as `drover device` alone: the server, name, credential
    /// and slots all come from its enrollment.
    pub fn start_device_from_saved(&mut self) {
        let allowance = test_sandbox_args();
        let mut args = vec!["device"];
        args.extend(allowance.iter().map(String::as_str));
        args.extend(self.device_args.iter().map(String::as_str));
        self.device = Some(spawn_drover(self.device_home.path(), &args));
        self.cli.wait_device(&self.name, true);
    }

    /// The device's own credential: what the daemon traded its enrollment token
    /// (`self.token`) for.
    pub fn device_credential(&self) -> String {
        let saved: Value =
            serde_json::from_slice(&std::fs::read(self.device_home.path().join("device-daemon/credential.json")).unwrap()).unwrap();
        saved["token"].as_str().unwrap().to_string()
    }

    /// A session's folder on the device.
    pub fn session_dir(&self, id: &str) -> PathBuf {
        self.device_home.path().join("device-daemon/sessions").join(id)
    }

    /// `kill -9` the device daemon.
    pub fn kill_device(&mut self) {
        if let Some(mut c) = self.device.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Sends the device daemon a signal (`STOP`, `CONT`), as `kill -SIG` does.
    pub fn signal_device(&self, signal: &str) {
        let pid = self.device.as_ref().expect("the device runs").id();
        let ok = Command::new("kill").arg(format!("-{signal}")).arg(pid.to_string()).status().expect("kill").success();
        assert!(ok, "kill -{signal} {pid}");
    }

    /// `kill -9` the server.
    pub fn kill_server(&mut self) {
        if let Some(mut c) = self.server.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts the server again on the same address and home.
    pub fn restart_server(&mut self) {
        self.kill_server();
        let listen = self.url.trim_start_matches("http://").to_string();
        let mut args = vec!["server", "--listen", &listen, "--stop-grace", "1"];
        args.extend(self.server_args.iter().map(String::as_str));
        let mut server = spawn_drover(self.server_home.path(), &args);
        read_url(&mut server, "Drover server is running at ");
        self.server = Some(server);
    }
}

impl Drop for Split {
    fn drop(&mut self) {
        self.kill_device();
        self.kill_server();
        kill_sessions(&self.device_home.path().join("device-daemon"));
        if let Some(db) = test_database(self.server_home.path()) {
            drop_database(&db);
        }
    }
}

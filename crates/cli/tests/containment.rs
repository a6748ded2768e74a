//! End-to-end: what runs on a device is contained (issue: "Contain what runs on a device").
//! Against a real `drover up` with the sandbox's defaults (nothing allowed beyond them):
//! a member's session, an owner's session and an agent's run each try to read Drover's
//! credentials, its database, another session's files and the daemon's environment, by
//! path, through a symlink and through `..`, and see nothing, while writing their own
//! working directory (and an agent its harness's state) works; Stop and a run's end leave
//! no process of it behind, however it detached; a device credential can touch neither
//! another device's sessions nor the server's memory; and every file is private.

mod support;

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use drover_protocol::device::{DeviceBinary, DeviceMessage, ServerMessage};
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use support::{bin, executable, http, secs, wait_until, Drover};
use tokio_tungstenite::tungstenite::Message;

/// The escapes a run tries; each prints `ESCAPED: …` if it got through, `denied: …` if not.
fn probe(home: &Path, other_session: &Path, daemon: u32) -> String {
    let h = home.display();
    let other = other_session.display();
    format!(
        r#"
try() {{ if cat "$1" >/dev/null 2>&1; then echo "ESCAPED: $1"; else echo "denied: $1"; fi; }}
try '{h}/client.json'
try '{h}/device.json'
try '{h}/drover.db'
try '{h}/drover.db-wal'
try '{other}/spec.json'
try '{other}/output.raw'
try /proc/{daemon}/environ
ln -s '{h}/client.json' escape-link 2>/dev/null; try escape-link
try "$(realpath --relative-to=. '{h}')/client.json"
if ls '{h}' >/dev/null 2>&1; then echo "ESCAPED: listing the home"; else echo "denied: listing the home"; fi
if command -v sqlite3 >/dev/null; then
  if sqlite3 '{h}/drover.db' 'select count(*) from sessions' >/dev/null 2>&1; then echo "ESCAPED: sqlite3"; else echo "denied: sqlite3"; fi
fi
if [ -x /usr/bin/python3 ]; then
  /usr/bin/python3 -c "import socket,sys; s=socket.socket(socket.AF_UNIX); s.settimeout(8); s.connect(sys.argv[1]); s.sendall(b'\x00\x00\x00\x01\x02'); d=s.recv(64); print('ESCAPED: the shim answered' if d else 'denied: the shim socket')" '{other}/shim.sock' 2>/dev/null || echo 'denied: the shim socket'
fi
if DROVER_HOME='{h}' env -u DROVER_TOKEN -u DROVER_SESSION '{drover}' task list >/dev/null 2>&1; then echo "ESCAPED: drover as the owner"; else echo "denied: drover as the owner"; fi
[ -z "$DROVER_HOME" ] && echo "no DROVER_HOME here"
echo mine > own-file.txt && echo "wrote its own directory"
echo PROBE-DONE
"#,
        drover = bin().display()
    )
}

/// Checks a probe's output: every escape denied, its own directory written.
fn assert_contained(who: &str, text: &str) {
    assert!(text.contains("PROBE-DONE"), "{who}: the probe did not finish: {text}");
    assert!(!text.contains("ESCAPED"), "{who} reached what it must not:\n{text}");
    let denied = text.matches("denied: ").count();
    assert!(denied >= 12, "{who}: only {denied} escapes were tried:\n{text}");
    assert!(text.contains("no DROVER_HOME here"), "{who}: {text}");
    assert!(text.contains("wrote its own directory"), "{who}: {text}");
}

/// A member (not an admin) of `d`'s workspace, with a personal token.
fn member_token(d: &Drover, name: &str) -> String {
    let owner = d.token();
    let (status, body) = http(&d.url, "POST", "/api/v1/invites", Some(&owner), json!({"role": "member"}).to_string().as_bytes());
    assert_eq!(status, 201, "{body}");
    let code = serde_json::from_str::<Value>(&body).unwrap()["code"].as_str().unwrap().to_string();
    let password = "correct horse battery";
    let accept = json!({"code": code, "name": name, "password": password}).to_string();
    let (status, body) = http(&d.url, "POST", "/api/v1/invites/accept", None, accept.as_bytes());
    assert!((200..300).contains(&status), "{body}");
    let login = json!({"name": name, "password": password, "label": "test"}).to_string();
    let (status, body) = http(&d.url, "POST", "/api/v1/login/token", None, login.as_bytes());
    assert!((200..300).contains(&status), "{body}");
    serde_json::from_str::<Value>(&body).unwrap()["token"].as_str().unwrap().to_string()
}

/// `drover up` with nothing allowed beyond the sandbox's defaults, a home directory of its
/// own (`$HOME`, where the harnesses keep their state) and a stand-in `claude` on PATH
/// that runs `probe.sh` beside its `bin/` (a tool's install, which runs may read).
struct Strict {
    d: Drover,
    home: tempfile::TempDir,
    tools: tempfile::TempDir,
}

fn strict() -> Strict {
    let home = tempfile::tempdir().unwrap();
    let tools = tempfile::tempdir().unwrap();
    let bin_dir = tools.path().join("bin");
    std::fs::create_dir(&bin_dir).unwrap();
    executable(&bin_dir.join("claude"), &format!("#!/bin/sh\nexec sh '{}'\n", tools.path().join("probe.sh").display()));
    let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap_or_default());
    let env = vec![("HOME".to_string(), home.path().display().to_string()), ("PATH".to_string(), path)];
    let d = Drover::up_env(tempfile::tempdir().unwrap(), 20, Vec::new(), env);
    Strict { d, home, tools }
}

#[test]
fn no_session_or_run_reaches_drovers_home_credentials_or_other_sessions() {
    let s = strict();
    let d = &s.d;
    let other = d.start(&["sh", "-c", "echo other-session; sleep 600"]);
    d.wait_text(&other, "other-session", secs(20));
    let other_dir = d.session_dir(&other);
    let script = probe(d.home.path(), &other_dir, d.up_pid());

    // The owner's session, in a directory of its own.
    let work = tempfile::tempdir().unwrap();
    let owner = d
        .ok(&["session", "start", "--device", &d.device, "--cwd", work.path().to_str().unwrap(), "--", "sh", "-c", &script])
        .trim()
        .to_string();
    let text = d.wait_text(&owner, "PROBE-DONE", secs(30));
    assert_contained("the owner's session", &text);

    // A connection to a shim's socket without the session's secret gets nothing: not its
    // hello, not its output (runs cannot make the socket at all; this is the lock behind).
    {
        use std::io::{Read, Write};
        let mut sock = std::os::unix::net::UnixStream::connect(other_dir.join("shim.sock")).unwrap();
        sock.set_read_timeout(Some(secs(10))).unwrap();
        sock.write_all(&[0, 0, 0, 1, 2]).unwrap();
        let mut got = Vec::new();
        let _ = sock.read_to_end(&mut got);
        assert!(got.is_empty(), "the shim answered a connection without its secret: {got:?}");
    }
    assert_eq!(std::fs::read_to_string(work.path().join("own-file.txt")).unwrap(), "mine\n");

    // A member's session, in the fresh private directory a session gets by default.
    let member = member_token(d, "mia");
    let out =
        d.cmd().env("DROVER_TOKEN", &member).args(["session", "start", "--device", &d.device, "--", "sh", "-c", &script]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let text = d.wait_text(&id, "PROBE-DONE", secs(30));
    assert_contained("a member's session", &text);
    assert!(!s.home.path().join("own-file.txt").exists(), "a session's default directory is not $HOME");

    // Nobody may give a sandboxed run the home directory (its dotfiles run outside the
    // sandbox) or a directory holding Drover's home.
    for cwd in [s.home.path().to_path_buf(), d.home.path().parent().unwrap().to_path_buf(), PathBuf::from("/")] {
        let out = d.run(&["session", "start", "--device", &d.device, "--cwd", cwd.to_str().unwrap(), "--", "true"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains("choose a project folder with --cwd"), "{}: {err}", cwd.display());
    }

    // An agent's run in its task's worktree: also writes its harness's state directory,
    // and nothing else of the home directory.
    let script_file = s.tools.path().join("probe.sh");
    std::fs::write(&script_file, format!(
        "{script}\nmkdir -p \"$HOME/.claude\" && echo state > \"$HOME/.claude/probe\" && echo 'wrote its harness state'\n\
         if echo x > \"$HOME/outside\" 2>/dev/null; then echo 'ESCAPED: the home directory'; else echo 'denied: the home directory'; fi\necho RUN-DONE\nsleep 600\n"
    ))
    .unwrap();
    let repo = support::git_repo(work.path());
    d.ok(&["repo", "add", "app", "--device", &d.device, "--path", repo.to_str().unwrap()]);
    d.ok(&["agent", "create", "claude-1", "--harness", "claude"]);
    let task = d.ok(&["task", "create", "--repo", "app", "--title", "probe", "--stages", "code", "--agent", "claude-1"]).trim().to_string();
    let run = wait_until("the agent's run", secs(30), || {
        let t = d.json(&["task", "show", &task]);
        t["sessions"].as_array().and_then(|s| s.first()).and_then(|s| s["id"].as_str()).map(str::to_string)
    });
    let text = d.wait_text(&run, "RUN-DONE", secs(30));
    assert_contained("an agent's run", &text);
    assert!(text.contains("wrote its harness state"), "{text}");
    assert!(text.contains("denied: the home directory"), "{text}");
    assert_eq!(std::fs::read_to_string(s.home.path().join(".claude/probe")).unwrap(), "state\n");
    d.ok(&["task", "cancel", &task]);
}

/// How many live (not zombie) processes of the machine have `marker` in their command
/// line. A run in its own PID namespace prints pids of that namespace, so the test finds
/// its processes by what they run instead.
fn running(marker: &str) -> usize {
    let Ok(dir) = std::fs::read_dir("/proc") else { return 0 };
    dir.flatten()
        .filter(|e| {
            let p = e.path();
            let cmdline = std::fs::read(p.join("cmdline")).map(|c| String::from_utf8_lossy(&c).replace('\0', " ")).unwrap_or_default();
            let zombie = std::fs::read_to_string(p.join("stat"))
                .ok()
                .and_then(|s| s.rsplit_once(')').map(|(_, rest)| rest.trim_start().starts_with('Z')))
                .unwrap_or(true);
            cmdline.contains(marker) && !zombie
        })
        .count()
}

#[test]
fn stop_and_the_end_of_a_run_leave_none_of_its_processes_behind() {
    let d = Drover::up_strict();
    // A child in its own session, and a grandchild whose parent exited (a double fork),
    // each sleeping a duration no other process on the machine does.
    let detaching = |n: u32| {
        let tag = format!("{}{n}", std::process::id());
        // The run's own command line names the durations only through variables.
        let script = format!("t={tag}; setsid sleep 601.$t & (setsid sleep 602.$t &); sh -c \"sleep 603.$t &\" ; echo DETACHED");
        (script, [1, 2, 3].map(|i| format!("sleep 60{i}.{tag}")))
    };
    let (detach, markers) = detaching(1);
    let id = d.start(&["sh", "-c", &format!("{detach}; sleep 600")]);
    d.wait_text(&id, "DETACHED", secs(20));
    wait_until("the run's processes running", secs(10), || markers.iter().all(|m| running(m) == 1).then_some(()));
    d.ok(&["session", "stop", &id]);
    let s = d.wait_ended(&id, secs(30));
    assert_eq!(s["outcome"], "released", "{s}");
    wait_until("every process of the stopped run gone", secs(10), || markers.iter().all(|m| running(m) == 0).then_some(()));

    // A run that ends by itself takes what it left behind with it.
    let (detach, markers) = detaching(2);
    let id = d.start(&["sh", "-c", &format!("{detach}; sleep 3")]);
    d.wait_text(&id, "DETACHED", secs(20));
    assert!(markers.iter().all(|m| running(m) == 1), "the run's processes run");
    d.wait_ended(&id, secs(30));
    wait_until("every process of the ended run gone", secs(10), || markers.iter().all(|m| running(m) == 0).then_some(()));
}

#[test]
fn a_run_whose_shim_is_killed_dies_with_it() {
    let d = Drover::up_strict();
    let tag = format!("{}9", std::process::id());
    let id = d.start(&["sh", "-c", &format!("t={tag}; setsid sleep 604.$t & (setsid sleep 605.$t &); echo DETACHED; sleep 600")]);
    d.wait_text(&id, "DETACHED", secs(20));
    let markers = [format!("sleep 604.{tag}"), format!("sleep 605.{tag}")];
    wait_until("the run's processes running", secs(10), || markers.iter().all(|m| running(m) == 1).then_some(()));
    // Killed from outside, with no chance to end anything: the run goes with it (its
    // namespace's init gets the shim's death signal), detached processes included.
    let shim: i32 = std::fs::read_to_string(d.session_dir(&id).join("shim.pid")).unwrap().trim().parse().unwrap();
    // SAFETY: a signal to a process id read from the session directory.
    assert_eq!(unsafe { libc::kill(shim, libc::SIGKILL) }, 0);
    wait_until("every process of the run gone with its shim", secs(10), || markers.iter().all(|m| running(m) == 0).then_some(()));
}

/// A second device, `dev2`, enrolled on `d`'s server, speaking the device protocol itself.
struct FakeDevice {
    rt: tokio::runtime::Runtime,
    credential: String,
}

type Socket = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

impl FakeDevice {
    fn enroll(d: &Drover) -> FakeDevice {
        let added = d.json(&["device", "add", "dev2", "--slots", "2"]);
        let token = added["enrollment_token"].as_str().unwrap();
        let body = json!({"token": token, "name": "dev2"}).to_string();
        let (status, answer) = http(&d.url, "POST", "/api/v1/devices/enroll", None, body.as_bytes());
        assert!((200..300).contains(&status), "{answer}");
        let credential = serde_json::from_str::<Value>(&answer).unwrap()["token"].as_str().unwrap().to_string();
        FakeDevice { rt: tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap(), credential }
    }

    /// Opens the link and says hello; returns the socket after the welcome.
    fn connect(&self, url: &str) -> Socket {
        use tokio_tungstenite::tungstenite::client::IntoClientRequest;
        let target = format!("ws://{}/api/v1/device/connect", url.trim_start_matches("http://"));
        self.rt.block_on(async {
            let mut req = target.into_client_request().unwrap();
            req.headers_mut().insert("authorization", format!("Bearer {}", self.credential).parse().unwrap());
            let (mut ws, _) = tokio_tungstenite::connect_async(req).await.expect("the device link opens");
            let hello = DeviceMessage::Hello {
                version: drover_protocol::PROTOCOL_VERSION,
                name: "dev2".into(),
                slots: 2,
                sessions: Vec::new(),
                sandbox: None,
            };
            ws.send(Message::Text(serde_json::to_string(&hello).unwrap().into())).await.unwrap();
            match ws.next().await {
                Some(Ok(Message::Text(t))) => assert!(t.contains("welcome"), "{t}"),
                other => panic!("no welcome: {other:?}"),
            }
            ws
        })
    }

    fn send(&self, ws: &mut Socket, m: Message) {
        self.rt.block_on(async { ws.send(m).await.expect("the link takes the message") });
    }

    /// Whether the server closes the link within `within` (other messages are skipped).
    fn closed(&self, ws: &mut Socket, within: Duration) -> bool {
        self.rt.block_on(async {
            let deadline = tokio::time::Instant::now() + within;
            loop {
                match tokio::time::timeout_at(deadline, ws.next()).await {
                    Err(_) => return false,
                    Ok(None) | Ok(Some(Err(_))) | Ok(Some(Ok(Message::Close(_)))) => return true,
                    Ok(Some(Ok(_))) => continue,
                }
            }
        })
    }

    /// The next Start the server sends; the session's id.
    fn next_start(&self, ws: &mut Socket) -> drover_core::SessionId {
        self.rt.block_on(async {
            loop {
                match tokio::time::timeout(secs(20), ws.next()).await.expect("a start within 20 s") {
                    Some(Ok(Message::Text(t))) => {
                        if let Ok(ServerMessage::Start { spec, .. }) = serde_json::from_str::<ServerMessage>(&t) {
                            return spec.session;
                        }
                    }
                    Some(Ok(_)) => {}
                    other => panic!("the link ended before a start: {other:?}"),
                }
            }
        })
    }
}

fn output(session: drover_core::SessionId, offset: u64, data: &[u8]) -> Message {
    Message::Binary(DeviceBinary::Output { session, offset, t_micros: 1, data: data.to_vec().into() }.encode().into())
}

#[test]
fn a_device_can_touch_neither_another_devices_sessions_nor_the_servers_memory() {
    let d = Drover::up();
    let id = d.start(&["sh", "-c", "echo genuine-1; sleep 2; echo genuine-2; sleep 600"]);
    d.wait_text(&id, "genuine-1", secs(20));
    let session: drover_core::SessionId = id.parse().unwrap();
    let dev2 = FakeDevice::enroll(&d);

    // Output and a resize for testdev's session from dev2: the first is refused, the
    // second closes the link.
    let mut ws = dev2.connect(&d.url);
    dev2.send(&mut ws, output(session, 0, b"*** INJECTED BY dev2 ***\r\n"));
    dev2.send(&mut ws, output(session, 12, b"*** INJECTED BY dev2 ***\r\n"));
    assert!(dev2.closed(&mut ws, secs(10)), "a second forged message closes the link");
    let mut ws = dev2.connect(&d.url);
    let resize = json!({"type": "resized", "session": id, "t_micros": 5, "cols": 7, "rows": 3}).to_string();
    dev2.send(&mut ws, Message::Text(resize.clone().into()));
    let error = json!({"type": "recording_error", "session": id, "message": "forged"}).to_string();
    dev2.send(&mut ws, Message::Text(error.into()));
    assert!(dev2.closed(&mut ws, secs(10)));
    let text = d.wait_text(&id, "genuine-2", secs(20));
    assert!(!text.contains("INJECTED"), "{text}");
    assert!(text.contains("genuine-1"), "{text}");
    let shown = d.show(&id);
    assert_eq!((shown["cols"].as_u64(), shown["rows"].as_u64()), (Some(100), Some(30)), "{shown}");

    // A device credential reads no member route, not even its own sessions.
    let (status, _) = http(&d.url, "GET", &format!("/api/v1/sessions/{id}"), Some(&dev2.credential), b"");
    assert_eq!(status, 403);
    let (status, _) = http(&d.url, "GET", &format!("/api/v1/sessions/{id}/events"), Some(&dev2.credential), b"");
    assert_eq!(status, 403);

    // Its own session: output far past what it can have printed is refused without the
    // server allocating the gap, and the link is closed; the server goes on serving.
    let mut ws = dev2.connect(&d.url);
    let starter = {
        let (url, token) = (d.url.clone(), d.token());
        std::thread::spawn(move || {
            let body = json!({"device": "dev2", "command": ["agent"]}).to_string();
            http(&url, "POST", "/api/v1/sessions", Some(&token), body.as_bytes())
        })
    };
    let own = dev2.next_start(&mut ws);
    let started = json!({"type": "started", "session": own, "pid": 1, "cwd": "/"}).to_string();
    dev2.send(&mut ws, Message::Text(started.into()));
    dev2.send(&mut ws, output(own, 0, b"hello from dev2\r\n"));
    dev2.send(&mut ws, output(own, 0x4000_0000_0000_0000, b"forged"));
    assert!(dev2.closed(&mut ws, secs(10)), "a huge offset closes the link");
    let (status, body) = starter.join().unwrap();
    assert!((200..300).contains(&status), "{body}");
    let (status, _) = http(&d.url, "GET", "/api/v1/health", None, b"");
    assert_eq!(status, 200, "the server keeps serving");
    let own = own.to_string();
    let text = d.wait_text(&own, "hello from dev2", secs(20));
    assert!(!text.contains("forged"), "{text}");
    assert!(d.show(&own)["output_bytes"].as_u64().unwrap() < 1 << 20, "{}", d.show(&own));
    d.ok(&["session", "list"]);
}

/// Mode bits of `p` (permission bits only).
fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())).permissions().mode() & 0o777
}

#[test]
fn every_file_drover_makes_is_private_whatever_the_umask() {
    let home = tempfile::tempdir().unwrap();
    // A home others may read, as an earlier version or a careless umask left it.
    std::fs::set_permissions(home.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut up = std::process::Command::new(bin());
    up.args(["up", "--listen", "127.0.0.1:0", "--name", "testdev", "--stop-grace", "1"])
        .env("DROVER_HOME", home.path())
        .env("RUST_LOG", "warn")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    if let Some(db) = support::test_database(home.path()) {
        up.env("DROVER_DATABASE", db);
    }
    // SAFETY: umask is async-signal-safe.
    unsafe {
        up.pre_exec(|| {
            libc::umask(0);
            Ok(())
        });
    }
    let mut child = up.spawn().unwrap();
    let url = support::read_url(&mut child, "Drover is running at ");
    let d = Drover::attach_to(home.path(), &url, "testdev");
    d.wait_device("testdev", true);
    let id = d.start(&["sh", "-c", "echo private; sleep 600"]);
    d.wait_text(&id, "private", secs(20));

    let mut checked: Vec<(PathBuf, u32)> = Vec::new();
    let mut walk = vec![home.path().to_path_buf()];
    while let Some(dir) = walk.pop() {
        if dir == d.home.path() {
            continue; // the test's own CLI home (attach_to), not Drover's
        }
        checked.push((dir.clone(), mode(&dir)));
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let t = e.file_type().unwrap();
            if t.is_dir() {
                walk.push(e.path());
            } else if t.is_file() {
                checked.push((e.path(), mode(&e.path())));
            }
        }
    }
    let names: Vec<String> = checked.iter().map(|(p, _)| p.strip_prefix(home.path()).unwrap().display().to_string()).collect();
    if support::test_database(home.path()).is_none() {
        for want in ["drover.db", "drover.db-wal", "drover.db-shm"] {
            assert!(names.iter().any(|n| n == want), "{want} missing from {names:?}");
        }
    }
    for want in ["client.json", "device.json"] {
        assert!(names.iter().any(|n| n == want), "{want} missing from {names:?}");
    }
    let session = format!("device/sessions/{id}");
    assert!(names.iter().any(|n| *n == format!("{session}/shim.log")), "{names:?}");
    let open: Vec<String> = checked
        .iter()
        .filter(|(p, m)| if p.is_dir() { *m != 0o700 } else { m & 0o077 != 0 })
        .map(|(p, m)| format!("{} {m:o}", p.display()))
        .collect();
    assert!(open.is_empty(), "reachable by others: {open:?}");
    let _ = child.kill();
    let _ = child.wait();
    support::kill_sessions(home.path());
}

#[test]
fn only_owners_and_admins_start_a_session_unconfined_and_each_start_is_audited() {
    let d = Drover::up_strict();
    let client = d.home.path().join("client.json");
    let read = format!("cat '{}' >/dev/null && echo READ-CREDENTIALS || echo DENIED; sleep 600", client.display());

    let member = member_token(&d, "max");
    let out = d
        .cmd()
        .env("DROVER_TOKEN", &member)
        .args(["session", "start", "--device", &d.device, "--unconfined", "--", "sh", "-c", &read])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("only a workspace owner or admin can start a session outside the sandbox"), "{err}");

    let confined = d.start(&["sh", "-c", &read]);
    assert!(d.wait_text(&confined, "DENIED", secs(20)).contains("DENIED"));
    let id = d.ok(&["session", "start", "--device", &d.device, "--unconfined", "--", "sh", "-c", &read]).trim().to_string();
    d.wait_text(&id, "READ-CREDENTIALS", secs(20));
    let (status, body) = http(&d.url, "GET", &format!("/api/v1/sessions/{id}/events"), Some(&d.token()), b"");
    assert_eq!(status, 200, "{body}");
    let events: Value = serde_json::from_str(&body).unwrap();
    let audited = events.as_array().unwrap().iter().find(|e| e["kind"] == "unconfined_start");
    assert!(audited.is_some_and(|e| e["actor"] != "" && e["label"] == "session started unconfined"), "{body}");
}

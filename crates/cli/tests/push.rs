//! Getting told, end to end: a Web Push service stand-in on loopback (push_receiver.py)
//! makes a browser's keys itself, and every push Drover sends it is decrypted there with
//! http_ece and its VAPID token verified with cryptography, independently of Drover's
//! code. Runs are stand-ins for Claude Code that hold a tool call through the hooks
//! Drover gives them. Ten runs waiting at once make one push; quiet hours hold pushes
//! back; a 410 removes the subscription; members see and change only their own.

mod support;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};
use support::{secs, wait_until, Drover};

/// How long a batch of notices collects (`--push-coalesce-secs`).
const COALESCE: u64 = 3;

/// The stand-in: waits for the barrier file, then asks to run a command and waits for
/// the decision.
fn stand_in(barrier: &Path) -> String {
    format!(
        r#"#!/usr/bin/env python3
import json, os, subprocess, sys, time
args = sys.argv[1:]
settings = json.loads(args[args.index("--settings") + 1])
print("stand-in ready", flush=True)
while not os.path.exists({barrier:?}):
    time.sleep(0.1)
for group in settings["hooks"]["PermissionRequest"]:
    for h in group["hooks"]:
        ev = {{"hook_event_name": "PermissionRequest", "session_id": "s-1", "cwd": os.getcwd(), "transcript_path": "/dev/null",
              "tool_name": "Bash", "tool_input": {{"command": "make deploy --secret-flag"}}}}
        p = subprocess.run(h["command"], shell=True, input=json.dumps(ev), capture_output=True, text=True, timeout=h.get("timeout", 600))
        print("DECIDED", p.stdout.strip(), flush=True)
time.sleep(600)
"#,
        barrier = barrier.display().to_string()
    )
}

/// The push service stand-in; stopped when dropped.
struct PushService {
    child: Child,
    port: u16,
    p256dh: String,
    auth: String,
    log: PathBuf,
}

impl Drop for PushService {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl PushService {
    fn start(dir: &Path) -> PushService {
        let python = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../harnesses/.venv/bin/python");
        assert!(python.exists(), "the Python test tools are not installed: run scripts/test (it makes harnesses/.venv)");
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/push_receiver.py");
        let log = dir.join("pushes.jsonl");
        let mut child = Command::new(python).arg(script).arg(&log).stdout(Stdio::piped()).stderr(Stdio::inherit()).spawn().unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let v: Value = serde_json::from_str(&line).expect("the receiver's keys");
        let text = |k: &str| v[k].as_str().unwrap().to_string();
        PushService { port: v["port"].as_u64().unwrap() as u16, p256dh: text("p256dh"), auth: text("auth"), child, log }
    }

    fn endpoint(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// What arrived so far.
    fn pushes(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log).unwrap_or_default().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    }

    /// Waits for the `n`th push; returns them all.
    fn wait_for(&self, n: usize) -> Vec<Value> {
        wait_until(&format!("push #{n}"), secs(30), || Some(self.pushes()).filter(|p| p.len() >= n))
    }
}

/// An API call with `token`: (status, JSON body or Null).
fn api(d: &Drover, token: &str, method: &str, path: &str, body: Value) -> (u16, Value) {
    let body = if body.is_null() { Vec::new() } else { body.to_string().into_bytes() };
    let (status, text) = support::http(&d.url, method, path, Some(token), &body);
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// A second member's token.
fn second_member(d: &Drover) -> String {
    let inv = d.json(&["member", "invite", "--role", "member"]);
    let code = inv["code"].as_str().expect("an invite code");
    let body = json!({ "code": code, "name": "bob", "password": "correct horse battery staple" });
    let (status, _) = support::http(&d.url, "POST", "/api/v1/invites/accept", None, body.to_string().as_bytes());
    assert!((200..300).contains(&status), "accept: {status}");
    let login = json!({ "name": "bob", "password": "correct horse battery staple", "label": "push test" });
    let (status, text) = support::http(&d.url, "POST", "/api/v1/login/token", None, login.to_string().as_bytes());
    assert!((200..300).contains(&status), "{text}");
    serde_json::from_str::<Value>(&text).unwrap()["token"].as_str().unwrap().to_string()
}

/// A `drover up` whose `claude` is the stand-in, that may push to loopback, with a
/// Claude Code agent and a repository: (server, the dirs to keep).
fn drover(barrier: &Path) -> (Drover, [tempfile::TempDir; 2]) {
    let bin = tempfile::tempdir().unwrap();
    support::executable(&bin.path().join("claude"), &stand_in(barrier));
    let path = format!("{}:{}", bin.path().display(), std::env::var("PATH").unwrap_or_default());
    // SAFETY: nextest runs each test in its own process, and nothing else runs yet.
    unsafe { std::env::set_var("PATH", &path) };
    let mut args = support::test_sandbox_args();
    args.extend(["--allow-local-webhooks", "--push-coalesce-secs", &COALESCE.to_string()].map(String::from));
    let d = Drover::up_with(tempfile::tempdir().unwrap(), 16, args);
    let repo = tempfile::tempdir().unwrap();
    let repo_path = support::git_repo(repo.path());
    d.ok(&["repo", "add", "app", "--device", &d.device, "--path", repo_path.to_str().unwrap()]);
    d.ok(&["agent", "create", "claude-1", "--harness", "claude"]);
    (d, [bin, repo])
}

/// Files a task for the stand-in; returns its id.
fn task(d: &Drover, title: &str) -> String {
    d.json(&["task", "create", "--repo", "app", "--title", title, "--agent", "claude-1"])["id"].as_str().unwrap().to_string()
}

/// The inbox's held calls.
fn held(d: &Drover) -> Vec<Value> {
    let inbox = d.json(&["inbox"]);
    inbox["items"].as_array().cloned().unwrap_or_default().into_iter().filter(|i| i["kind"] == "permission").collect()
}

fn wait_held(d: &Drover, n: usize) -> Vec<Value> {
    wait_until(&format!("{n} held calls"), secs(60), || Some(held(d)).filter(|h| h.len() >= n))
}

/// Checks what every push shows: decrypted, a VAPID token signed by the server's key,
/// never the held command.
fn check_pushes(pushes: &[Value], key: &str) {
    for p in pushes {
        assert_eq!(p["encoding"], "aes128gcm", "{p}");
        assert!(p.get("decrypt_error").is_none(), "{p}");
        if p["status"] == 201 {
            assert_eq!(p["vapid_error"], Value::Null, "{p}");
            assert_eq!(p["vapid_key"], key, "the token names the key GET /push/key gives: {p}");
        }
        assert!(!p["payload"].to_string().contains("make deploy"), "a push never carries the command: {p}");
    }
}

#[test]
fn pushes_are_encrypted_signed_coalesced_held_back_and_dropped_when_gone() {
    let dir = tempfile::tempdir().unwrap();
    let barrier = dir.path().join("go");
    let service = PushService::start(dir.path());
    let (d, _keep) = drover(&barrier);
    let owner = d.token();

    let (status, key) = api(&d, &owner, "GET", "/api/v1/push/key", Value::Null);
    assert_eq!(status, 200);
    let key = key["public_key"].as_str().unwrap().to_string();
    let (again, same) = api(&d, &owner, "GET", "/api/v1/push/key", Value::Null);
    assert_eq!((again, same["public_key"].as_str()), (200, Some(key.as_str())), "made once");

    let sub = json!({ "endpoint": service.endpoint("/push/owner"), "p256dh": service.p256dh, "auth": service.auth });
    let (status, mine) = api(&d, &owner, "POST", "/api/v1/push/subscriptions", sub);
    assert_eq!(status, 201, "{mine}");

    // Another member sees none of it and cannot remove it.
    let bob = second_member(&d);
    let (_, theirs) = api(&d, &bob, "GET", "/api/v1/push/subscriptions", Value::Null);
    assert_eq!(theirs, json!([]));
    let (status, _) = api(&d, &bob, "DELETE", "/api/v1/push/subscriptions", json!({ "subscription": mine["id"] }));
    assert_eq!(status, 404);

    // Ten runs hold a call at once: one push.
    let tasks: Vec<String> = (0..10).map(|i| task(&d, &format!("run {i}"))).collect();
    wait_until("ten runs started", secs(60), || {
        let running = tasks.iter().filter(|t| !d.json(&["task", "show", t])["sessions"].as_array().unwrap().is_empty()).count();
        (running == 10).then_some(())
    });
    std::thread::sleep(Duration::from_secs(2));
    std::fs::write(&barrier, "").unwrap();
    wait_held(&d, 10);
    let first = service.wait_for(1);
    std::thread::sleep(Duration::from_secs(COALESCE + 2));
    let pushes = service.pushes();
    assert_eq!(pushes.len(), 1, "ten runs waiting make one push: {pushes:?}");
    check_pushes(&pushes, &key);
    let p = &first[0]["payload"];
    assert_eq!((p["title"].as_str(), p["url"].as_str(), p["runs"].as_u64()), (Some("10 runs need you"), Some("/inbox"), Some(10)), "{p}");

    // Quiet hours around now hold the next one back; without them it comes.
    let now = chrono_minute();
    let window = format!("{}-{}", hhmm(now + 1440 - 60), hhmm(now + 60));
    let quiet = json!({ "events": ["permission"], "quiet": window, "zone": "UTC", "cooldown_secs": 300 });
    assert_eq!(api(&d, &owner, "PUT", "/api/v1/me/notifications", quiet).0, 200);
    task(&d, "in the night");
    wait_held(&d, 11);
    std::thread::sleep(Duration::from_secs(COALESCE + 2));
    assert_eq!(service.pushes().len(), 1, "nothing is pushed in quiet hours");
    let (_, choices) = api(&d, &owner, "GET", "/api/v1/me/notifications", Value::Null);
    assert_eq!(choices["quiet"], window.as_str());

    let day = json!({ "events": ["permission"], "quiet": null, "zone": "Europe/Paris", "cooldown_secs": 300 });
    assert_eq!(api(&d, &owner, "PUT", "/api/v1/me/notifications", day).0, 200);
    task(&d, "by day");
    let items = wait_held(&d, 12);
    let by_day = items.iter().find(|i| i["title"] == "by day").expect("its held call");
    let pushes = service.wait_for(2);
    check_pushes(&pushes, &key);
    let expected = json!({ "title": "by day", "body": "needs approval: Bash", "url": "/inbox", "tag": "drover", "runs": 1, "attention": by_day["id"] });
    assert_eq!(pushes[1]["payload"], expected);

    // A browser the push service says is gone is forgotten; a test push reaches the rest.
    let gone = json!({ "endpoint": service.endpoint("/gone/owner"), "p256dh": service.p256dh, "auth": service.auth });
    assert_eq!(api(&d, &owner, "POST", "/api/v1/push/subscriptions", gone).0, 201);
    let (status, queued) = api(&d, &owner, "POST", "/api/v1/push/test", Value::Null);
    assert_eq!((status, queued["queued"].as_u64()), (200, Some(2)));
    let pushes = service.wait_for(4);
    check_pushes(&pushes, &key);
    assert!(pushes[2..].iter().any(|p| p["path"] == "/gone/owner" && p["status"] == 410));
    assert!(pushes[2..].iter().any(|p| p["path"] == "/push/owner" && p["payload"]["tag"] == "drover-test"));
    let left = wait_until("the gone browser removed", secs(10), || {
        let (_, subs) = api(&d, &owner, "GET", "/api/v1/push/subscriptions", Value::Null);
        Some(subs).filter(|s| s.as_array().unwrap().len() == 1)
    });
    assert_eq!(left[0]["endpoint"], service.endpoint("/push/owner"));
    let (status, _) = api(&d, &bob, "DELETE", "/api/v1/push/subscriptions", json!({ "subscription": service.endpoint("/push/owner") }));
    assert_eq!(status, 404, "bob cannot remove the owner's browser by its endpoint either");
}

/// The minute of the day now, UTC.
fn chrono_minute() -> u32 {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    ((secs % 86400) / 60) as u32
}

fn hhmm(minute: u32) -> String {
    let m = minute % 1440;
    format!("{:02}:{:02}", m / 60, m % 60)
}

#[test]
fn loopback_endpoints_are_refused_without_the_allowance() {
    let d = Drover::up();
    let sub = json!({
        "endpoint": "http://127.0.0.1:9/push",
        "p256dh": "BEtn-YOvM4yotTMTnHLfT6qYaf7457RhBdfNvnOrlXJi4HrI6AGsZa8RYAku0bJP5zXWBvmsGqpv_Ig9WvLNmEU",
        "auth": "AAAAAAAAAAAAAAAAAAAAAA",
    });
    let (status, body) = api(&d, &d.token(), "POST", "/api/v1/push/subscriptions", sub);
    assert_eq!(status, 400);
    assert!(body.to_string().contains("--allow-local-webhooks"), "{body}");
    let bad = json!({ "events": ["permission", "nope"], "quiet": null, "zone": "UTC", "cooldown_secs": 0 });
    let (status, body) = api(&d, &d.token(), "PUT", "/api/v1/me/notifications", bad);
    assert_eq!(status, 400);
    assert!(body.to_string().contains("spend_cap"), "{body}");
    let zone = json!({ "events": [], "quiet": "22:00-07:00", "zone": "Mars/Olympus", "cooldown_secs": 0 });
    assert_eq!(api(&d, &d.token(), "PUT", "/api/v1/me/notifications", zone).0, 400);
}

#[test]
fn notify_shows_and_sets_choices_from_the_cli() {
    let d = Drover::up();
    let shown = d.json(&["notify", "show"]);
    assert_eq!(shown["choices"]["events"], json!(["permission", "question", "failed", "lost", "spend_cap"]), "the defaults");
    assert_eq!((shown["choices"]["cooldown_secs"].as_u64(), shown["browsers"].clone()), (Some(300), json!([])));
    d.ok(&["notify", "set", "--events", "question,permission", "--quiet", "22:00-07:00", "--tz", "Europe/Paris", "--cooldown", "90s"]);
    d.ok(&["notify", "set", "--cooldown", "2m"]);
    let c = d.json(&["notify", "show"])["choices"].clone();
    assert_eq!(c, json!({ "events": ["permission", "question"], "quiet": "22:00-07:00", "zone": "Europe/Paris", "cooldown_secs": 120 }));
    assert!(d.fails(&["notify", "set", "--events", "permision"]).contains("unknown event \"permision\""));
    assert!(d.fails(&["notify", "set", "--tz", "Mars/Olympus"]).contains("Europe/Paris"));
    assert!(d.fails(&["notify", "test"]).contains("enable notifications"));
    d.ok(&["notify", "set", "--quiet", "off", "--events", "none"]);
    assert_eq!(d.json(&["notify", "show"])["choices"]["quiet"], Value::Null);
}

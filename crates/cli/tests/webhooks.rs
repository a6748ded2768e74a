//! End-to-end: webhooks to a real HTTP receiver that verifies every signature with the
//! Standard Webhooks reference library (Python, from PyPI, installed by scripts/test):
//! retries with backoff and Retry-After until delivered, at least once with a stable
//! message id, redelivery, secret rotation, 410 disabling the endpoint, and deliveries
//! written before they are sent surviving a `kill -9` of the server.

mod support;

use std::time::Duration;

use serde_json::Value;
use support::webhook::{entries, receiver};
use support::{secs, wait_until, Split};

fn add(s: &Split, url: &str, events: &[&str]) -> (String, String) {
    let mut args = vec!["webhook", "add", url];
    for e in events {
        args.extend(["--event", e]);
    }
    let v = s.cli.json(&args);
    (v["webhook"]["id"].as_str().unwrap().to_string(), v["secret"].as_str().unwrap().to_string())
}

#[test]
fn deliveries_are_signed_retried_until_delivered_redelivered_and_rotated() {
    let s = Split::start_with("hooks", &["--webhook-retry-secs", "0.2", "--allow-webhook-host", "127.0.0.1"], &[]);
    let tmp = tempfile::tempdir().unwrap();
    let secrets = tmp.path().join("secrets.txt");
    std::fs::write(&secrets, "").unwrap();
    // Fails its first three requests (the second with 503 and Retry-After: 1).
    let r = receiver(tmp.path(), 0, &secrets, 3, "");
    let (hook, secret) = add(&s, &r.url, &["session.started", "session.ended"]);
    assert!(secret.starts_with("whsec_"));
    std::fs::write(&secrets, format!("{secret}\n")).unwrap();

    let id = s.cli.start(&["sh", "-c", "echo hi"]);
    s.cli.wait_ended(&id, secs(20));
    let delivered = wait_until("both events delivered", secs(30), || {
        let e = entries(&r.log);
        let ok: Vec<Value> = e.iter().filter(|e| e["status"] == 204).cloned().collect();
        (ok.len() == 2).then_some(e)
    });
    // Every request verified with the secret, by the reference implementation.
    assert!(delivered.iter().all(|e| e["verified_by"] == serde_json::json!([0])), "{delivered:?}");
    // Retried with the same message id (at least once, one id per message).
    let ok_ids: Vec<&str> = delivered.iter().filter(|e| e["status"] == 204).map(|e| e["id"].as_str().unwrap()).collect();
    // Each message retries on its own schedule: they may arrive in either order.
    let mut types: Vec<&str> = delivered.iter().filter(|e| e["status"] == 204).map(|e| e["type"].as_str().unwrap()).collect();
    types.sort_unstable();
    assert_eq!(types, ["session.ended", "session.started"]);
    let failed_ids: Vec<&str> = delivered.iter().filter(|e| e["status"] != 204).map(|e| e["id"].as_str().unwrap()).collect();
    assert_eq!(failed_ids.len(), 3);
    assert!(failed_ids.iter().all(|f| ok_ids.contains(f)), "a failed delivery was retried under its own id");
    // The delivery log says so (once the sender has recorded the answers).
    let log = wait_until("the log to show both delivered", secs(20), || {
        let log = s.cli.json(&["webhook", "deliveries", &hook]);
        log.as_array().unwrap().iter().all(|d| d["state"] == "delivered").then_some(log)
    });
    let log = log.as_array().unwrap();
    assert_eq!(log.len(), 2);
    assert!(log.iter().all(|d| d["last_status"] == 204));
    assert_eq!(log.iter().map(|d| d["attempts"].as_u64().unwrap()).sum::<u64>(), 5, "two deliveries, three failures");
    assert_eq!(log[0]["payload"]["data"]["session"], id.as_str());

    // Redeliver: the same message again, same id.
    let msg = log[1]["id"].as_str().unwrap().to_string();
    s.cli.ok(&["webhook", "redeliver", &hook, &msg]);
    wait_until("the redelivery", secs(20), || (entries(&r.log).iter().filter(|e| e["id"] == msg.as_str()).count() >= 2).then_some(()));

    // Rotation: the new secret and the old one both sign for the overlap.
    let rotated = s.cli.json(&["webhook", "rotate", &hook]);
    let new_secret = rotated["secret"].as_str().unwrap().to_string();
    assert_ne!(new_secret, secret);
    std::fs::write(&secrets, format!("{secret}\n{new_secret}\n")).unwrap();
    let before = entries(&r.log).len();
    let id2 = s.cli.start(&["true"]);
    s.cli.wait_ended(&id2, secs(20));
    let after = wait_until("deliveries after rotation", secs(20), || {
        let e = entries(&r.log);
        (e.len() >= before + 2).then_some(e)
    });
    assert!(after[before..].iter().all(|e| e["verified_by"] == serde_json::json!([0, 1])), "{:?}", &after[before..]);
    let list = s.cli.json(&["webhook", "list"]);
    assert_eq!(list[0]["signing_secrets"], 2);
    // Changes are on the record.
    let (status, body) = support::http(&s.url, "GET", "/api/v1/events?limit=1000", Some(&s.cli.token()), b"");
    assert_eq!(status, 200);
    let events: Value = serde_json::from_str(&body).unwrap();
    let changes = events.as_array().unwrap().iter().filter(|e| e["kind"] == "webhook_changed").count();
    assert_eq!(changes, 2, "added, rotated");
}

#[test]
fn bad_endpoints_are_refused_and_a_410_disables_one() {
    let s = Split::start_with("hooks", &["--webhook-retry-secs", "0.2", "--allow-webhook-host", "127.0.0.1"], &[]);
    let tmp = tempfile::tempdir().unwrap();
    for (url, event, says) in [
        ("ftp://example.com", "session.lost", "http:// or https://"),
        ("not a url", "session.lost", "is not a URL"),
        ("http://127.0.0.1:9/x", "session.everything", "unknown event type"),
        ("https://user:pw@example.com/x", "session.lost", "no user name or password"),
    ] {
        let err = s.cli.fails(&["webhook", "add", url, "--event", event]);
        assert!(err.contains(says), "{url} {event}: {err}");
    }
    assert_eq!(s.cli.json(&["webhook", "list"]).as_array().unwrap().len(), 0, "nothing half-made");
    let secrets = tmp.path().join("secrets.txt");
    std::fs::write(&secrets, "").unwrap();
    let r = receiver(tmp.path(), 0, &secrets, 0, "gone");
    let (hook, _) = add(&s, &r.url, &["session.started"]);
    let id = s.cli.start(&["true"]);
    s.cli.wait_ended(&id, secs(20));
    let w = wait_until("the endpoint disabled", secs(20), || {
        let l = s.cli.json(&["webhook", "list"]);
        l[0]["disabled_reason"].is_string().then_some(l)
    });
    assert!(w[0]["disabled_reason"].as_str().unwrap().contains("410"));
    let id = s.cli.start(&["true"]);
    s.cli.wait_ended(&id, secs(20));
    std::thread::sleep(Duration::from_millis(800));
    assert_eq!(entries(&r.log).len(), 1, "nothing more is sent to a disabled endpoint");
    s.cli.ok(&["webhook", "enable", &hook]);
    s.cli.ok(&["webhook", "remove", &hook]);
    assert!(s.cli.fails(&["webhook", "deliveries", &hook]).contains("no webhook"));
}

#[test]
fn deliveries_written_before_sending_survive_a_server_kill() {
    let mut s = Split::start_with("hooks", &["--webhook-retry-secs", "0.2", "--allow-webhook-host", "127.0.0.1"], &[]);
    let tmp = tempfile::tempdir().unwrap();
    let secrets = tmp.path().join("secrets.txt");
    // A port nobody listens on yet: deliveries fail and wait.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let (_, secret) = add(&s, &format!("http://127.0.0.1:{port}/hook"), &["session.started", "session.ended"]);
    std::fs::write(&secrets, format!("{secret}\n")).unwrap();
    let id = s.cli.start(&["sh", "-c", "echo hi"]);
    s.cli.wait_ended(&id, secs(20));
    s.kill_server();
    s.restart_server();
    let r = receiver(tmp.path(), port, &secrets, 0, "");
    let e = wait_until("both deliveries after the restart", secs(30), || {
        let e = entries(&r.log);
        (e.iter().filter(|e| e["status"] == 204).count() >= 2).then_some(e)
    });
    let types: Vec<&str> = e.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert!(types.contains(&"session.started") && types.contains(&"session.ended"), "{types:?}");
    assert!(e.iter().all(|e| e["verified_by"] == serde_json::json!([0])));
}

#[test]
fn a_session_marked_lost_fires_session_lost() {
    let server = ["--webhook-retry-secs", "0.2", "--device-silent-secs", "1", "--monitor-secs", "0.3", "--allow-webhook-host", "127.0.0.1"];
    let mut s = Split::start_with("hooks", &server, &["--heartbeat-secs", "0.2"]);
    let tmp = tempfile::tempdir().unwrap();
    let secrets = tmp.path().join("secrets.txt");
    std::fs::write(&secrets, "").unwrap();
    let r = receiver(tmp.path(), 0, &secrets, 0, "");
    let (_, secret) = add(&s, &r.url, &["session.lost"]);
    std::fs::write(&secrets, format!("{secret}\n")).unwrap();
    let id = s.cli.start(&["sh", "-c", "echo up; sleep 300"]);
    s.cli.wait_text(&id, "up", secs(20));
    s.kill_device();
    let e = wait_until("session.lost", secs(30), || entries(&r.log).into_iter().find(|e| e["type"] == "session.lost"));
    assert_eq!(e["verified_by"], serde_json::json!([0]));
    let hook = s.cli.json(&["webhook", "list"])[0]["id"].as_str().unwrap().to_string();
    let log = s.cli.json(&["webhook", "deliveries", &hook]);
    let payload = &log[0]["payload"];
    assert_eq!(payload["data"]["session"], id.as_str());
    assert_eq!(payload["data"]["detail"]["reason"], "the device dropped off and missed its check-ins");
    assert_eq!(entries(&r.log).len(), 1, "only the subscribed type");
}

#[test]
fn a_redirect_is_a_failed_delivery_not_followed() {
    let s = Split::start_with("hooks", &["--webhook-retry-secs", "30", "--allow-webhook-host", "127.0.0.1"], &[]);
    let tmp = tempfile::tempdir().unwrap();
    let secrets = tmp.path().join("secrets.txt");
    std::fs::write(&secrets, "").unwrap();
    let r = receiver(tmp.path(), 0, &secrets, 0, "redirect");
    let (hook, _) = add(&s, &r.url, &["session.started"]);
    let id = s.cli.start(&["true"]);
    s.cli.wait_ended(&id, secs(20));
    let log = wait_until("the attempt recorded", secs(20), || {
        let l = s.cli.json(&["webhook", "deliveries", &hook]);
        (l[0]["attempts"] == 1).then_some(l)
    });
    assert_eq!((log[0]["state"].as_str(), log[0]["last_status"].as_u64()), (Some("pending"), Some(302)), "{log}");
    assert!(entries(&r.log).iter().all(|e| e["status"] != "GET /elsewhere"), "the redirect was followed");
}

#[test]
fn webhooks_never_reach_inside_when_added_or_when_delivered() {
    let s = Split::start_with("hooks", &["--webhook-retry-secs", "0.2"], &[]);
    for url in [
        "http://127.0.0.1:9/h",
        "http://[::1]:9/h",
        "http://169.254.169.254/latest/meta-data/",
        "http://10.0.0.1/h",
        "http://172.16.5.4/h",
        "http://192.168.1.1/h",
        "http://100.64.0.1/h",
        "http://[fd00::1]/h",
        "http://[fe80::1]/h",
        "http://224.0.0.1/h",
        "http://0.0.0.0:9/h",
        "http://[::ffff:127.0.0.1]:9/h",
        // A name that resolves inside (a hosts entry).
        "http://localhost:9/h",
    ] {
        let err = s.cli.fails(&["webhook", "add", url, "--event", "session.started"]);
        assert!(err.contains("may not reach") && err.contains("--allow-webhook-host"), "{url}: {err}");
    }
    assert_eq!(s.cli.json(&["webhook", "list"]).as_array().unwrap().len(), 0);

    // An endpoint that passed when it was added, re-pointed later at a name that resolves
    // to loopback (DNS rebinding, or a row from before this rule): deliveries refuse it.
    let tmp = tempfile::tempdir().unwrap();
    let secrets = tmp.path().join("secrets.txt");
    std::fs::write(&secrets, "").unwrap();
    let r = receiver(tmp.path(), 0, &secrets, 0, "");
    let (hook, _) = add(&s, "http://192.0.2.1:9/hook", &["session.started"]);
    let inside = r.url.replace("127.0.0.1", "localhost");
    support::database_exec(s.server_home.path(), &format!("UPDATE webhook_endpoints SET url = '{inside}' WHERE id = '{hook}'"));
    let id = s.cli.start(&["true"]);
    s.cli.wait_ended(&id, secs(20));
    let log = wait_until("the delivery refused", secs(20), || {
        let log = s.cli.json(&["webhook", "deliveries", &hook]);
        log[0]["last_error"].as_str().is_some_and(|e| e.contains("may not reach")).then_some(log)
    });
    assert!(log[0]["last_error"].as_str().unwrap().contains("localhost resolves to"), "{log}");
    std::thread::sleep(Duration::from_millis(800));
    assert!(entries(&r.log).is_empty(), "nothing reached the receiver inside");
}

#[test]
fn a_task_flagged_for_a_person_fires_task_needs_person() {
    let s = Split::start_with("flags", &["--webhook-retry-secs", "0.2", "--allow-webhook-host", "127.0.0.1"], &[]);
    let tmp = tempfile::tempdir().unwrap();
    let secrets = tmp.path().join("secrets.txt");
    std::fs::write(&secrets, "").unwrap();
    let r = receiver(tmp.path(), 0, &secrets, 0, "");
    let (_, secret) = add(&s, &r.url, &["task.needs_person"]);
    std::fs::write(&secrets, format!("{secret}\n")).unwrap();
    let repo = support::git_repo(tmp.path());
    s.cli.ok(&["repo", "add", "app", "--device", "flags", "--path", repo.to_str().unwrap()]);
    s.cli.ok(&["agent", "create", "ghost", "--harness", "custom", "--", "/nonexistent/agent-cli", "{prompt}"]);
    let task =
        s.cli.ok(&["task", "create", "--repo", "app", "--title", "Ghost", "--stages", "code", "--assign", "code=ghost"]).trim().to_string();
    let e = wait_until("task.needs_person", secs(30), || entries(&r.log).into_iter().find(|e| e["type"] == "task.needs_person"));
    assert_eq!(e["verified_by"], serde_json::json!([0]));
    let hook = s.cli.json(&["webhook", "list"])[0]["id"].as_str().unwrap().to_string();
    let payload = &s.cli.json(&["webhook", "deliveries", &hook])[0]["payload"];
    assert_eq!(payload["data"]["task"], task.as_str());
    assert!(payload["data"]["detail"]["reason"].as_str().unwrap().contains("could not start"), "{payload}");
}

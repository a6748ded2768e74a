//! Accounts end to end with the real binary: invitations, passwords, `drover login`,
//! personal tokens listed and revoked, sign-in rate limiting, secrets stored only hashed,
//! and device enrollment with a one-time token.

mod support;

use std::io::Write;
use std::process::Stdio;

use serde_json::{json, Value};
use support::{database_text, http, secs, test_sandbox_args, wait_until, Drover, Split};

const PASSWORD: &str = "a long enough password";

/// Joins through a fresh invitation as `name` with `role`.
fn join(d: &Drover, name: &str, role: &str) {
    let inv = d.json(&["member", "invite", "--role", role]);
    let code = inv["code"].as_str().unwrap();
    let body = json!({ "code": code, "name": name, "password": PASSWORD }).to_string();
    let (status, answer) = http(&d.url, "POST", "/api/v1/invites/accept", None, body.as_bytes());
    assert_eq!(status, 201, "{answer}");
}

/// `drover login` into `home` as `name`, the password on stdin.
fn login(d: &Drover, home: &std::path::Path, name: &str, password: &str) -> std::process::Output {
    let mut child = d
        .cmd()
        .env("DROVER_HOME", home)
        .args(["login", "--url", &d.url, "--name", name, "--password-stdin"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    writeln!(child.stdin.take().unwrap(), "{password}").unwrap();
    child.wait_with_output().unwrap()
}

/// Status and headers of a login attempt.
fn try_login(url: &str, name: &str, password: &str) -> (u16, String) {
    try_login_from(url, name, password, None)
}

/// [`try_login`] as a reverse proxy passes it on for the client at `client`
/// (`X-Forwarded-For`).
fn try_login_from(url: &str, name: &str, password: &str, client: Option<&str>) -> (u16, String) {
    use std::io::Read;
    let host = url.trim_start_matches("http://");
    let body = json!({ "name": name, "password": password }).to_string();
    let forwarded = client.map(|c| format!("X-Forwarded-For: {c}\r\nX-Forwarded-Proto: https\r\n")).unwrap_or_default();
    let mut s = std::net::TcpStream::connect(host).unwrap();
    write!(
        s,
        "POST /api/v1/login HTTP/1.1\r\nHost: {host}\r\n{forwarded}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut resp = String::new();
    let _ = s.read_to_string(&mut resp);
    let status = resp.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, resp)
}

#[test]
fn invited_members_log_in_list_and_revoke_tokens_and_the_audit_trail_has_it_all() {
    let d = Drover::up();
    join(&d, "bob", "member");
    let members = d.json(&["member", "list"]);
    let bob = members.as_array().unwrap().iter().find(|m| m["name"] == "bob").expect("bob joined");
    assert_eq!((bob["role"].as_str(), bob["has_password"].as_bool()), (Some("member"), Some(true)));

    // Bob signs the CLI in with his password; the token lands in his own home, 0600.
    let bob_home = tempfile::tempdir().unwrap();
    let out = login(&d, bob_home.path(), "bob", PASSWORD);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let file = bob_home.path().join("client.json");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&file).unwrap().permissions().mode() & 0o777, 0o600);
    let token = serde_json::from_slice::<Value>(&std::fs::read(&file).unwrap()).unwrap()["token"].as_str().unwrap().to_string();
    let as_bob = |args: &[&str]| d.cmd().env("DROVER_HOME", bob_home.path()).args(args).output().unwrap();
    let listed: Value = serde_json::from_slice(&as_bob(&["--json", "token", "list"]).stdout).unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
    let id = listed[0]["id"].as_str().unwrap().to_string();

    // A wrong password is refused and saves nothing.
    let other = tempfile::tempdir().unwrap();
    let out = login(&d, other.path(), "bob", "not the password");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("wrong name or password"));
    assert!(!other.path().join("client.json").exists());

    // A member cannot change roles or invite; the owner can, but never leaves no owner.
    assert!(String::from_utf8_lossy(&as_bob(&["member", "role", "bob", "owner"]).stderr).contains("only a workspace owner"));
    assert!(String::from_utf8_lossy(&as_bob(&["member", "invite"]).stderr).contains("only a workspace owner"));
    let owner = d.json(&["member", "list"])[0]["name"].as_str().unwrap().to_string();
    assert!(d.fails(&["member", "role", &owner, "member"]).contains("at least one owner"));
    assert_eq!(d.json(&["member", "role", "bob", "admin"])["role"], "admin");

    // Revoking the token ends it at once.
    let (status, _) = http(&d.url, "GET", "/api/v1/me", Some(&token), b"");
    assert_eq!(status, 200);
    assert!(as_bob(&["token", "revoke", &id]).status.success());
    let (status, body) = http(&d.url, "GET", "/api/v1/me", Some(&token), b"");
    assert_eq!(status, 401, "{body}");
    assert!(String::from_utf8_lossy(&as_bob(&["token", "list"]).stderr).contains("revoked"));

    // Secrets are stored only hashed: neither the password nor the token is in the database.
    let db = database_text(d.home.path());
    assert!(!db.contains(PASSWORD) && !db.contains(&token), "a secret is stored in the clear");
    assert!(db.contains("$argon2id$"), "passwords are argon2id hashes");

    // Every change is on the audit trail with its actor.
    let audit = d.ok(&["audit", "export", "--since", "2000-01-01"]);
    let events: Vec<Value> = audit.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let kind = |k: &str| events.iter().find(|e| e["kind"] == k).unwrap_or_else(|| panic!("no {k} in {audit}"));
    assert_eq!(kind("member_invited")["actor"], owner.as_str());
    assert_eq!(kind("member_joined")["actor"], "bob");
    assert_eq!(kind("token_issued")["detail"]["member"], "bob");
    assert_eq!(kind("token_revoked")["actor"], "bob");
    assert_eq!(kind("role_changed")["detail"]["to"], "admin");
}

#[test]
fn sign_in_is_rate_limited_per_address_and_says_when_to_retry() {
    let d = Drover::up();
    join(&d, "carol", "member");
    assert_eq!(try_login(&d.url, "carol", PASSWORD).0, 200);
    for i in 0..10 {
        let (status, resp) = try_login(&d.url, "carol", "wrong password");
        assert_eq!(status, 401, "attempt {i}: {resp}");
    }
    // Limited now, even with the right password; the answer says when to retry.
    let (status, resp) = try_login(&d.url, "carol", PASSWORD);
    assert_eq!(status, 429, "{resp}");
    let retry: u64 = resp
        .lines()
        .find_map(|l| l.to_ascii_lowercase().strip_prefix("retry-after:").map(|v| v.trim().parse().unwrap()))
        .expect("a Retry-After header");
    assert!((1..=300).contains(&retry), "{retry}");
    assert!(resp.contains("too many failed sign-ins"));
}

#[test]
fn behind_a_trusted_proxy_one_clients_failures_never_lock_out_another() {
    let args = [test_sandbox_args(), vec!["--trusted-proxy".into(), "127.0.0.1".into()]].concat();
    let d = Drover::up_with(tempfile::tempdir().unwrap(), 2, args);
    join(&d, "carol", "member");
    for i in 0..10 {
        assert_eq!(try_login_from(&d.url, "carol", "wrong password", Some("198.51.100.1")).0, 401, "attempt {i}");
    }
    assert_eq!(try_login_from(&d.url, "carol", PASSWORD, Some("198.51.100.1")).0, 429, "the failing client is limited");
    let (status, resp) = try_login_from(&d.url, "carol", PASSWORD, Some("198.51.100.2"));
    assert_eq!(status, 200, "another client signs in: {resp}");
    assert!(resp.to_ascii_lowercase().contains("; secure"), "over https, as the proxy says, the cookie is Secure: {resp}");

    // Guessed from many addresses until the name is saturated: a client that has not
    // tried it still gets in with the right password, once; a guesser from a fresh
    // address gets one try.
    for a in 2..12 {
        for _ in 0..10 {
            try_login_from(&d.url, "carol", "wrong password", Some(&format!("203.0.113.{a}")));
        }
    }
    assert_eq!(try_login_from(&d.url, "carol", PASSWORD, Some("203.0.113.2")).0, 429);
    assert_eq!(try_login_from(&d.url, "carol", PASSWORD, Some("192.0.2.50")).0, 200, "a clean client is never locked out");
    assert_eq!(try_login_from(&d.url, "carol", "wrong password", Some("192.0.2.51")).0, 401);
    assert_eq!(try_login_from(&d.url, "carol", PASSWORD, Some("192.0.2.51")).0, 429, "one try per address while the name is hot");

    // Without --trusted-proxy the header is the client's own word: ignored.
    let plain = Drover::up_with(tempfile::tempdir().unwrap(), 2, test_sandbox_args());
    join(&plain, "carol", "member");
    for _ in 0..10 {
        try_login_from(&plain.url, "carol", "wrong password", Some("198.51.100.1"));
    }
    let (status, resp) = try_login_from(&plain.url, "carol", PASSWORD, Some("198.51.100.2"));
    assert_eq!(status, 429, "everyone is the one peer: {resp}");
}

#[test]
fn devices_enroll_once_with_their_token_and_keep_their_own_credential() {
    let mut s = Split::start("enrolled");
    // The enrollment token was traded for a credential the daemon saved for itself.
    let credential = s.device_credential();
    assert!(credential.starts_with("drd_") && credential != s.token);
    // It works once: a second trade (say, by someone who copied it) is refused.
    let body = json!({ "token": s.token, "name": "enrolled" }).to_string();
    let (status, answer) = http(&s.url, "POST", "/api/v1/devices/enroll", None, body.as_bytes());
    assert_eq!(status, 401, "{answer}");
    assert!(answer.contains("works once"));
    // A restart with the same command line uses the saved credential.
    s.kill_device();
    s.cli.wait_device("enrolled", false);
    s.start_device();
    // So does `drover device` alone, with the slots `device add` registered (one number).
    s.kill_device();
    s.cli.wait_device("enrolled", false);
    s.cli.json(&["device", "add", "enrolled", "--slots", "3"]);
    let never_enrolled = s.cli.fails(&["device"]);
    assert!(never_enrolled.contains("needs --server URL and --token TOKEN"), "{never_enrolled}");
    s.start_device_from_saved();
    assert_eq!(s.cli.json(&["device", "list"])[0]["slots"], 3);
    let id = s.cli.start(&["bash", "-c", "echo enrolled-ok; sleep 30"]);
    s.cli.wait_text(&id, "enrolled-ok", secs(20));
    // `device add` again issues a new enrollment; the device's credential is replaced
    // when it is used, so the old one stops working.
    let again = s.cli.json(&["device", "add", "enrolled"]);
    let fresh = again["enrollment_token"].as_str().unwrap();
    let cred = json!({ "token": fresh, "name": "enrolled" }).to_string();
    let (status, answer) = http(&s.url, "POST", "/api/v1/devices/enroll", None, cred.as_bytes());
    assert_eq!(status, 201, "{answer}");
    wait_until("the old credential refused", secs(20), || {
        let devices = s.cli.json(&["device", "list"]);
        (devices[0]["connected"] == false).then_some(())
    });
    s.cli.ok(&["session", "stop", &id]);
    // Each enrollment is on the record.
    let audit = s.cli.ok(&["audit", "export", "--since", "2000-01-01"]);
    assert_eq!(audit.lines().filter(|l| l.contains("\"device_enrolled\"")).count(), 2, "{audit}");
}

#[test]
fn a_burst_of_parallel_guesses_cannot_pass_the_limit() {
    let d = Drover::up();
    join(&d, "erin", "member");
    let url = d.url.clone();
    let answers: Vec<u16> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..30).map(|_| s.spawn(|| try_login(&url, "erin", "wrong password").0)).collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let tried = answers.iter().filter(|&&s| s == 401).count();
    let limited = answers.iter().filter(|&&s| s == 429).count();
    assert_eq!((tried, limited), (10, 20), "attempts are counted before the password is checked: {answers:?}");
}

#[test]
fn an_open_terminal_closes_when_its_viewer_loses_the_right_to_drop_in() {
    use futures_util::StreamExt;
    let d = Drover::up();
    join(&d, "frank", "admin");
    let id = d.start(&["bash", "-c", "echo frank-can-see; sleep 120"]);
    d.wait_text(&id, "frank-can-see", secs(20));
    let home = tempfile::tempdir().unwrap();
    assert!(login(&d, home.path(), "frank", PASSWORD).status.success());
    let token = serde_json::from_slice::<Value>(&std::fs::read(home.path().join("client.json")).unwrap()).unwrap()["token"]
        .as_str()
        .unwrap()
        .to_string();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        use tokio_tungstenite::tungstenite::client::IntoClientRequest;
        let ws_url = format!("{}/api/v1/sessions/{id}/terminal", d.url.replace("http://", "ws://"));
        let mut req = ws_url.into_client_request().unwrap();
        req.headers_mut().insert("authorization", format!("Bearer {token}").parse().unwrap());
        let (mut ws, _) = tokio_tungstenite::connect_async(req).await.expect("an admin may open the terminal");
        // Demoted to member (not the operator), the open terminal is closed with a reason.
        assert_eq!(d.json(&["member", "role", "frank", "member"])["role"], "member");
        let until = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
        let mut reason = None;
        while let Ok(Some(msg)) = tokio::time::timeout_at(until, ws.next()).await {
            match msg {
                Ok(tokio_tungstenite::tungstenite::Message::Text(t)) if t.contains("no permission") => reason = Some(t.to_string()),
                Ok(tokio_tungstenite::tungstenite::Message::Close(_)) | Err(_) => break,
                _ => {}
            }
        }
        assert!(reason.is_some(), "the terminal said why it closed");
    });
    d.ok(&["session", "stop", &id]);
}

/// `name`'s CLI token, after `drover login` into `home`.
fn token_of(d: &Drover, home: &std::path::Path, name: &str) -> String {
    assert!(login(d, home, name, PASSWORD).status.success());
    serde_json::from_slice::<Value>(&std::fs::read(home.join("client.json")).unwrap()).unwrap()["token"].as_str().unwrap().to_string()
}

#[test]
fn a_removed_member_is_locked_out_at_once_and_their_history_stays() {
    use futures_util::StreamExt;
    let d = Drover::up();
    join(&d, "gina", "admin");
    let home = tempfile::tempdir().unwrap();
    let token = token_of(&d, home.path(), "gina");
    let (status, resp) = try_login(&d.url, "gina", PASSWORD);
    assert_eq!(status, 200);
    let cookie = resp
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .starts_with("set-cookie:")
                .then(|| l.split_once(':').unwrap().1.trim().split(';').next().unwrap().to_string())
        })
        .expect("a cookie");
    // Gina starts a session of her own, and watches one of the owner's.
    let hers = d
        .cmd()
        .env("DROVER_TOKEN", &token)
        .env("DROVER_URL", &d.url)
        .args(["--json", "session", "start", "--device", &d.device, "--", "true"])
        .output()
        .unwrap();
    assert!(hers.status.success(), "{}", String::from_utf8_lossy(&hers.stderr));
    let hers = serde_json::from_slice::<Value>(&hers.stdout).unwrap()["id"].as_str().unwrap().to_string();
    let watched = d.start(&["bash", "-c", "echo gina-watches; sleep 120"]);
    d.wait_text(&watched, "gina-watches", secs(20));
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let mut ws = rt.block_on(async {
        use tokio_tungstenite::tungstenite::client::IntoClientRequest;
        let mut req = format!("{}/api/v1/sessions/{watched}/terminal", d.url.replace("http://", "ws://")).into_client_request().unwrap();
        req.headers_mut().insert("authorization", format!("Bearer {token}").parse().unwrap());
        tokio_tungstenite::connect_async(req).await.expect("an admin may open the terminal").0
    });

    let owner = d.json(&["member", "list"]).as_array().unwrap().iter().find(|m| m["role"] == "owner").unwrap()["name"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(d.fails(&["member", "remove", &owner]).contains("last owner"));
    let removed = std::time::Instant::now();
    d.ok(&["member", "remove", "gina"]);
    // Her open terminal closes at once, saying why.
    rt.block_on(async {
        let until = tokio::time::Instant::now() + std::time::Duration::from_secs(1);
        let mut closed = false;
        while let Ok(Some(msg)) = tokio::time::timeout_at(until, ws.next()).await {
            match msg {
                Ok(tokio_tungstenite::tungstenite::Message::Text(t)) if t.contains("revoked") => closed = true,
                Ok(tokio_tungstenite::tungstenite::Message::Close(_)) | Err(_) => break,
                _ => {}
            }
        }
        assert!(closed, "the terminal closed within a second of the removal");
    });
    assert!(removed.elapsed() < std::time::Duration::from_secs(2));
    // Her token and her browser are refused.
    let (status, _) = http(&d.url, "GET", "/api/v1/sessions", Some(&token), b"");
    assert_eq!(status, 401);
    let host = d.url.trim_start_matches("http://");
    let mut s = std::net::TcpStream::connect(host).unwrap();
    write!(s, "GET /api/v1/me HTTP/1.1\r\nHost: {host}\r\nCookie: {cookie}\r\nConnection: close\r\n\r\n").unwrap();
    let mut answer = String::new();
    std::io::Read::read_to_string(&mut s, &mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 401"), "{answer}");
    assert_eq!(try_login(&d.url, "gina", PASSWORD).0, 401, "nor can she sign in again");
    // What she did stays hers; she is no longer listed; the removal is audited.
    assert_eq!(d.show(&hers)["started_by"], "gina");
    assert!(!d.json(&["member", "list"]).as_array().unwrap().iter().any(|m| m["name"] == "gina"));
    let (_, events) = http(&d.url, "GET", "/api/v1/events?limit=200", Some(&d.token()), b"");
    assert!(events.contains("member_removed"), "{events}");
    d.ok(&["session", "stop", &watched]);
}

#[test]
fn owners_list_and_revoke_anyones_tokens_and_a_password_change_can_revoke_them_all() {
    let d = Drover::up();
    join(&d, "hank", "member");
    let (one, two) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let first = token_of(&d, one.path(), "hank");
    let second = token_of(&d, two.path(), "hank");
    let listed = d.json(&["token", "list", "--member", "hank"]);
    assert_eq!(listed.as_array().unwrap().len(), 2, "{listed}");
    // A member may not look at someone else's.
    let out = d.cmd().env("DROVER_HOME", one.path()).args(["token", "list", "--member", "root"]).output().unwrap();
    assert!(!out.status.success());
    // The owner revokes one of them.
    let id = listed[0]["id"].as_str().unwrap();
    d.ok(&["token", "revoke", id]);
    let still: Vec<u16> = [&first, &second].iter().map(|t| http(&d.url, "GET", "/api/v1/sessions", Some(t), b"").0).collect();
    assert_eq!(still.iter().filter(|s| **s == 401).count(), 1, "{still:?}");
    let live_home = if still[0] == 200 { &one } else { &two };
    let (other_home, live) = if still[0] == 200 { (&two, &first) } else { (&one, &second) };
    // A fresh login elsewhere, then a password change with --revoke-tokens from the live one.
    let third = token_of(&d, other_home.path(), "hank");
    let mut child = d
        .cmd()
        .env("DROVER_HOME", live_home.path())
        .args(["password", "--revoke-tokens"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    writeln!(child.stdin.take().unwrap(), "{PASSWORD}\nan even better password 42").unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(http(&d.url, "GET", "/api/v1/sessions", Some(&third), b"").0, 401, "the other login is revoked");
    assert_eq!(http(&d.url, "GET", "/api/v1/sessions", Some(live), b"").0, 200, "the one that made the change stays");
}

/// The first `wait` of the live update stream `/api/v1/stream?since=0` as `token` sees it.
fn stream_text(url: &str, token: &str, wait: std::time::Duration) -> String {
    use std::io::Read;
    let host = url.trim_start_matches("http://");
    let mut s = std::net::TcpStream::connect(host).unwrap();
    s.set_read_timeout(Some(wait)).unwrap();
    write!(s, "GET /api/v1/stream?since=0 HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\n\r\n").unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 8192];
    let until = std::time::Instant::now() + wait;
    while std::time::Instant::now() < until {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[test]
fn what_was_typed_and_the_command_line_are_seen_only_by_those_who_may_drop_in() {
    let d = Drover::up();
    join(&d, "ivy", "member");
    let ivy = token_of(&d, tempfile::tempdir().unwrap().path(), "ivy");
    let id = d.start(&["bash", "-c", "echo ready; read line; echo got-it; sleep 60", "argv-secret-42"]);
    d.wait_text(&id, "ready", secs(20));
    d.ok(&["session", "input", &id, "export API_KEY=sk-typed-secret"]);
    d.wait_text(&id, "got-it", secs(20));
    let owner = d.token();
    let routes = [
        "/api/v1/events?limit=500".to_string(),
        format!("/api/v1/sessions/{id}/events"),
        format!("/api/v1/sessions/{id}"),
        "/api/v1/sessions".into(),
    ];
    // The owner may drop in: everything.
    let all: String = routes.iter().map(|r| http(&d.url, "GET", r, Some(&owner), b"").1).collect();
    assert!(all.contains("sk-typed-secret") && all.contains("argv-secret-42"), "{all}");
    // Ivy may not: that input was sent, by whom and when; not what, nor the arguments.
    for r in &routes {
        let (status, body) = http(&d.url, "GET", r, Some(&ivy), b"");
        assert_eq!(status, 200, "{r}: {body}");
        assert!(!body.contains("sk-typed-secret") && !body.contains("argv-secret-42"), "{r}: {body}");
    }
    let (_, events) = http(&d.url, "GET", &format!("/api/v1/sessions/{id}/events"), Some(&ivy), b"");
    let events: Value = serde_json::from_str(&events).unwrap();
    let sent = events.as_array().unwrap().iter().find(|e| e["kind"] == "input_sent").expect("the input is in her feed");
    assert_eq!(sent["detail"]["concealed"], true);
    assert!(sent["actor"].is_string() && sent["at"].is_string());
    let live = stream_text(&d.url, &ivy, std::time::Duration::from_millis(1500));
    assert!(live.contains("input_sent") && !live.contains("sk-typed-secret") && !live.contains("argv-secret-42"), "{live}");
    assert!(stream_text(&d.url, &owner, std::time::Duration::from_millis(1500)).contains("sk-typed-secret"));
}

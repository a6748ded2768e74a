//! JSON logs end to end with the real binary: `drover up` and a `drover device` log at
//! debug level with `--log-format json` while the test signs in, uses tokens, enrols a
//! device and calls the API. Every line of stderr parses as JSON, a response's
//! `x-request-id` is in the log lines of its request, and no secret the test used or
//! was given appears anywhere in the logs.
#![allow(clippy::too_many_lines)] // an end-to-end test reads best as one scenario

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};
use support::*;

/// Processes to end when the test does, however it ends.
struct Procs(Vec<Child>, Vec<std::path::PathBuf>);

impl Drop for Procs {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
        for home in &self.1 {
            kill_sessions(home);
        }
    }
}

/// `drover --log-format json ARGS` in `home`, logging at debug level into `log`.
fn spawn_json(home: &Path, args: &[&str], log: &Path) -> Child {
    let mut c = Command::new(bin());
    if let Some(db) = test_database(home) {
        c.env("DROVER_DATABASE", db);
    }
    c.arg("--log-format")
        .arg("json")
        .args(args)
        .env("DROVER_HOME", home)
        .env("RUST_LOG", "debug")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(log).expect("log file"))
        .spawn()
        .expect("spawn drover")
}

/// An HTTP/1.1 request with extra headers: (status, headers (names lower-case), body).
fn request(url: &str, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> (u16, Vec<(String, String)>, String) {
    let host = url.trim_start_matches("http://");
    let mut s = std::net::TcpStream::connect(host).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let extra: String = headers.iter().map(|(k, v)| format!("{k}: {v}\r\n")).collect();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\n{extra}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(head.as_bytes()).unwrap();
    let mut resp = Vec::new();
    let _ = s.read_to_end(&mut resp);
    let text = String::from_utf8_lossy(&resp).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status = lines.next().and_then(|l| l.split_whitespace().nth(1)).and_then(|s| s.parse().ok()).unwrap_or(0);
    let headers = lines.filter_map(|l| l.split_once(':')).map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string())).collect();
    (status, headers, body.to_string())
}

fn header<'h>(headers: &'h [(String, String)], name: &str) -> Option<&'h str> {
    headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

/// Reads `up`'s banner: (its URL, the one-time sign-in code of its `open:` line).
fn banner(child: &mut Child) -> (String, String) {
    let mut lines = BufReader::new(child.stdout.take().expect("piped stdout")).lines();
    let mut url = None;
    let code = loop {
        let line = lines.next().expect("up ended before its banner").expect("read stdout");
        if let Some(rest) = line.strip_prefix("Drover is running at ") {
            url = Some(rest.trim().to_string());
        } else if let Some((_, rest)) = line.split_once("/login#") {
            break rest.split_whitespace().next().expect("a code").to_string();
        }
    };
    std::thread::spawn(move || for _ in lines.by_ref() {});
    (url.expect("the URL comes first"), code)
}

/// Every line of `log`, each parsed as a JSON object.
fn json_lines(log: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(log).expect("read the log");
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("a log line that is not JSON ({e}): {l}"));
            assert!(v.is_object() && v["level"].is_string() && v["timestamp"].is_string(), "not a log object: {l}");
            v
        })
        .collect()
}

/// The spans a log line is in.
fn spans(line: &Value) -> Vec<&Value> {
    line["spans"].as_array().map(|a| a.iter().collect()).unwrap_or_default()
}

#[test]
fn json_logs_carry_request_ids_and_never_a_secret() {
    let (home, logs) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (up_log, device_log) = (logs.path().join("up.log"), logs.path().join("device.log"));
    let allowance = test_sandbox_args();
    let mut args = vec!["up", "--listen", "127.0.0.1:0", "--name", "logdev", "--slots", "2"];
    args.extend(allowance.iter().map(String::as_str));
    let mut up = spawn_json(home.path(), &args, &up_log);
    let (url, login_code) = banner(&mut up);
    let mut procs = Procs(vec![up], vec![home.path().join("device")]);
    let cli = Drover::attach_to(home.path(), &url, "logdev");
    let mut secrets: Vec<(&str, String)> = vec![("the sign-in link's code", login_code.clone()), ("the CLI's token", cli.token())];

    // A password set, then used to sign in (browser and CLI), once wrong.
    let password = "correct horse battery staple 7f3a";
    secrets.push(("the password", password.to_string()));
    let me = cli.json(&["token", "list"]);
    assert!(me.is_array(), "{me}");
    let mut set = cli.cmd().args(["password"]).stdin(Stdio::piped()).stdout(Stdio::null()).spawn().unwrap();
    writeln!(set.stdin.take().unwrap(), "{password}").unwrap();
    assert!(set.wait().unwrap().success(), "drover password");
    let (_, _, body) = request(&url, "GET", "/api/v1/me", &[("Authorization", &format!("Bearer {}", cli.token()))], "");
    let name = serde_json::from_str::<Value>(&body).unwrap()["name"].as_str().expect("my name").to_string();
    let (status, headers, _) = request(&url, "POST", "/api/v1/login", &[], &json!({ "name": name, "password": password }).to_string());
    assert_eq!(status, 200, "sign-in with the password");
    let cookie = header(&headers, "set-cookie").expect("a session cookie").split(';').next().unwrap().to_string();
    secrets.push(("the session cookie", cookie.split_once('=').unwrap().1.to_string()));
    let (status, _, _) = request(&url, "POST", "/api/v1/login", &[], &json!({ "name": name, "password": "wrong guess 1234" }).to_string());
    assert_eq!(status, 401);
    let (status, _, _) = request(&url, "GET", "/api/v1/me", &[("Cookie", &cookie)], "");
    assert_eq!(status, 200, "the cookie signs in");

    // The one-time sign-in link, redeemed.
    let (status, headers, _) = request(&url, "POST", "/api/v1/login/link", &[], &json!({ "code": login_code }).to_string());
    assert_eq!(status, 204, "the sign-in link");
    secrets
        .push(("the link's cookie", header(&headers, "set-cookie").unwrap().split(';').next().unwrap().split_once('=').unwrap().1.into()));

    // A token made and used, with the client's own request id.
    let made = cli.json(&["token", "create", "ci"]);
    let token = made["token"].as_str().expect("a token").to_string();
    secrets.push(("a new API token", token.clone()));
    let bearer = format!("Bearer {token}");
    let (status, headers, _) =
        request(&url, "GET", "/api/v1/sessions", &[("Authorization", &bearer), ("X-Request-Id", "logs-test-42")], "");
    assert_eq!(status, 200);
    assert_eq!(header(&headers, "x-request-id"), Some("logs-test-42"), "a well-formed id is echoed");
    let (_, headers, _) = request(&url, "GET", "/api/v1/sessions", &[("Authorization", &bearer), ("X-Request-Id", "two words")], "");
    let made_up = header(&headers, "x-request-id").expect("every response has an id").to_string();
    assert!(made_up.len() == 32 && made_up.chars().all(|c| c.is_ascii_hexdigit()), "a malformed id is replaced: {made_up}");
    let (status, headers, _) = request(&url, "GET", "/api/v1/nope?token=abc", &[("Authorization", &bearer)], "");
    assert_eq!(status, 404);
    assert!(header(&headers, "x-request-id").is_some(), "errors carry an id too");
    let (status, headers, _) = request(&url, "GET", "/", &[], "");
    assert_eq!(status, 200);
    assert!(header(&headers, "x-request-id").is_some(), "the web app's pages too");

    // A device enrolled with a one-time token, which it trades for its credential.
    let added = cli.json(&["device", "add", "edge", "--slots", "2"]);
    let enrollment = added["enrollment_token"].as_str().expect("an enrollment token").to_string();
    secrets.push(("the enrollment token", enrollment.clone()));
    let device_home = tempfile::tempdir().unwrap();
    let mut dargs = vec!["device", "--server", &url, "--token", &enrollment, "--name", "edge"];
    dargs.extend(allowance.iter().map(String::as_str));
    procs.0.push(spawn_json(device_home.path(), &dargs, &device_log));
    procs.1.push(device_home.path().join("device-daemon"));
    cli.wait_device("edge", true);
    let saved: Value = serde_json::from_slice(&std::fs::read(device_home.path().join("device-daemon/credential.json")).unwrap()).unwrap();
    secrets.push(("the device credential", saved["token"].as_str().unwrap().to_string()));

    // A run on that device: its per-session work is logged in its spans.
    let out = cli.ok(&["session", "start", "--device", "edge", "--", "sh", "-c", "echo logged-run"]);
    cli.wait_ended(out.trim(), secs(30));

    // Stopped with SIGTERM: their farewells are log lines too.
    for child in &procs.0 {
        let _ = Command::new("kill").arg("-TERM").arg(child.id().to_string()).status();
    }
    for child in &mut procs.0 {
        let _ = child.wait();
    }

    let up_lines = json_lines(&up_log);
    let device_lines = json_lines(&device_log);
    assert!(up_lines.len() > 20 && !device_lines.is_empty(), "debug logging says something");
    let tagged: Vec<&Value> =
        up_lines.iter().filter(|l| spans(l).iter().any(|s| s["name"] == "http" && s["request_id"] == "logs-test-42")).collect();
    assert!(!tagged.is_empty(), "a line of the request with the client's id");
    let http = spans(tagged[0]).into_iter().find(|s| s["name"] == "http").unwrap();
    assert_eq!((http["method"].as_str(), http["route"].as_str()), (Some("GET"), Some("/api/v1/sessions")));
    assert!(tagged.iter().any(|l| l["message"] == "request served" && l["status"] == 200), "an access line");
    assert!(up_lines.iter().any(|l| spans(l).iter().any(|s| s["request_id"] == made_up.as_str())), "the made-up id is logged");
    assert!(
        up_lines.iter().any(|l| spans(l).iter().any(|s| s["name"] == "device" && s["device"] == "edge")),
        "the server's device link logs in the device's span"
    );
    assert!(
        device_lines.iter().any(|l| spans(l).iter().any(|s| s["name"] == "session")),
        "the daemon's per-session work logs in the session's span"
    );
    assert!(up_lines.iter().any(|l| l["message"].as_str().is_some_and(|m| m.contains("shutting down"))), "the farewell is JSON");

    let all = format!("{}\n{}", std::fs::read_to_string(&up_log).unwrap(), std::fs::read_to_string(&device_log).unwrap());
    assert!(!all.contains("?token=abc"), "a query string is never logged");
    for (what, secret) in &secrets {
        assert!(secret.len() >= 8, "{what} is a real secret");
        assert!(!all.contains(secret.as_str()), "{what} was logged");
    }
}

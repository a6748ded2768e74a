//! End-to-end: Prometheus metrics. A real `drover up` serves `/metrics` to an owner's
//! token and, with `--metrics-listen`, on a listener of its own; a split `drover server`
//! and `drover device` each serve theirs. Every scrape passes `promtool check metrics`
//! (Debian's `prometheus` package), and the counters move with what the test does: a
//! session run to its end, a webhook delivered to a real receiver, a failed sign-in.
//! No session id ever shows in the metrics.

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use support::{http, secs, test_sandbox_args, wait_until, Drover, Split};

/// A free port on loopback (taken and given back: the test's own processes bind it next).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Asserts `promtool check metrics` accepts `text`; fails (never skips) without promtool.
fn promtool(text: &str, what: &str) {
    let child =
        Command::new("promtool").args(["check", "metrics"]).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            panic!("promtool is not installed: install Debian's `prometheus` package (apt-get install -y prometheus), as .ci/run does")
        }
        Err(e) => panic!("running promtool: {e}"),
    };
    child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool check metrics refused the {what} metrics: {}{}\n--- the metrics:\n{text}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Scrapes `/metrics` at `base` (with `token`, if any), asserting a 200.
fn scrape(base: &str, token: Option<&str>) -> String {
    let (status, body) = http(base, "GET", "/metrics", token, b"");
    assert_eq!(status, 200, "GET {base}/metrics: {body}");
    body
}

/// The value of the sample named exactly `series` (with its labels), if it is there.
fn value(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.trim().parse().ok())
}

/// The sum of every sample of `name` (any labels).
fn sum(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) || l.starts_with(&format!("{name} ")))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// A webhook receiver on loopback that answers 204 to every request and counts them.
fn receiver() -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let got = Arc::new(AtomicUsize::new(0));
    let counted = got.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            let mut reader = BufReader::new(conn);
            let mut length = 0;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap_or(0);
                }
            }
            let mut body = vec![0; length];
            let _ = reader.read_exact(&mut body);
            counted.fetch_add(1, Ordering::SeqCst);
            let _ = reader.get_mut().write_all(b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n");
        }
    });
    (url, got)
}

#[test]
fn up_serves_metrics_that_promtool_accepts_and_that_move_with_sessions_webhooks_and_sign_ins() {
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let mut args = test_sandbox_args();
    args.extend(["--metrics-listen", &listen, "--allow-local-webhooks", "--webhook-retry-secs", "0.2"].map(String::from));
    let d = Drover::up_with(tempfile::tempdir().unwrap(), 4, args);
    let token = d.token();
    let open = format!("http://{listen}");

    // Refused without an owner's or admin's token; served with one and on the listener.
    assert_eq!(http(&d.url, "GET", "/metrics", None, b"").0, 401);
    assert_eq!(http(&d.url, "GET", "/metrics", Some("drt_not-a-real-token"), b"").0, 401);
    let before = scrape(&d.url, Some(&token));
    promtool(&before, "server (token)");
    promtool(&scrape(&open, None), "server (--metrics-listen)");
    assert_eq!(value(&before, "drover_devices_connected"), Some(1.0), "{before}");
    assert_eq!(value(&before, "drover_sign_in_failures_total{reason=\"wrong_password\"}"), Some(0.0), "{before}");

    // A webhook, a session run to its end, and a failed sign-in.
    let (hook_url, delivered) = receiver();
    d.ok(&["webhook", "add", &hook_url, "--event", "session.ended"]);
    let id = d.start(&["sh", "-c", "echo metrics-hello"]);
    d.wait_ended(&id, secs(30));
    let (status, _) = http(&d.url, "POST", "/api/v1/login/token", None, br#"{"name":"nobody","password":"wrong password","label":"x"}"#);
    assert_eq!(status, 401);
    wait_until("the receiver to get the delivery", secs(30), || (delivered.load(Ordering::SeqCst) >= 1).then_some(()));

    let after = wait_until("the counters to move", secs(30), || {
        let t = scrape(&d.url, Some(&token));
        let moved = sum(&t, "drover_sessions_ended_total") >= 1.0
            && value(&t, "drover_webhook_deliveries_total{result=\"delivered\"}") >= Some(1.0)
            && value(&t, "drover_sign_in_failures_total{reason=\"wrong_password\"}") >= Some(1.0);
        moved.then_some(t)
    });
    promtool(&after, "server after a session");
    assert!(value(&after, "drover_output_bytes_total") > Some(0.0), "{after}");
    assert!(value(&after, "drover_output_commits_total") >= Some(1.0), "{after}");
    assert!(value(&after, "drover_output_commit_duration_seconds_count") >= Some(1.0), "{after}");
    assert!(value(&after, "drover_device_forwarded_bytes_total") > Some(0.0), "the local device's series: {after}");
    assert!(
        value(&after, "drover_http_request_duration_seconds_count{route=\"/api/v1/sessions\",method=\"POST\",status=\"2xx\"}") >= Some(1.0)
    );
    assert!(
        value(&after, "drover_http_request_duration_seconds_count{route=\"/api/v1/login/token\",method=\"POST\",status=\"4xx\"}")
            >= Some(1.0)
    );
    assert_eq!(value(&after, "drover_sessions_live{device=\"testdev\"}"), Some(0.0), "{after}");
    assert_eq!(value(&after, "drover_leases_held{monitor=\"webhooks\"}"), Some(1.0), "{after}");
    // What the process holds: its live structures (the session's hub is gone once it
    // ended), its resident memory and heap, and SQLite's share of it on SQLite.
    assert_eq!(value(&after, "drover_live_items{structure=\"device_links\"}"), Some(1.0), "{after}");
    assert_eq!(value(&after, "drover_live_items{structure=\"hubs\"}"), Some(0.0), "{after}");
    assert!(value(&after, "drover_live_items{structure=\"tasks\"}") > Some(0.0), "{after}");
    assert!(value(&after, "process_resident_memory_bytes") > Some(1e6), "{after}");
    assert!(value(&after, "drover_heap_bytes{state=\"in_use\"}") > Some(0.0), "{after}");
    if support::test_database(d.home.path()).is_none() {
        assert!(value(&after, "drover_sqlite_memory_bytes") > Some(0.0), "{after}");
    }
    assert_eq!(value(&after, "drover_webhook_queue_depth"), Some(0.0), "{after}");

    // The Grafana dashboard graphs only series the server (and its device) serve.
    let dashboard = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/grafana/drover.json")).unwrap();
    let dashboard: serde_json::Value = serde_json::from_str(&dashboard).expect("the dashboard is JSON");
    assert_eq!(dashboard["templating"]["list"][0]["type"], "datasource");
    let exprs: Vec<&str> = dashboard["panels"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["targets"].as_array().into_iter().flatten())
        .filter_map(|t| t["expr"].as_str())
        .collect();
    assert!(exprs.len() >= 20, "{exprs:?}");
    for expr in exprs {
        // (Spend shows with the first priced model response, which no run here makes.)
        let words = expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'));
        for name in words.filter(|w| w.starts_with("drover_") && *w != "drover_spend_usd_total") {
            assert!(after.contains(name), "the dashboard graphs `{name}`, which the server does not serve");
        }
    }

    // A page no route matches is counted under a fixed label, never its path.
    http(&d.url, "GET", "/no/such/page-xyzzy", None, b"");
    let last = scrape(&open, None);
    promtool(&last, "server (--metrics-listen) after a session");
    assert!(last.contains("route=\"unmatched\""), "{last}");
    for t in [&after, &last] {
        assert!(!t.contains(&id), "a session id in the metrics: {t}");
        assert!(!t.contains(&token), "a token in the metrics");
        assert!(!t.contains("xyzzy"), "a raw path in the metrics");
    }
}

#[test]
fn a_device_daemon_serves_its_own_metrics_and_a_server_its_own() {
    let (server_port, device_port) = (free_port(), free_port());
    let (server_listen, device_listen) = (format!("127.0.0.1:{server_port}"), format!("127.0.0.1:{device_port}"));
    let mut s = Split::start_with("metered", &["--metrics-listen", &server_listen], &["--metrics-listen", &device_listen]);
    let device = format!("http://{device_listen}");

    let first = scrape(&device, None);
    promtool(&first, "device");
    assert_eq!(value(&first, "drover_device_link_up"), Some(1.0), "{first}");
    assert_eq!(value(&first, "drover_device_shims"), Some(0.0), "{first}");
    // The daemon's own memory, to tell what it keeps from what its allocator holds.
    assert!(value(&first, "process_resident_memory_bytes") > Some(0.0), "{first}");
    assert!(value(&first, "drover_heap_bytes{state=\"in_use\"}") > Some(0.0), "{first}");

    // A session's shim is counted while it runs, its output as it is forwarded.
    let id = s.cli.start(&["sh", "-c", "echo device-metrics; sleep 60"]);
    s.cli.wait_text(&id, "device-metrics", secs(30));
    let running = wait_until("the shim to be counted", secs(20), || {
        let t = scrape(&device, None);
        (value(&t, "drover_device_shims") == Some(1.0)).then_some(t)
    });
    assert!(value(&running, "drover_device_forwarded_bytes_total") > Some(0.0), "{running}");
    let live = scrape(&format!("http://{server_listen}"), None);
    promtool(&live, "server (split)");
    assert_eq!(value(&live, "drover_sessions_live{device=\"metered\"}"), Some(1.0), "{live}");
    assert_eq!(value(&live, "drover_websocket_links{kind=\"device\"}"), Some(1.0), "{live}");
    s.cli.ok(&["session", "stop", &id]);
    s.cli.wait_ended(&id, secs(30));
    wait_until("the shim to be let go", secs(20), || (value(&scrape(&device, None), "drover_device_shims") == Some(0.0)).then_some(()));

    // The server goes away and comes back: the link is tried again.
    s.restart_server();
    s.cli.wait_device("metered", true);
    let last = wait_until("a reconnect to be counted", secs(30), || {
        let t = scrape(&device, None);
        (value(&t, "drover_device_link_reconnects_total") >= Some(1.0) && value(&t, "drover_device_link_up") == Some(1.0)).then_some(t)
    });
    promtool(&last, "device after a reconnect");
    assert!(!last.contains(&id) && !live.contains(&id), "a session id in the metrics");
}

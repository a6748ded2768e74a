//! End-to-end: what a server holds in memory follows the work it holds now, not the
//! work it has done. A real `drover up` runs 1,000 sessions, each with a viewer on its
//! terminal (a real WebSocket) that types the line the session waits for; once they have
//! all ended and their viewers left, every live structure the server counts in
//! `/metrics` (`drover_live_items`: hubs, viewers, rings, requests waiting on devices,
//! tasks, …) is back to what it was before they started. The starting counts are taken
//! after a first wave of sessions has come and gone and a heartbeat has passed, so what
//! a server starts once, on first use (the heartbeat writer, a pool's connections), is
//! in them. Counts, not timings: nothing here depends on the machine's speed.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use support::{http, secs, wait_until, Drover};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;

const SESSIONS: usize = 1000;
/// Sessions running at once (the device has a few more slots).
const AT_ONCE: usize = 24;

/// The server's live structures, by name, from `/metrics`.
fn live_items(d: &Drover, token: &str) -> BTreeMap<String, i64> {
    let (status, body) = http(&d.url, "GET", "/metrics", Some(token), b"");
    assert_eq!(status, 200, "GET /metrics: {body}");
    body.lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("drover_live_items{structure=\"")?;
            let (name, value) = rest.split_once("\"} ")?;
            Some((name.to_string(), value.trim().parse().ok()?))
        })
        .collect()
}

/// Starts one session that waits for a line, opens its terminal, types the line, and
/// reads until the session has ended and the server has closed the socket.
async fn one_session(client: reqwest::Client, url: String, token: String, device: String, n: usize) {
    let body = json!({ "device": device, "command": ["sh", "-c", format!("echo waiting-{n}; read line; echo got $line")] });
    let resp = client.post(format!("{url}/api/v1/sessions")).bearer_auth(&token).json(&body).send().await.expect("POST /sessions");
    assert!(resp.status().is_success(), "starting session {n}: {}", resp.text().await.unwrap_or_default());
    let id = resp.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_string();
    let mut req = format!("{}/api/v1/sessions/{id}/terminal", url.replace("http://", "ws://")).into_client_request().unwrap();
    req.headers_mut().insert("authorization", format!("Bearer {token}").parse().unwrap());
    let (mut ws, _) = tokio_tungstenite::connect_async(req).await.expect("the terminal opens");
    let (mut seen, mut typed, mut ended) = (Vec::new(), false, false);
    let until = tokio::time::Instant::now() + Duration::from_secs(120);
    while let Ok(Some(msg)) = tokio::time::timeout_at(until, ws.next()).await {
        match msg {
            Ok(Message::Binary(b)) => seen.extend_from_slice(&b),
            Ok(Message::Text(t)) => ended |= t.contains("\"ended\""),
            Ok(Message::Close(_)) | Err(_) => break,
            _ => {}
        }
        if !typed && String::from_utf8_lossy(&seen).contains(&format!("waiting-{n}")) {
            ws.send(Message::Binary(format!("hello-{n}\r").into_bytes().into())).await.expect("typing");
            typed = true;
        }
    }
    let answered = String::from_utf8_lossy(&seen).contains(&format!("got hello-{n}"));
    if !(typed && answered && ended) {
        // What the server stored says which side lost the line: the viewer's path or the
        // recording.
        let stored = client.get(format!("{url}/api/v1/sessions/{id}/output")).bearer_auth(&token).send().await;
        let stored = match stored {
            Ok(r) => format!("{} {:?}", r.status(), String::from_utf8_lossy(&r.bytes().await.unwrap_or_default())),
            Err(e) => e.to_string(),
        };
        panic!(
            "session {n} ({id}): typed {typed}, answered {answered}, ended {ended}; saw {:?}; stored {stored}",
            String::from_utf8_lossy(&seen)
        );
    }
}

/// Runs sessions `range` ([`one_session`] each), [`AT_ONCE`] at a time.
fn run_sessions(d: &Drover, token: &str, range: std::ops::Range<usize>) {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        let client = reqwest::Client::builder().pool_max_idle_per_host(0).build().unwrap();
        let mut numbers = range.into_iter();
        let mut running = tokio::task::JoinSet::new();
        loop {
            while running.len() < AT_ONCE {
                let Some(n) = numbers.next() else { break };
                running.spawn(one_session(client.clone(), d.url.clone(), token.to_string(), d.device.clone(), n));
            }
            match running.join_next().await {
                Some(done) => done.expect("a session's task"),
                None => break,
            }
        }
    });
}

#[test]
fn live_structures_return_to_their_starting_counts_after_a_thousand_sessions_with_viewers() {
    let d = Drover::up_with_slots(tempfile::tempdir().unwrap(), AT_ONCE as u32 + 8);
    let token = d.token();
    wait_until("the device linked", secs(30), || (live_items(&d, &token).get("device_links") == Some(&1)).then_some(()));
    run_sessions(&d, &token, 0..AT_ONCE);
    std::thread::sleep(Duration::from_secs(16));
    let before = wait_until("the first wave gone", secs(60), || {
        let items = live_items(&d, &token);
        (items.get("hubs") == Some(&0) && items.get("hub_viewers") == Some(&0)).then_some(items)
    });
    for name in ["hubs", "hub_viewers", "hub_ring_bytes", "device_links", "device_requests_waiting", "tasks"] {
        assert!(before.contains_key(name), "/metrics counts {name}: {before:?}");
    }

    run_sessions(&d, &token, AT_ONCE..AT_ONCE + SESSIONS);

    // Every session ended and every viewer gone: each count returns to where it was.
    let mut last = BTreeMap::new();
    let settled = (0..120).any(|_| {
        last = live_items(&d, &token);
        let back = before.iter().all(|(name, was)| last.get(name) == Some(was));
        if !back {
            std::thread::sleep(Duration::from_millis(500));
        }
        back
    });
    let moved: Vec<String> =
        before.iter().filter(|(n, was)| last.get(*n) != Some(*was)).map(|(n, was)| format!("{n}: {was} → {:?}", last.get(n))).collect();
    assert!(settled, "after {SESSIONS} sessions, live structures did not return to their starting counts: {}", moved.join(", "));
}

//! End-to-end: `session tail --follow` and `session attach` ride out a server restart:
//! they reconnect with backoff, say so on stderr meanwhile, and resume where they were,
//! with nothing lost or printed twice.

mod support;

use std::io::Read;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use support::term::Attached;
use support::{secs, Drover};

/// Collects a pipe's bytes on a thread.
fn collect(mut pipe: impl Read + Send + 'static) -> Arc<Mutex<Vec<u8>>> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let into = seen.clone();
    std::thread::spawn(move || {
        let mut buf = [0u8; 8192];
        while let Ok(n @ 1..) = pipe.read(&mut buf) {
            into.lock().unwrap().extend_from_slice(&buf[..n]);
        }
    });
    seen
}

fn text(seen: &Arc<Mutex<Vec<u8>>>) -> String {
    String::from_utf8_lossy(&seen.lock().unwrap()).into_owned()
}

#[test]
fn tail_follow_survives_a_server_restart_with_every_line_once() {
    let mut d = Drover::up();
    let id = d.start(&["sh", "-c", "i=0; while [ $i -lt 800 ]; do i=$((i+1)); echo line-$i; sleep 0.01; done"]);
    let mut tail =
        d.cmd().args(["session", "tail", &id, "--follow", "-n", "100000"]).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let out = collect(tail.stdout.take().unwrap());
    let err = collect(tail.stderr.take().unwrap());
    support::wait_until("tail to print line-60", secs(30), || text(&out).contains("line-60\n").then_some(()));
    d.restart_up();
    let deadline = Instant::now() + secs(90);
    let status = loop {
        if let Some(status) = tail.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = tail.kill();
            panic!("tail --follow did not end: {}\nstderr: {}", text(&out), text(&err));
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    std::thread::sleep(Duration::from_millis(200));
    let (out, err) = (text(&out), text(&err));
    assert!(status.success(), "tail failed: {err}");
    let expected: Vec<String> = (1..=800).map(|i| format!("line-{i}")).collect();
    let got: Vec<&str> = out.lines().collect();
    assert!(got.len() == 800 && got.iter().zip(&expected).all(|(a, b)| a == b), "{} lines, not 800 once each in order: {out}", got.len());
    assert!(err.contains("reconnecting"), "no reconnecting status: {err:?}");
}

#[test]
fn attach_survives_a_server_restart_and_keeps_working() {
    let mut d = Drover::up();
    let id = d.start(&["cat"]);
    d.wait_for(&id, secs(20), |s| s["outcome"] == "running");
    let mut a = Attached::start(&d, &id, &[], 80, 24);
    d.wait_for(&id, secs(20), |s| s["attached"] == 1);
    a.type_bytes(b"before restart\r");
    a.wait_for("before restart\r\nbefore restart", secs(20));
    d.restart_up();
    a.wait_for("reconnecting", secs(20));
    // Back once the new connection repainted the screen (a count of attached viewers may
    // still include the old server's, on a shared database).
    let deadline = Instant::now() + secs(30);
    while !a.text().rsplit_once("reconnecting").is_some_and(|(_, after)| after.contains("before restart")) {
        assert!(Instant::now() < deadline, "attach never reconnected: {:?}", a.text());
        std::thread::sleep(Duration::from_millis(50));
    }
    a.type_bytes(b"after restart\r");
    a.wait_for("after restart\r\nafter restart", secs(30));
    a.type_bytes(&[0x1d]);
    assert!(a.wait_exit(secs(20)), "attach failed: {}", a.text());
    assert!(a.text().contains("detached from"), "{}", a.text());
}

//! Input-to-echo latency: a keystroke typed into `drover session attach` until its echo
//! comes back out of attach, to `cat` in the session; against the same through a bare
//! PTY (`cat` run directly in the bench's PTY). Idle, then with other sessions streaming.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde::Serialize;

use crate::drover::Up;
use crate::percentile;
use crate::pty::PtyProc;

/// Latency percentiles in milliseconds.
#[derive(Debug, Serialize)]
pub struct Percentiles {
    /// Median.
    pub p50_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// Worst.
    pub max_ms: f64,
}

/// Latency figures.
#[derive(Debug, Serialize)]
pub struct Latency {
    /// Keystrokes per run.
    pub keys: usize,
    /// Bare PTY baseline.
    pub bare_pty: Percentiles,
    /// Through drover, nothing else running.
    pub drover_idle: Percentiles,
    /// Through drover with `streams` other sessions printing.
    pub drover_loaded: Percentiles,
    /// Sessions streaming during the loaded run.
    pub streams: usize,
}

fn keystrokes(p: &mut PtyProc, keys: usize) -> Result<Percentiles> {
    let mut lat = Vec::with_capacity(keys);
    for i in 0..keys {
        let ch = b'a' + (i % 26) as u8;
        let before = p.bytes();
        let t0 = Instant::now();
        p.write(&[ch])?;
        let t1 = p.wait_for(&[ch], before, Duration::from_secs(10))?;
        lat.push((t1 - t0).as_secs_f64() * 1000.0);
        if i % 64 == 63 {
            let before = p.bytes();
            p.write(b"\r")?;
            p.wait_for(b"\n", before, Duration::from_secs(10))?;
            std::thread::sleep(Duration::from_millis(30));
        }
    }
    Ok(Percentiles { p50_ms: percentile(&mut lat, 50.0), p99_ms: percentile(&mut lat, 99.0), max_ms: percentile(&mut lat, 100.0) })
}

pub(crate) fn through_drover(up: &Up, keys: usize) -> Result<Percentiles> {
    let id = up.start_session(80, 24, &["cat"])?;
    up.wait_running(&id)?;
    let home = up.home.path().to_str().context("home")?.to_string();
    let exe = up.exe.to_str().context("exe")?.to_string();
    let mut attach = PtyProc::spawn(&[&exe, "session", "attach", &id], &[("DROVER_HOME", &home)], 80, 24)?;
    let deadline = Instant::now() + Duration::from_secs(20);
    while !up.cli(&["--json", "session", "show", &id])?.contains("\"attached\": 1") {
        anyhow::ensure!(Instant::now() < deadline, "attach never connected");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(500));
    let r = keystrokes(&mut attach, keys);
    drop(attach);
    let _ = up.cli(&["session", "stop", &id]);
    r
}

/// Runs the latency comparison.
pub fn run(exe: &Path, keys: usize, streams: usize) -> Result<Latency> {
    let mut bare = PtyProc::spawn(&["cat"], &[], 80, 24)?;
    std::thread::sleep(Duration::from_millis(200));
    let bare_pty = keystrokes(&mut bare, keys)?;
    drop(bare);
    let up = Up::start(exe)?;
    let drover_idle = through_drover(&up, keys)?;
    let mut ids = Vec::new();
    for _ in 0..streams {
        ids.push(up.start_session(100, 30, &["sh", "-c", "while :; do seq 1 1000; sleep 0.1; done"])?);
    }
    std::thread::sleep(Duration::from_secs(1));
    let drover_loaded = through_drover(&up, keys)?;
    let r = Latency { keys, bare_pty, drover_idle, drover_loaded, streams };
    let show =
        |name: &str, p: &Percentiles| println!("  {name:<38} p50 {:.2} ms  p99 {:.2} ms  max {:.2} ms", p.p50_ms, p.p99_ms, p.max_ms);
    println!("latency ({keys} keystrokes to cat, echo seen by the typing client; goal p99 < 5 ms):");
    show("bare PTY", &r.bare_pty);
    show("drover attach", &r.drover_idle);
    show(&format!("drover attach, {streams} other sessions streaming"), &r.drover_loaded);
    Ok(r)
}

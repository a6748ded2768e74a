//! Input-to-echo latency: a keystroke typed into `drover session attach` until its echo
//! comes back out of attach, to `cat` in the session; against the same through `tmux
//! attach` (the baseline the goal is set against) and a bare PTY (`cat` run directly in
//! the bench's PTY). Attach runs on the session's machine, so it takes the local path;
//! `--via-server` (the route from any other machine) is measured beside it. Idle, then
//! with other sessions streaming. Keys come `gap` apart, as people type: back to back,
//! every process stays hot and wake-ups cost nothing.

use std::path::Path;
use std::process::{Command, Stdio};
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
    /// Milliseconds between one key's echo and the next key.
    pub gap_ms: u64,
    /// Bare PTY baseline.
    pub bare_pty: Percentiles,
    /// `tmux attach`, nothing else running (None if tmux is not installed).
    pub tmux_idle: Option<Percentiles>,
    /// `tmux attach` with `streams` other tmux sessions printing.
    pub tmux_loaded: Option<Percentiles>,
    /// Through drover's local path (attach on the session's machine), nothing else running.
    pub drover_idle: Percentiles,
    /// Through drover's local path with `streams` other sessions printing.
    pub drover_loaded: Percentiles,
    /// Through the server (`attach --via-server`), nothing else running.
    pub server_idle: Percentiles,
    /// Through the server with `streams` other sessions printing.
    pub server_loaded: Percentiles,
    /// Sessions streaming during the loaded runs.
    pub streams: usize,
}

/// What the streaming sessions of the loaded runs print.
const STREAM: &str = "while :; do seq 1 1000; sleep 0.1; done";

/// The keys typed: letters no escape sequence a terminal multiplexer sends ends with, so
/// an echo is not mistaken for a redraw's cursor movement.
const KEYS: &[u8] = b"jkowyz";

fn keystrokes(p: &mut PtyProc, keys: usize, gap: Duration) -> Result<Percentiles> {
    Ok(Percentiles::of(&mut key_latencies(p, keys, gap)?))
}

/// Each keystroke's ms from being written until its echo comes back.
fn key_latencies(p: &mut PtyProc, keys: usize, gap: Duration) -> Result<Vec<f64>> {
    let mut lat = Vec::with_capacity(keys);
    for i in 0..keys {
        std::thread::sleep(gap);
        let ch = KEYS[i % KEYS.len()];
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
    Ok(lat)
}

impl Percentiles {
    /// The percentiles of `ms` (sorts it).
    pub fn of(ms: &mut [f64]) -> Percentiles {
        Percentiles { p50_ms: percentile(ms, 50.0), p99_ms: percentile(ms, 99.0), max_ms: percentile(ms, 100.0) }
    }
}

/// Which way `drover session attach` takes a session's bytes and keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Route {
    /// Straight to the session's shim: the default on the session's own machine.
    Local,
    /// Through the server and the device daemon (`--via-server`): the way from any
    /// other machine, and the browser's.
    Server,
}

/// Keystrokes through a `drover session attach` by `route` to a new session running `cat`.
pub(crate) fn through_drover(up: &Up, keys: usize, gap: Duration, route: Route) -> Result<Percentiles> {
    let id = up.start_session(80, 24, &["cat"])?;
    up.wait_running(&id)?;
    let r = through_attach(up, &id, keys, gap, route);
    let _ = up.cli(&["session", "stop", &id]);
    r
}

/// Keystrokes through a `drover session attach` to session `id` (running `cat`), which
/// is left running.
pub(crate) fn through_attach(up: &Up, id: &str, keys: usize, gap: Duration, route: Route) -> Result<Percentiles> {
    Ok(Percentiles::of(&mut attach_latencies(up, id, keys, gap, route)?))
}

/// Each keystroke's echo ms through a `drover session attach` to session `id` (running
/// `cat`) on `up`'s server, which is left running.
pub(crate) fn attach_latencies(up: &Up, id: &str, keys: usize, gap: Duration, route: Route) -> Result<Vec<f64>> {
    let home = up.home.path().to_str().context("home")?.to_string();
    let exe = up.exe.to_str().context("exe")?.to_string();
    let deadline = Instant::now() + Duration::from_secs(20);
    // A viewer that just left may still be counted: the count below must be attach's.
    while !up.cli(&["--json", "session", "show", id])?.contains("\"attached\": 0") {
        anyhow::ensure!(Instant::now() < deadline, "an earlier viewer never left");
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut argv = vec![exe.as_str(), "session", "attach", id];
    if route == Route::Server {
        argv.push("--via-server");
    }
    let mut attach = PtyProc::spawn(&argv, &[("DROVER_HOME", &home)], 80, 24)?;
    while !up.cli(&["--json", "session", "show", id])?.contains("\"attached\": 1") {
        anyhow::ensure!(Instant::now() < deadline, "attach never connected");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(500));
    let r = key_latencies(&mut attach, keys, gap);
    drop(attach);
    r
}

/// A tmux server of the bench's own, killed when dropped.
struct Tmux {
    sock: String,
}

impl Tmux {
    fn start() -> Option<Tmux> {
        let t = Tmux { sock: format!("drover-bench-lat-{}", std::process::id()) };
        t.run(&["new-session", "-d", "-s", "lat", "-x", "80", "-y", "24", "cat"]).ok()?;
        Some(t)
    }

    fn run(&self, args: &[&str]) -> Result<()> {
        let st = Command::new("tmux").args(["-L", &self.sock, "-f", "/dev/null"]).args(args).stdin(Stdio::null()).status()?;
        anyhow::ensure!(st.success(), "tmux {args:?} failed");
        Ok(())
    }

    /// Keystrokes through a `tmux attach` client to `cat` in session `lat`.
    fn keystrokes(&self, keys: usize, gap: Duration) -> Result<Percentiles> {
        let mut client = PtyProc::spawn(&["tmux", "-L", &self.sock, "attach", "-t", "lat"], &[], 80, 24)?;
        std::thread::sleep(Duration::from_millis(500));
        let r = keystrokes(&mut client, keys, gap);
        client.kill();
        r
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.run(&["kill-server"]);
    }
}

/// tmux attach idle, then with `streams` other tmux sessions streaming.
fn through_tmux(keys: usize, gap: Duration, streams: usize) -> Result<Option<(Percentiles, Percentiles)>> {
    let Some(tmux) = Tmux::start() else { return Ok(None) };
    let idle = tmux.keystrokes(keys, gap)?;
    for i in 0..streams {
        tmux.run(&["new-session", "-d", "-s", &format!("s{i}"), "-x", "100", "-y", "30", STREAM])?;
    }
    std::thread::sleep(Duration::from_secs(1));
    let loaded = tmux.keystrokes(keys, gap)?;
    Ok(Some((idle, loaded)))
}

/// Runs the latency comparison.
pub fn run(exe: &Path, keys: usize, gap_ms: u64, streams: usize) -> Result<Latency> {
    let gap = Duration::from_millis(gap_ms);
    let mut bare = PtyProc::spawn(&["cat"], &[], 80, 24)?;
    std::thread::sleep(Duration::from_millis(200));
    let bare_pty = keystrokes(&mut bare, keys, gap).context("through a bare PTY")?;
    drop(bare);
    let tmux = through_tmux(keys, gap, streams).context("through tmux")?;
    let up = Up::start(exe)?;
    let drover_idle = through_drover(&up, keys, gap, Route::Local).context("through drover")?;
    let server_idle = through_drover(&up, keys, gap, Route::Server).context("through drover's server")?;
    let mut ids = Vec::new();
    for _ in 0..streams {
        ids.push(up.start_session(100, 30, &["sh", "-c", STREAM])?);
    }
    std::thread::sleep(Duration::from_secs(1));
    let drover_loaded = through_drover(&up, keys, gap, Route::Local).context("through drover, loaded")?;
    let server_loaded = through_drover(&up, keys, gap, Route::Server).context("through drover's server, loaded")?;
    let (tmux_idle, tmux_loaded) = tmux.map_or((None, None), |(i, l)| (Some(i), Some(l)));
    let r = Latency { keys, gap_ms, bare_pty, tmux_idle, tmux_loaded, drover_idle, drover_loaded, server_idle, server_loaded, streams };
    report(&r);
    Ok(r)
}

fn report(r: &Latency) {
    let show =
        |name: &str, p: &Percentiles| println!("  {name:<44} p50 {:.2} ms  p99 {:.2} ms  max {:.2} ms", p.p50_ms, p.p99_ms, p.max_ms);
    let ratio = |d: &Percentiles, t: &Option<Percentiles>| {
        if let Some(t) = t {
            println!("  {:<44} p50 {:.2}×  p99 {:.2}× (goal ≤ 2×, ≤ 3×)", "  drover ÷ tmux", d.p50_ms / t.p50_ms, d.p99_ms / t.p99_ms);
        }
    };
    println!("latency ({} keystrokes to cat, {} ms apart, echo seen by the typing client):", r.keys, r.gap_ms);
    show("bare PTY", &r.bare_pty);
    if let Some(t) = &r.tmux_idle {
        show("tmux attach", t);
    }
    show("drover attach", &r.drover_idle);
    ratio(&r.drover_idle, &r.tmux_idle);
    show("drover attach --via-server", &r.server_idle);
    if let Some(t) = &r.tmux_loaded {
        show(&format!("tmux attach, {} other sessions streaming", r.streams), t);
    }
    show(&format!("drover attach, {} other sessions streaming", r.streams), &r.drover_loaded);
    ratio(&r.drover_loaded, &r.tmux_loaded);
    show(&format!("drover attach --via-server, {} streaming", r.streams), &r.server_loaded);
}

//! What a second replica costs a person (`--only relay`): two `drover server`
//! replicas on one PostgreSQL database and a real `drover device` linked to replica B.
//! Each action is done through B (the local path, the baseline) and through A (relayed:
//! A posts to B's mailbox in the database, woken by NOTIFY, and follows the output from
//! the database), alternating which goes first:
//!
//! - Start: `POST /api/v1/sessions` of `cat` until it answers "running", and the same
//!   start by the server's clock (created → started).
//! - Input: keystrokes typed into `drover session attach` until their echo comes back
//!   out of attach (the latency run's measure), `gap` apart.
//! - A viewer's join: opening a read-only viewer's WebSocket on a session nobody watches
//!   until its first screen arrives.
//!
//! Goal: each relayed median less than 20 ms over the local one.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde::Serialize;

use crate::drover::{first_screen_ms, kill_sessions, Postgres, Up};
use crate::http::Client;
use crate::latency::{attach_latencies, Percentiles, Route};
use crate::median;

/// The goal: each relayed median at most this much over the local one, in ms.
const GOAL_MS: f64 = 20.0;

/// Slots of the real device (starts are stopped as they go; a few run at once).
const SLOTS: &str = "64";

/// The relayed paths against the local ones.
#[derive(Debug, Serialize)]
pub struct RelayFigures {
    /// Starts and joins timed per side.
    pub repeats: usize,
    /// Keystrokes per side.
    pub keys: usize,
    /// Milliseconds between keystrokes.
    pub gap_ms: u64,
    /// Start answered "running", median ms: (local, relayed).
    pub start_ms: (f64, f64),
    /// Start by the server's clock (created → started), median ms: (local, relayed).
    pub start_server_ms: (f64, f64),
    /// Keystroke to echo through attach: (local, relayed).
    pub input: (Percentiles, Percentiles),
    /// A read-only viewer's join until its first screen, median ms: (local, relayed).
    pub join_ms: (f64, f64),
}

/// A real `drover device` in a home of its own, killed with its sessions when dropped.
struct Device {
    child: Child,
    home: tempfile::TempDir,
}

impl Drop for Device {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        kill_sessions(&self.home.path().join("device-daemon/sessions"));
    }
}

/// How much to measure.
#[derive(Debug, Clone, Copy)]
pub struct RelayArgs {
    /// Starts and joins per side.
    pub repeats: usize,
    /// Keystrokes per side.
    pub keys: usize,
    /// Milliseconds between keystrokes.
    pub gap_ms: u64,
}

/// Runs the relay measurements on two idle replicas of a database of their own on `pg`.
pub fn run(exe: &Path, pg: &Postgres, args: RelayArgs) -> Result<RelayFigures> {
    let name = format!("drover_relay_{}", std::process::id());
    let r = (|| {
        // A first: it creates and migrates the database.
        let a = Up::server(exe, Some(&pg.url(&name)), &[])?;
        let b = Up::server(exe, Some(&pg.url(&name)), &[])?;
        println!("relay: two idle replicas A and B on one PostgreSQL");
        measure(exe, &a, &b, args)
    })();
    pg.drop_database(&name);
    r
}

/// Links a real device to replica `b` and measures each action through `b` (local)
/// and through `a` (relayed).
pub fn measure(exe: &Path, a: &Up, b: &Up, args: RelayArgs) -> Result<RelayFigures> {
    let RelayArgs { repeats, keys, gap_ms } = args;
    let repeats = repeats.max(1);
    let _device = link_device(exe, a, b)?;
    let (local, relayed) = (Client::for_up(b)?, Client::for_up(a)?);
    println!("relay: a real device linked to replica B; local = through B, relayed = through A");

    let (mut starts, mut server_starts) = ((Vec::new(), Vec::new()), (Vec::new(), Vec::new()));
    for i in 0..repeats {
        for relay in order(i) {
            let client = if relay { &relayed } else { &local };
            let (id, ms, server_ms) = start(client)?;
            stop(&local, &id)?;
            let (s, ss) = if relay { (&mut starts.1, &mut server_starts.1) } else { (&mut starts.0, &mut server_starts.0) };
            s.push(ms);
            ss.push(server_ms);
        }
    }
    let start_ms = (median(&mut starts.0), median(&mut starts.1));
    let start_server_ms = (median(&mut server_starts.0), median(&mut server_starts.1));
    println!(
        "  start answered: local {:.2} ms, relayed {:.2} ms ({:+.2} ms); by the server's clock {:.2} / {:.2} ms ({:+.2} ms)",
        start_ms.0,
        start_ms.1,
        start_ms.1 - start_ms.0,
        start_server_ms.0,
        start_server_ms.1,
        start_server_ms.1 - start_server_ms.0
    );

    let join_ms = joins(a, b, &local, repeats)?;
    println!(
        "  viewer join to its first screen: local {:.2} ms, relayed {:.2} ms ({:+.2} ms)",
        join_ms.0,
        join_ms.1,
        join_ms.1 - join_ms.0
    );

    let (id, _, _) = start(&local)?;
    let gap = Duration::from_millis(gap_ms);
    let half = keys.div_ceil(2);
    // Two rounds a side, alternating, each half the keys; percentiles over all of them.
    let (mut near, mut far) = (Vec::new(), Vec::new());
    for relay in [false, true, true, false] {
        let up = if relay { a } else { b };
        let ms = attach_latencies(up, &id, half, gap, Route::Server)
            .with_context(|| format!("typing through {}", if relay { "A" } else { "B" }))?;
        if relay { &mut far } else { &mut near }.extend(ms);
    }
    stop(&local, &id)?;
    let input = (Percentiles::of(&mut near), Percentiles::of(&mut far));
    println!(
        "  keystroke to echo through attach ({} keys a side, {gap_ms} ms apart): local p50 {:.2} ms p99 {:.2} ms, relayed p50 {:.2} ms p99 {:.2} ms ({:+.2} ms at p50)",
        2 * half,
        input.0.p50_ms,
        input.0.p99_ms,
        input.1.p50_ms,
        input.1.p99_ms,
        input.1.p50_ms - input.0.p50_ms
    );
    let r = RelayFigures { repeats, keys: 2 * half, gap_ms, start_ms, start_server_ms, input, join_ms };
    let over = [r.start_ms.1 - r.start_ms.0, r.input.1.p50_ms - r.input.0.p50_ms, r.join_ms.1 - r.join_ms.0];
    let verdict = if over.iter().all(|d| *d < GOAL_MS) { "met" } else { "not met" };
    println!(
        "relay: relayed over local, start {:+.2} ms, input {:+.2} ms, join {:+.2} ms (goal < {GOAL_MS} ms each: {verdict})",
        over[0], over[1], over[2]
    );
    Ok(r)
}

/// Which side goes first in round `i`: relayed first in odd rounds.
fn order(i: usize) -> [bool; 2] {
    if i % 2 == 1 {
        [true, false]
    } else {
        [false, true]
    }
}

/// Adds a device through `a` and links a real `drover device` for it to `b`; waits until
/// `a` knows it is connected (through the database) and has learnt where it is linked.
fn link_device(exe: &Path, a: &Up, b: &Up) -> Result<Device> {
    let client = Client::for_up(a)?;
    let connected = || -> Result<bool> {
        let all: serde_json::Value = serde_json::from_slice(&client.get("/api/v1/devices")?)?;
        let list = all.as_array().or_else(|| all["devices"].as_array()).context("a device list")?;
        Ok(list.iter().any(|d| d["name"] == "relay" && d["connected"] == true))
    };
    let cred: serde_json::Value = serde_json::from_str(&a.cli(&["--json", "device", "add", "relay", "--slots", SLOTS])?)?;
    let token = cred["enrollment_token"].as_str().context("enrollment token")?.to_string();
    let (b_url, _) = b.client_config()?;
    let home = tempfile::tempdir()?;
    let child = Command::new(exe)
        .args(["device", "--server", &b_url, "--token", &token, "--name", "relay", "--slots", SLOTS])
        .env("DROVER_HOME", home.path())
        .env("RUST_LOG", "error")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context("starting drover device")?;
    let device = Device { child, home };
    let deadline = Instant::now() + Duration::from_secs(30);
    while !connected()? {
        anyhow::ensure!(Instant::now() < deadline, "the device never connected");
        std::thread::sleep(Duration::from_millis(100));
    }
    // Replicas refresh where devices are linked every second.
    std::thread::sleep(Duration::from_secs(2));
    Ok(device)
}

/// Starts `cat` on the device through `client`: its id, the request's ms and created →
/// started by the server's clock.
fn start(client: &Client) -> Result<(String, f64, f64)> {
    let body = serde_json::json!({ "device": "relay", "command": ["cat"], "cols": 80, "rows": 24 });
    let t0 = Instant::now();
    let v: serde_json::Value = serde_json::from_slice(&client.post("/api/v1/sessions", &body)?)?;
    let ms = t0.elapsed().as_secs_f64() * 1000.0;
    if v["outcome"] != "running" {
        bail!("a session is {} after its start: {v}", v["outcome"]);
    }
    let at = |k: &str| v[k].as_str().with_context(|| format!("no {k} in {v}")).map(str::to_string);
    let server_ms = crate::sandbox::millis_between(&at("created_at")?, &at("started_at")?)?;
    Ok((at("id")?, ms, server_ms))
}

fn stop(client: &Client, id: &str) -> Result<()> {
    client.post(&format!("/api/v1/sessions/{id}/stop"), &serde_json::json!({}))?;
    Ok(())
}

/// Median ms of a read-only viewer's join until its first screen, (local, relayed): each
/// round a new session (nobody has watched it, so A follows it afresh), joined through
/// B and through A in alternating order.
fn joins(a: &Up, b: &Up, local: &Client, repeats: usize) -> Result<(f64, f64)> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let (mut near, mut far) = (Vec::new(), Vec::new());
    for i in 0..repeats {
        let (id, _, _) = start(local)?;
        for relay in order(i) {
            let up = if relay { a } else { b };
            let ms = rt.block_on(first_screen_ms(up, &id))?;
            if relay { &mut far } else { &mut near }.push(ms);
        }
        stop(local, &id)?;
    }
    Ok((median(&mut near), median(&mut far)))
}

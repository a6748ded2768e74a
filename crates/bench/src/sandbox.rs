//! What the sandbox costs: session start and output throughput on a `drover up` whose
//! runs are sandboxed (the default) against one started `--unsandboxed`, in the same run,
//! interleaved. Start is the server's own record of it (created → its program running,
//! both by the server's clock, so no polling interval is in it); throughput is a session
//! printing a file to its end, as stored.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use serde::Serialize;

use crate::drover::Up;
use crate::http::Client;
use crate::median;

/// Sandbox figures (medians).
#[derive(Debug, Serialize)]
pub struct Sandbox {
    /// Session starts measured per side.
    pub starts: usize,
    /// Created → running, sandboxed, in ms.
    pub start_sandboxed_ms: f64,
    /// Created → running, unsandboxed, in ms.
    pub start_unsandboxed_ms: f64,
    /// What the sandbox adds to a start, in ms (goal < 20).
    pub start_added_ms: f64,
    /// MB printed per throughput run.
    pub mb: usize,
    /// Throughput sandboxed, MB/s.
    pub throughput_sandboxed: f64,
    /// Throughput unsandboxed, MB/s.
    pub throughput_unsandboxed: f64,
    /// sandboxed ÷ unsandboxed throughput (goal ≈ 1.0).
    pub throughput_ratio: f64,
}

fn json(bytes: &[u8]) -> Result<serde_json::Value> {
    Ok(serde_json::from_slice(bytes)?)
}

/// Starts `command` in `cwd`; returns the session id.
fn start(client: &Client, cwd: &Path, command: &[&str]) -> Result<String> {
    let body = serde_json::json!({ "device": "bench", "command": command, "cwd": cwd });
    let v = json(&client.post("/api/v1/sessions", &body)?)?;
    Ok(v["id"].as_str().context("session id")?.to_string())
}

/// Waits for the session to leave `starting` (or, with `ended`, to end); its view.
fn wait(client: &Client, id: &str, ended: bool) -> Result<serde_json::Value> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let v = json(&client.get(&format!("/api/v1/sessions/{id}"))?)?;
        let outcome = v["outcome"].as_str().unwrap_or_default();
        let done = if ended { !matches!(outcome, "starting" | "running") } else { outcome != "starting" };
        if done {
            return Ok(v);
        }
        ensure!(Instant::now() < deadline, "session {id} did not get there: {v}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Milliseconds from one RFC 3339 time to another.
pub(crate) fn millis_between(from: &str, to: &str) -> Result<f64> {
    let a = chrono::DateTime::parse_from_rfc3339(from)?;
    let b = chrono::DateTime::parse_from_rfc3339(to)?;
    Ok((b - a).num_microseconds().context("a duration")? as f64 / 1000.0)
}

/// One start: created → running, by the server's clock, in ms.
fn start_ms(client: &Client, cwd: &Path) -> Result<f64> {
    let id = start(client, cwd, &["sh", "-c", "echo ready; exec sleep 600"])?;
    let v = wait(client, &id, false)?;
    let ms = millis_between(v["created_at"].as_str().context("created_at")?, v["started_at"].as_str().context("started_at")?)?;
    client.post(&format!("/api/v1/sessions/{id}/stop"), &serde_json::json!({}))?;
    wait(client, &id, true)?;
    Ok(ms)
}

/// One throughput run: MB/s of a session printing `file` to its end, as stored.
fn throughput(client: &Client, cwd: &Path, file: &str, mb: usize) -> Result<f64> {
    let t0 = Instant::now();
    let id = start(client, cwd, &["cat", file])?;
    let v = wait(client, &id, true)?;
    let secs = t0.elapsed().as_secs_f64();
    let stored = v["output_bytes"].as_u64().unwrap_or(0);
    ensure!(stored >= (mb * 1_000_000) as u64, "session {id} stored {stored} bytes of {mb} MB: {v}");
    Ok(mb as f64 / secs)
}

/// Runs both sides `starts` times (starts) and `runs` times (throughput), interleaved.
pub fn run(exe: &Path, mb: usize, runs: usize, starts: usize) -> Result<Sandbox> {
    let dir = tempfile::tempdir()?;
    let line = "the quick brown fox jumps over the lazy dog 0123456789 ABCDEFGHIJKLMNOPQRSTUVWXYZ\n";
    let text: String = line.repeat(mb * 1_000_000 / line.len() + 1);
    std::fs::write(dir.path().join("out.txt"), text)?;
    let sandboxed = Up::start_with(exe, &[])?;
    let unsandboxed = Up::start_with(exe, &["--unsandboxed"])?;
    let (a, b) = (Client::for_up(&sandboxed)?, Client::for_up(&unsandboxed)?);
    // One start each to warm the page cache and the databases.
    start_ms(&a, dir.path())?;
    start_ms(&b, dir.path())?;
    let (mut sa, mut sb) = (Vec::new(), Vec::new());
    for i in 0..starts {
        if i % 2 == 0 {
            sa.push(start_ms(&a, dir.path())?);
            sb.push(start_ms(&b, dir.path())?);
        } else {
            sb.push(start_ms(&b, dir.path())?);
            sa.push(start_ms(&a, dir.path())?);
        }
    }
    let (mut ta, mut tb) = (Vec::new(), Vec::new());
    for i in 0..runs {
        // Which side goes first alternates, so neither always runs on a warmer machine.
        if i % 2 == 0 {
            ta.push(throughput(&a, dir.path(), "out.txt", mb)?);
            tb.push(throughput(&b, dir.path(), "out.txt", mb)?);
        } else {
            tb.push(throughput(&b, dir.path(), "out.txt", mb)?);
            ta.push(throughput(&a, dir.path(), "out.txt", mb)?);
        }
        println!("  sandbox throughput run {}/{runs}: sandboxed {:.1} MB/s, unsandboxed {:.1} MB/s", i + 1, ta[i], tb[i]);
    }
    let (start_sandboxed_ms, start_unsandboxed_ms) = (median(&mut sa), median(&mut sb));
    let (throughput_sandboxed, throughput_unsandboxed) = (median(&mut ta), median(&mut tb));
    let r = Sandbox {
        starts,
        start_sandboxed_ms,
        start_unsandboxed_ms,
        start_added_ms: start_sandboxed_ms - start_unsandboxed_ms,
        mb,
        throughput_sandboxed,
        throughput_unsandboxed,
        throughput_ratio: throughput_sandboxed / throughput_unsandboxed,
    };
    println!(
        "sandbox ({starts} starts, {runs}×{mb} MB, medians): start {:.1} ms sandboxed vs {:.1} ms unsandboxed → +{:.1} ms (goal < 20); throughput {:.1} vs {:.1} MB/s → {:.2}× (goal ≈ 1)",
        r.start_sandboxed_ms, r.start_unsandboxed_ms, r.start_added_ms, r.throughput_sandboxed, r.throughput_unsandboxed, r.throughput_ratio
    );
    Ok(r)
}

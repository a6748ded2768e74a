//! "Needs you" on loopback, through the real hook: the time from a harness raising a
//! permission request (`drover hook claude` started with the event on its stdin, as
//! Claude Code starts it) until the inbox lists it, and from a person's Approve until
//! the hook has printed the decision and exited (the harness goes on), next to a plain
//! `GET /api/v1/health` round trip on the same server.

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use serde::Serialize;

use crate::drover::Up;
use crate::http::Client;
use crate::median;

/// The figures (milliseconds, medians).
#[derive(Debug, Serialize)]
pub struct Attention {
    /// Held calls measured.
    pub calls: usize,
    /// The hook started with a held call → the inbox lists it.
    pub raised_to_listed_ms: f64,
    /// Approve → the hook printed the decision and exited.
    pub approve_to_harness_ms: f64,
    /// A plain health round trip (the baseline).
    pub health_ms: f64,
}

/// The run's credential, as its agent wrote it: (url, token, session).
fn run_credential(dir: &Path) -> Result<(String, String, String)> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(text) = std::fs::read_to_string(dir.join("credential")) {
            let parts: Vec<&str> = text.split_whitespace().collect();
            if parts.len() == 3 {
                return Ok((parts[0].into(), parts[1].into(), parts[2].into()));
            }
        }
        ensure!(Instant::now() < deadline, "the agent's run never started");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// One held call: (raised → listed, approve → harness), in milliseconds.
fn one(exe: &Path, client: &Client, cred: &(String, String, String), i: usize) -> Result<(f64, f64)> {
    let command = format!("make deploy-{i}");
    let event = serde_json::json!({
        "hook_event_name": "PermissionRequest", "session_id": "bench", "cwd": "/", "transcript_path": "/dev/null",
        "tool_name": "Bash", "tool_input": { "command": command },
    });
    let t0 = Instant::now();
    let mut hook = Command::new(exe)
        .args(["hook", "claude"])
        .env("DROVER_URL", &cred.0)
        .env("DROVER_TOKEN", &cred.1)
        .env("DROVER_SESSION", &cred.2)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()?;
    hook.stdin.take().context("stdin")?.write_all(event.to_string().as_bytes())?;
    let deadline = Instant::now() + Duration::from_secs(30);
    let id = loop {
        let inbox: serde_json::Value = serde_json::from_slice(&client.get("/api/v1/inbox")?)?;
        let found = inbox["items"].as_array().into_iter().flatten().find(|it| it["subject"] == command.as_str());
        if let Some(it) = found {
            break it["id"].as_str().context("id")?.to_string();
        }
        ensure!(Instant::now() < deadline, "the held call never reached the inbox");
    };
    let listed = t0.elapsed().as_secs_f64() * 1000.0;
    let t1 = Instant::now();
    client.post(&format!("/api/v1/attention/{id}/decide"), &serde_json::json!({ "decision": "approve" }))?;
    let mut out = String::new();
    hook.stdout.take().context("stdout")?.read_to_string(&mut out)?;
    hook.wait()?;
    let decided = t1.elapsed().as_secs_f64() * 1000.0;
    ensure!(out.contains(r#""behavior":"allow""#), "the hook printed {out:?}");
    Ok((listed, decided))
}

/// Measures `calls` held calls one after another.
pub fn run(exe: &Path, calls: usize) -> Result<Attention> {
    let dir = tempfile::tempdir()?;
    let repo = dir.path().join("repo");
    std::fs::create_dir_all(&repo)?;
    let git = |args: &[&str]| Command::new("git").arg("-C").arg(&repo).args(args).stdout(Stdio::null()).status();
    git(&["init", "-q", "-b", "main"])?;
    git(&["-c", "user.name=b", "-c", "user.email=b@b", "commit", "-q", "--allow-empty", "-m", "start"])?;
    let script = dir.path().join("agent.sh");
    let cred = dir.path().join("credential");
    std::fs::write(
        &script,
        format!("#!/bin/sh\necho \"$DROVER_URL $DROVER_TOKEN $DROVER_SESSION\" > '{}'\nexec sleep 600\n", cred.display()),
    )?;
    Command::new("chmod").arg("+x").arg(&script).status()?;
    let writable = dir.path().display().to_string();
    let up = Up::start_with(exe, &["--sandbox-write", &writable])?;
    up.cli(&["repo", "add", "app", "--device", "bench", "--path", repo.to_str().context("repo")?])?;
    up.cli(&["agent", "create", "bot", "--harness", "custom", "--", script.to_str().context("script")?, "{prompt}"])?;
    up.cli(&["task", "create", "--repo", "app", "--title", "held calls", "--agent", "bot"])?;
    let cred = run_credential(dir.path())?;
    let client = Client::for_up(&up)?;
    let (mut listed, mut decided) = (Vec::new(), Vec::new());
    for i in 0..calls {
        let (l, d) = one(exe, &client, &cred, i)?;
        listed.push(l);
        decided.push(d);
    }
    let health_ms = client.time("/api/v1/health", calls.max(10))?;
    let r = Attention { calls, raised_to_listed_ms: median(&mut listed), approve_to_harness_ms: median(&mut decided), health_ms };
    println!(
        "needs you ({calls} held calls, medians): raised → in the inbox {:.1} ms, Approve → the harness goes on {:.1} ms (goal < 300 each); health round trip {:.2} ms",
        r.raised_to_listed_ms, r.approve_to_harness_ms, r.health_ms
    );
    Ok(r)
}

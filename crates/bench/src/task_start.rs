//! Time from "task ready" (filed, with an agent pinned to its first stage) to the agent's
//! first output, against the floor on the same repository in the same run: a bare
//! `git worktree add` of a new branch plus starting the same program in it and reading
//! its first output. The repository has 10,000 files.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use serde::Serialize;

use crate::drover::Up;
use crate::http::Client;
use crate::median;

/// Task-start figures (seconds are medians).
#[derive(Debug, Serialize)]
pub struct TaskStart {
    /// Files in the repository.
    pub files: usize,
    /// Bare `git worktree add` + process start to first output.
    pub bare_s: f64,
    /// Drover: task filed to the agent's first output, as a viewer reads it.
    pub drover_s: f64,
    /// drover ÷ bare (goal ≤ 1.5).
    pub ratio: f64,
}

fn git(dir: &Path, args: &[&str]) -> Result<()> {
    let st = Command::new("git").arg("-C").arg(dir).args(args).stdout(Stdio::null()).status()?;
    ensure!(st.success(), "git {args:?} failed");
    Ok(())
}

fn make_repo(dir: &Path, files: usize) -> Result<()> {
    git(dir, &["init", "-q", "-b", "main"])?;
    for i in 0..files {
        let sub = dir.join(format!("src/m{:03}", i / 100));
        std::fs::create_dir_all(&sub)?;
        std::fs::write(sub.join(format!("f{i:05}.rs")), format!("// file {i}\npub fn f{i}() -> u32 {{ {i} }}\n"))?;
    }
    git(dir, &["add", "."])?;
    git(dir, &["-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "files"])?;
    Ok(())
}

/// The floor: a worktree on a new branch, then the program, until its first output.
fn bare(repo: &Path, root: &Path, script: &Path, i: usize) -> Result<f64> {
    let path = root.join(format!("bare-{i}"));
    let t0 = Instant::now();
    git(repo, &["worktree", "add", "-q", "-b", &format!("bare-{i}"), path.to_str().context("path")?, "HEAD"])?;
    let mut child = Command::new(script).arg("prompt").current_dir(&path).stdout(Stdio::piped()).spawn()?;
    let mut out = child.stdout.take().context("stdout")?;
    let mut buf = [0u8; 64];
    let n = out.read(&mut buf)?;
    let secs = t0.elapsed().as_secs_f64();
    ensure!(n > 0, "no output");
    let _ = child.kill();
    let _ = child.wait();
    git(repo, &["worktree", "remove", "--force", path.to_str().context("path")?])?;
    Ok(secs)
}

/// Drover: file the task, then follow the run's output until its first bytes.
fn drover(client: &Client, i: usize) -> Result<f64> {
    let t0 = Instant::now();
    let body = serde_json::json!({ "title": format!("bench {i}"), "repo": "app", "workflow": [{ "stage": "code", "assignee": "bot" }] });
    let task: serde_json::Value = serde_json::from_slice(&client.post("/api/v1/tasks", &body)?)?;
    let id = task["id"].as_str().context("task id")?.to_string();
    let deadline = Instant::now() + Duration::from_secs(60);
    let session = loop {
        let t: serde_json::Value = serde_json::from_slice(&client.get(&format!("/api/v1/tasks/{id}"))?)?;
        if let Some(s) = t["task"]["live_session"].as_str() {
            break s.to_string();
        }
        ensure!(Instant::now() < deadline, "the task never started: {t}");
        std::thread::sleep(Duration::from_millis(2));
    };
    loop {
        let bytes = client.get(&format!("/api/v1/sessions/{session}/output?from=0&wait_ms=10000"))?;
        if !bytes.is_empty() {
            break;
        }
        if Instant::now() > deadline {
            bail!("no output from {session}");
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    client.post(&format!("/api/v1/tasks/{id}/abandon"), &serde_json::json!({}))?;
    Ok(secs)
}

/// Waits until the abandoned run's worktree is gone, so runs do not overlap.
fn settle(repo: &Path) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let out = Command::new("git").arg("-C").arg(repo).args(["worktree", "list", "--porcelain"]).output()?;
        if String::from_utf8_lossy(&out.stdout).matches("worktree ").count() <= 1 {
            return Ok(());
        }
        ensure!(Instant::now() < deadline, "the abandoned worktree was not removed");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Runs the comparison `runs` times, interleaved.
pub fn run(exe: &Path, files: usize, runs: usize) -> Result<TaskStart> {
    let dir = tempfile::tempdir()?;
    let repo = dir.path().join("repo");
    std::fs::create_dir_all(&repo)?;
    let t = Instant::now();
    make_repo(&repo, files)?;
    println!("  made a repository of {files} files in {:.1}s", t.elapsed().as_secs_f64());
    let script = dir.path().join("agent.sh");
    std::fs::write(&script, "#!/bin/sh\necho ready\nexec sleep 600\n")?;
    Command::new("chmod").arg("+x").arg(&script).status()?;
    let up = Up::start(exe)?;
    up.cli(&["repo", "add", "app", "--device", "bench", "--path", repo.to_str().context("repo")?])?;
    up.cli(&["agent", "create", "bot", "--harness", "custom", "--", script.to_str().context("script")?, "{prompt}"])?;
    let client = Client::for_up(&up)?;
    let root = dir.path().join("bare");
    let (mut b, mut d) = (Vec::new(), Vec::new());
    for i in 0..runs {
        b.push(bare(&repo, &root, &script, i)?);
        d.push(drover(&client, i)?);
        settle(&repo)?;
        println!("  task start run {}/{runs}: bare {:.3}s, drover {:.3}s", i + 1, b[i], d[i]);
    }
    let (bare_s, drover_s) = (median(&mut b), median(&mut d));
    let r = TaskStart { files, bare_s, drover_s, ratio: drover_s / bare_s };
    println!(
        "task start ({files} files, {runs} runs, medians): bare worktree + start {:.0} ms, drover task filed → first output {:.0} ms → {:.2}× (goal ≤ 1.5)",
        bare_s * 1000.0,
        drover_s * 1000.0,
        r.ratio
    );
    Ok(r)
}

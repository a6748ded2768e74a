//! Output throughput: a session streams a file to one attached viewer (`drover session
//! attach`), against the same file through a bare PTY (`script -qfc "cat FILE"
//! /dev/null`) and through tmux with an attached client.
//!
//! Each comparison gives the viewer the same kind of output as its baseline: `script`
//! writes to a pipe the bench reads, so the viewer compared with it writes to a pipe
//! too; a tmux client needs a terminal, so the viewer compared with it writes to a PTY
//! the bench reads. Both viewer figures are reported.

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde::Serialize;

use crate::drover::Up;
use crate::median;
use crate::pty::PtyProc;

const COLS: u16 = 200;
const ROWS: u16 = 50;
const END: &str = "END-OF-THROUGHPUT-RUN";

/// Throughput figures (seconds are medians).
#[derive(Debug, Serialize)]
pub struct Throughput {
    /// Size of the file.
    pub bytes: u64,
    /// Bare PTY: seconds.
    pub bare_pty_s: f64,
    /// tmux with an attached client: seconds (None if tmux is not installed).
    pub tmux_s: Option<f64>,
    /// Drover session, viewer writing to a pipe (as `script` does): seconds.
    pub drover_pipe_s: f64,
    /// Drover session, viewer writing to a PTY (as a tmux client does): seconds.
    pub drover_pty_s: f64,
    /// Drover (pipe viewer) throughput ÷ bare PTY throughput (goal ≥ 0.6).
    pub drover_vs_bare: f64,
    /// Drover (PTY viewer) throughput ÷ bare PTY throughput (for reference).
    pub drover_pty_vs_bare: f64,
    /// Drover (PTY viewer) throughput ÷ tmux throughput (goal > 1).
    pub drover_vs_tmux: Option<f64>,
    /// Bytes the viewer received ÷ bytes the program wrote, lowest of all runs (1.0:
    /// nothing skipped; less means it fell behind and re-synced from a snapshot).
    pub viewer_received: f64,
}

pub(crate) fn make_file(path: &Path, mb: usize) -> Result<u64> {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
    let mut n = 0u64;
    let mut i = 0u64;
    while n < (mb as u64) << 20 {
        let line = format!("{i:010} the quick brown fox jumps over the lazy dog 0123456789 abcdefghij\n");
        f.write_all(line.as_bytes())?;
        n += line.len() as u64;
        i += 1;
    }
    f.flush()?;
    Ok(n)
}

fn bare(file: &Path) -> Result<f64> {
    let t0 = Instant::now();
    let mut child = Command::new("script")
        .args(["-qfc", &format!("cat {}", file.display()), "/dev/null"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()?;
    let mut out = child.stdout.take().context("stdout")?;
    let mut buf = vec![0u8; 1 << 20];
    while out.read(&mut buf)? > 0 {}
    child.wait()?;
    Ok(t0.elapsed().as_secs_f64())
}

fn tmux(file: &Path) -> Result<f64> {
    let sock = format!("drover-bench-{}", std::process::id());
    let t = |args: &[&str]| -> Result<()> {
        let st = Command::new("tmux").args(["-L", &sock, "-f", "/dev/null"]).args(args).stdin(Stdio::null()).status()?;
        anyhow::ensure!(st.success(), "tmux {args:?} failed");
        Ok(())
    };
    t(&["new-session", "-d", "-s", "b", "-x", &COLS.to_string(), "-y", &ROWS.to_string(), "sleep 100000"])?;
    let client = PtyProc::spawn(&["tmux", "-L", &sock, "attach", "-t", "b"], &[], COLS, ROWS)?;
    std::thread::sleep(Duration::from_millis(500));
    let t0 = Instant::now();
    let cmd = format!("cat {}; tmux -L {sock} wait-for -S done", file.display());
    t(&["respawn-pane", "-k", "-t", "b", &cmd])?;
    t(&["wait-for", "done"])?;
    let secs = t0.elapsed().as_secs_f64();
    drop(client);
    let _ = t(&["kill-server"]);
    Ok(secs)
}

/// Where the viewer's output goes.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Sink {
    Pipe,
    Pty,
}

pub(crate) fn drover(up: &Up, file: &Path, sink: Sink) -> Result<(f64, u64)> {
    let script = format!("read go; cat {}; echo {END}", file.display());
    let id = up.start_session(COLS, ROWS, &["sh", "-c", &script])?;
    up.wait_running(&id)?;
    let home = up.home.path().to_str().context("home")?.to_string();
    let exe = up.exe.to_str().context("exe")?.to_string();
    let argv = [exe.as_str(), "session", "attach", &id];
    let env = [("DROVER_HOME", home.as_str())];
    let viewer = match sink {
        Sink::Pipe => PtyProc::spawn_piped(&argv, &env)?,
        Sink::Pty => PtyProc::spawn(&argv, &env, COLS, ROWS)?,
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while !up.cli(&["--json", "session", "show", &id])?.contains("\"attached\": 1") {
        anyhow::ensure!(Instant::now() < deadline, "viewer never attached");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    let before = viewer.bytes();
    let t0 = Instant::now();
    up.cli(&["session", "input", &id, "go"])?;
    let t1 = viewer.wait_for(END.as_bytes(), before, Duration::from_secs(600))?;
    let received = viewer.bytes() - before;
    drop(viewer);
    let _ = up.cli(&["session", "stop", &id]);
    Ok(((t1 - t0).as_secs_f64(), received))
}

/// Runs the throughput comparison `runs` times, interleaved.
pub fn run(exe: &Path, mb: usize, runs: usize) -> Result<Throughput> {
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("stream.txt");
    let bytes = make_file(&file, mb)?;
    let lines = bytes / 86;
    let has_tmux = Command::new("tmux").arg("-V").output().is_ok_and(|o| o.status.success());
    let up = Up::start(exe)?;
    let (mut b, mut t, mut dp, mut dt, mut recv) = (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for i in 0..runs {
        b.push(bare(&file)?);
        let (secs, got) = drover(&up, &file, Sink::Pipe)?;
        dp.push(secs);
        recv.push(got as f64 / (bytes + lines) as f64);
        if has_tmux {
            t.push(tmux(&file)?);
        }
        let (secs, got) = drover(&up, &file, Sink::Pty)?;
        dt.push(secs);
        recv.push(got as f64 / (bytes + lines) as f64);
        println!(
            "  throughput run {}/{runs}: bare {:.3}s, drover (pipe viewer) {:.3}s (got {:.2} of the bytes){}, drover (PTY viewer) {:.3}s (got {:.2})",
            i + 1,
            b[i],
            dp[i],
            recv[2 * i],
            t.get(i).map(|s| format!(", tmux {s:.3}s")).unwrap_or_default(),
            dt[i],
            recv[2 * i + 1],
        );
    }
    let (bare_s, pipe_s, pty_s) = (median(&mut b), median(&mut dp), median(&mut dt));
    let tmux_s = has_tmux.then(|| median(&mut t));
    let r = Throughput {
        bytes,
        bare_pty_s: bare_s,
        tmux_s,
        drover_pipe_s: pipe_s,
        drover_pty_s: pty_s,
        drover_vs_bare: bare_s / pipe_s,
        drover_pty_vs_bare: bare_s / pty_s,
        drover_vs_tmux: tmux_s.map(|t| t / pty_s),
        viewer_received: recv.iter().copied().fold(f64::INFINITY, f64::min),
    };
    let mbs = |s: f64| bytes as f64 / 1048576.0 / s;
    println!(
        "throughput ({} MB file, {runs} runs, medians): bare PTY {:.0} MB/s, drover (pipe viewer) {:.0} MB/s → {:.2} of bare (goal ≥ 0.60); \
         tmux {}, drover (PTY viewer) {:.0} MB/s{} ({:.2} of bare); viewers got at least {:.3} of the bytes",
        bytes >> 20,
        mbs(bare_s),
        mbs(pipe_s),
        r.drover_vs_bare,
        tmux_s.map(|t| format!("{:.0} MB/s", mbs(t))).unwrap_or_else(|| "not installed".into()),
        mbs(pty_s),
        r.drover_vs_tmux.map(|x| format!(" → {x:.2} of tmux (goal > 1)")).unwrap_or_default(),
        r.drover_pty_vs_bare,
        r.viewer_received,
    );
    Ok(r)
}

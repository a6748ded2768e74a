//! `--only screen`: a finished session's Final screen (`GET /sessions/{id}/screen`, from
//! its last screen checkpoint) against the live snapshot a new viewer of the same session
//! gets while it runs (the shim's screen, over the terminal WebSocket), for sessions of
//! 1 MB, 100 MB and 1 GB of full-screen output. Both should be flat across sizes.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde::Serialize;

use crate::drover::{first_screen_ms, Up};
use crate::http::Client;
use crate::median;

/// Requests timed per figure.
const REPEATS: usize = 15;

/// The figures for one session size.
#[derive(Debug, Serialize)]
pub struct ScreenFigures {
    /// Output the session printed, in MB.
    pub mb: u64,
    /// Median ms for a new viewer of the live session to get its screen.
    pub live_snapshot_ms: f64,
    /// Median ms for the finished session's Final screen.
    pub final_screen_ms: f64,
    /// Seconds from the session's end until its checkpoints were all made.
    pub checkpoints_ready_s: f64,
}

/// One 1 MiB piece of what a full-screen program prints: whole-screen redraws in colour
/// with cursor moves, and a scroll region with lines scrolling in it.
fn piece() -> Vec<u8> {
    let mut out = Vec::with_capacity(1 << 20);
    let mut frame = 0u64;
    while out.len() < (1 << 20) - 4096 {
        out.extend_from_slice(b"\x1b[H");
        for row in 1..=20 {
            let line = format!(
                "\x1b[{row};1H\x1b[3{}m row {row:>2} of frame {frame:>8} {}\x1b[0m\x1b[K",
                row % 8,
                "=".repeat((frame as usize + row) % 50)
            );
            out.extend_from_slice(line.as_bytes());
        }
        out.extend_from_slice(b"\x1b[21;24r\x1b[24;1H");
        for i in 0..3 {
            out.extend_from_slice(format!("\nlog line {i} of frame {frame}").as_bytes());
        }
        out.extend_from_slice(b"\x1b[r");
        frame += 1;
    }
    out.resize(1 << 20, b' ');
    out
}

/// Runs the part for each size in MB.
pub fn run(exe: &Path, sizes: &[u64]) -> Result<Vec<ScreenFigures>> {
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("piece");
    std::fs::write(&file, piece())?;
    let up = Up::start(exe)?;
    let client = Client::for_up(&up)?;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let mut out = Vec::new();
    for &mb in sizes {
        let script = format!("i=0; while [ $i -lt {mb} ]; do cat '{}'; i=$((i+1)); done; echo; echo DONE; exec sleep 3600", file.display());
        let id = up.start_session(80, 24, &["sh", "-c", &script])?;
        up.wait_stored(&id, mb << 20)?;
        let live = rt.block_on(live_snapshots(&up, &id))?;
        up.cli(&["session", "stop", &id])?;
        let ended = Instant::now();
        wait_ended(&up, &id)?;
        wait_final_checkpoint(&up, &id)?;
        let ready = ended.elapsed().as_secs_f64();
        let path = format!("/api/v1/sessions/{id}/screen");
        client.get(&path)?;
        let final_ms = client.time(&path, REPEATS)?;
        println!(
            "screen: {mb:>5} MB: Final screen {final_ms:.1} ms median, live snapshot {live:.1} ms ({:.2}×); checkpoints ready {ready:.1} s after the end",
            final_ms / live
        );
        out.push(ScreenFigures { mb, live_snapshot_ms: live, final_screen_ms: final_ms, checkpoints_ready_s: ready });
    }
    if let (Some(small), Some(big)) = (out.first(), out.last()) {
        println!(
            "screen: {} MB against {} MB: Final screen {:.2}×, live snapshot {:.2}× (goal: each < 50 ms, flat)",
            big.mb,
            small.mb,
            big.final_screen_ms / small.final_screen_ms,
            big.live_snapshot_ms / small.live_snapshot_ms
        );
    }
    Ok(out)
}

fn wait_ended(up: &Up, id: &str) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(60);
    while up.cli(&["--json", "session", "show", id])?.contains("\"ended_at\": null") {
        anyhow::ensure!(Instant::now() < deadline, "session {id} did not end");
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}

/// Waits until the session's checkpoint at its end is made (read from the database).
fn wait_final_checkpoint(up: &Up, id: &str) -> Result<()> {
    let db = up.home.path().join("drover.db");
    let deadline = Instant::now() + Duration::from_secs(900);
    loop {
        let out = std::process::Command::new("sqlite3")
            .arg(&db)
            .arg(format!("SELECT screen_final FROM sessions WHERE id = '{id}'"))
            .output()
            .context("running sqlite3 (Debian's sqlite3) to read the session's checkpoint state")?;
        if String::from_utf8_lossy(&out.stdout).trim() == "1" {
            return Ok(());
        }
        anyhow::ensure!(Instant::now() < deadline, "the checkpoints of session {id} were not made in 15 minutes");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The median ms from opening a read-only viewer's WebSocket to its first screen.
async fn live_snapshots(up: &Up, id: &str) -> Result<f64> {
    let mut took = Vec::new();
    for _ in 0..REPEATS {
        took.push(first_screen_ms(up, id).await?);
    }
    Ok(median(&mut took))
}

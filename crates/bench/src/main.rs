//! `drover-bench`: measures, in one run and side by side with baselines on the same
//! machine, (1) output throughput of a session streaming a file to an attached viewer
//! against a bare PTY (`script -qfc "cat FILE" /dev/null`) and tmux, (2) input-to-echo
//! latency through `drover session attach`, idle and with other sessions streaming,
//! (3) the memory an idle session costs with many running at once, and (4) the sandbox
//! list API with 100,000 sandboxes, (5) the CPU to read usage from a 200 MB transcript
//! incrementally. `--only soak` runs the soak instead (not part of
//! the default run): many sessions for minutes, the device's link dropped every minute,
//! viewers coming and going; nothing lost, memory flat.
//!
//! Run with `scripts/bench` (builds the release binaries first). Figures are medians;
//! machines here are shared and noisy, so compare ratios, not absolute numbers.

mod drover;
mod http;
mod latency;
mod list;
mod memory;
mod proxy;
mod pty;
mod soak;
mod task_start;
mod throughput;
mod usage;

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Parser;

/// Benchmarks of the session runtime.
#[derive(Debug, Parser)]
struct Args {
    /// The drover binary to measure (default: next to this one).
    #[arg(long)]
    drover: Option<PathBuf>,
    /// Size of the streamed file, in MB.
    #[arg(long, default_value_t = 50)]
    mb: usize,
    /// Repetitions of each throughput run (the median is reported).
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Keystrokes per latency run.
    #[arg(long, default_value_t = 1000)]
    keys: usize,
    /// Other sessions streaming during the loaded latency run.
    #[arg(long, default_value_t = 20)]
    streams: usize,
    /// Idle sessions for the memory run.
    #[arg(long, default_value_t = 100)]
    idle: usize,
    /// Sandboxes in the database for the list run.
    #[arg(long, default_value_t = 100_000)]
    sandboxes: usize,
    /// Files in the repository for the task-start run.
    #[arg(long, default_value_t = 10_000)]
    files: usize,
    /// Size of the transcript for the usage run, in MB.
    #[arg(long, default_value_t = 200)]
    usage_mb: usize,
    /// Sessions for the soak run.
    #[arg(long, default_value_t = 200)]
    soak_sessions: usize,
    /// Minutes of the soak run.
    #[arg(long, default_value_t = 10.0)]
    soak_minutes: f64,
    /// Only these parts (throughput, latency, memory, list, task, usage; or soak, which the
    /// default run leaves out); default all but soak.
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Also write the figures as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
}

fn main() -> Result<()> {
    let args = Args::parse();
    let exe = match &args.drover {
        Some(p) => p.clone(),
        None => std::env::current_exe()?.parent().context("exe dir")?.join("drover"),
    };
    anyhow::ensure!(exe.exists(), "no drover binary at {} (build it: cargo build --release --bin drover)", exe.display());
    let want = |part: &str| (args.only.is_empty() && part != "soak") || args.only.iter().any(|o| o == part);
    let mut report = serde_json::Map::new();
    println!("drover-bench: {} ({} cores)", exe.display(), std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1));
    if want("throughput") {
        let r = throughput::run(&exe, args.mb, args.runs)?;
        report.insert("throughput".into(), serde_json::to_value(r)?);
    }
    if want("latency") {
        let r = latency::run(&exe, args.keys, args.streams)?;
        report.insert("latency".into(), serde_json::to_value(r)?);
    }
    if want("memory") {
        let r = memory::run(&exe, args.idle)?;
        report.insert("memory".into(), serde_json::to_value(r)?);
    }
    if want("list") {
        let r = list::run(&exe, args.sandboxes)?;
        report.insert("list".into(), serde_json::to_value(r)?);
    }
    if want("task") {
        let r = task_start::run(&exe, args.files, args.runs.max(5))?;
        report.insert("task_start".into(), serde_json::to_value(r)?);
    }
    if want("usage") {
        let r = usage::run(args.usage_mb, args.runs)?;
        report.insert("usage".into(), serde_json::to_value(r)?);
    }
    if want("soak") {
        let r = soak::run(&exe, args.soak_sessions, args.soak_minutes, std::time::Duration::from_secs(60))?;
        report.insert("soak".into(), serde_json::to_value(r)?);
    }
    if let Some(path) = args.json {
        std::fs::write(&path, serde_json::to_vec_pretty(&report)?)?;
    }
    Ok(())
}

/// The median of `v` (sorts it).
pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).expect("no NaN"));
    let n = v.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// The `p`-th percentile (0–100) of `v` (sorts it), nearest rank.
pub fn percentile(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).expect("no NaN"));
    if v.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * v.len() as f64).ceil() as usize;
    v[rank.clamp(1, v.len()) - 1]
}

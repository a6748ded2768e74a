//! `drover-bench`: measures, in one run and side by side with baselines on the same
//! machine, (1) output throughput of a session streaming a file to an attached viewer
//! against a bare PTY (`script -qfc "cat FILE" /dev/null`) and tmux, (2) input-to-echo
//! latency through `drover session attach`, idle and with other sessions streaming,
//! (3) the memory an idle session costs with many running at once, and (4) the sandbox
//! list API with 100,000 sandboxes, (5) the CPU to read usage from a 200 MB transcript
//! incrementally, (6) what the sandbox adds to a session's start and throughput
//! (sandboxed against `--unsandboxed`), (7) what TLS costs a viewer's throughput and
//! echo latency (`--tls-cert` against plain HTTP). `--only soak` runs the soak instead (not part of
//! the default run): many sessions for minutes, the device's link dropped every minute,
//! viewers coming and going; nothing lost, memory flat. `--only fleet` (not part of the
//! default run either) simulates up to 1,000 devices with 8 live sessions each against
//! one server, on SQLite and PostgreSQL: server CPU and memory, heartbeat cost, and the
//! Sessions list under that load. `--only attention` times "Needs you" through the real
//! hook: a held call raised until the inbox lists it, and Approve until the harness goes
//! on, beside a health round trip. `--only screen` (not part of the default run) times a
//! finished session's Final screen, from its screen checkpoints, against the live
//! snapshot of the same session, at 1 MB, 100 MB and 1 GB of output. `--only browser`
//! (not part of the default run: it needs the web dependencies) times keys typed into a
//! session's live terminal in Chromium against `drover session attach` in the same run.
//! `--only relay` and `--only replicas` (not part of the default run: they need
//! PostgreSQL) put replicas to work: a Start, input and a viewer's join relayed across
//! two replicas against the local path, and each replica's CPU serving twice the fleet
//! against one server serving it.
//!
//! Run with `scripts/bench` (builds the release binaries first). Figures are medians;
//! machines here are shared and noisy, so compare ratios, not absolute numbers.
#![allow(clippy::too_many_lines)] // a benchmark reads best as one scenario per function

mod attention;
mod browser;
mod drover;
mod fleet;
mod http;
mod latency;
mod list;
mod memory;
mod pty;
mod quiet;
mod relay;
mod sandbox;
mod screen;
mod soak;
mod task_start;
mod throughput;
mod tls;
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
    /// Milliseconds between keystrokes in the latency runs (people type with gaps).
    #[arg(long, default_value_t = 30)]
    gap_ms: u64,
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
    /// Devices at the fleet run's largest size (the default sizes are a quarter, half
    /// and all of it); in the replicas run, the one server's devices (the two replicas
    /// serve twice as many).
    #[arg(long, default_value_t = 1000)]
    fleet_devices: usize,
    /// The fleet run's sizes, in devices (e.g. 250,500,1000; default: from --fleet-devices).
    #[arg(long, value_delimiter = ',')]
    fleet_sizes: Vec<usize>,
    /// Seconds of each of the fleet run's measured windows.
    #[arg(long, default_value_t = 60.0)]
    fleet_secs: f64,
    /// PostgreSQL server for the list and fleet runs (postgres://USER@HOST:PORT, no
    /// database; one is created and dropped per run); default: the one `scripts/postgres`
    /// starts; `off` skips PostgreSQL.
    #[arg(long)]
    postgres: Option<String>,
    /// Session starts per side for the sandbox run (and starts and joins per side for the
    /// replicas run).
    #[arg(long, default_value_t = 30)]
    starts: usize,
    /// Sizes in MB of the sessions whose Final screen `screen` times.
    #[arg(long, value_delimiter = ',', default_values_t = vec![1u64, 100, 1000])]
    screen_mb: Vec<u64>,
    /// Only these parts (throughput, latency, memory, list, task, usage, sandbox, tls; or soak,
    /// fleet, relay, replicas, screen and browser, which the default run leaves out);
    /// default all but those.
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
    let want = |part: &str| {
        (args.only.is_empty() && !["soak", "fleet", "relay", "replicas", "screen", "browser"].contains(&part))
            || args.only.iter().any(|o| o == part)
    };
    // PostgreSQL, for the parts that also run on it (Err: why not).
    let pg = if want("list") || want("fleet") || want("relay") || want("replicas") {
        drover::Postgres::find(args.postgres.as_deref())
    } else {
        Err("not needed".into())
    };
    let mut report = serde_json::Map::new();
    println!("drover-bench: {} ({} cores)", exe.display(), std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1));
    if want("throughput") {
        let r = throughput::run(&exe, args.mb, args.runs)?;
        report.insert("throughput".into(), serde_json::to_value(r)?);
    }
    if want("latency") {
        let r = latency::run(&exe, args.keys, args.gap_ms, args.streams)?;
        report.insert("latency".into(), serde_json::to_value(r)?);
    }
    if want("browser") {
        let r = browser::run(&exe, args.keys, args.gap_ms, args.runs, args.mb)?;
        report.insert("browser".into(), serde_json::to_value(r)?);
    }
    if want("memory") {
        let r = memory::run(&exe, args.idle)?;
        report.insert("memory".into(), serde_json::to_value(r)?);
    }
    if want("list") {
        let r = list::run(&exe, args.sandboxes, &pg)?;
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
    if want("sandbox") {
        let r = sandbox::run(&exe, args.mb, args.runs, args.starts)?;
        report.insert("sandbox".into(), serde_json::to_value(r)?);
    }
    if want("tls") {
        let r = tls::run(&exe, args.mb, args.runs, args.keys)?;
        report.insert("tls".into(), serde_json::to_value(r)?);
    }
    if want("attention") {
        let r = attention::run(&exe, args.runs.max(30))?;
        report.insert("attention".into(), serde_json::to_value(r)?);
    }
    if want("screen") {
        let r = screen::run(&exe, &args.screen_mb)?;
        report.insert("screen".into(), serde_json::to_value(r)?);
    }
    if want("soak") {
        let r = soak::run(&exe, args.soak_sessions, args.soak_minutes, std::time::Duration::from_secs(60))?;
        report.insert("soak".into(), serde_json::to_value(r)?);
    }
    if want("fleet") {
        let sizes = if args.fleet_sizes.is_empty() {
            vec![args.fleet_devices / 4, args.fleet_devices / 2, args.fleet_devices]
        } else {
            args.fleet_sizes.clone()
        };
        let fleet_args = fleet::FleetArgs { sizes, secs: args.fleet_secs, sandboxes: args.sandboxes };
        let r = fleet::run(&exe, &fleet_args, &pg)?;
        report.insert("fleet".into(), serde_json::to_value(r)?);
    }
    let relay_args = relay::RelayArgs { repeats: args.starts, keys: args.keys, gap_ms: args.gap_ms };
    if want("relay") {
        let pg = pg.as_ref().map_err(|why| anyhow::anyhow!("the relay run needs PostgreSQL: {why}"))?;
        let r = relay::run(&exe, pg, relay_args)?;
        report.insert("relay".into(), serde_json::to_value(r)?);
    }
    if want("replicas") {
        let pg = pg.as_ref().map_err(|why| anyhow::anyhow!("the replicas run needs PostgreSQL: {why}"))?;
        let r = fleet::replicas::run(&exe, args.fleet_devices, args.fleet_secs, args.runs, relay_args, pg)?;
        report.insert("replicas".into(), serde_json::to_value(r)?);
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

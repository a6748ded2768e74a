//! Memory of idle sessions: with N idle sessions running at once, each one's shim (RSS
//! and PSS, which splits pages shared between shims fairly) and its run's PID-namespace
//! init, plus its share of what the daemon and server grew by. Baselines: dtach's
//! process per session (PSS, measured the same way) and what tmux grows by per session.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Result;
use serde::Serialize;

use crate::drover::Up;
use crate::median;

/// Memory figures in MB.
#[derive(Debug, Serialize)]
pub struct Memory {
    /// Idle sessions running.
    pub sessions: usize,
    /// Median shim RSS.
    pub shim_rss_mb: f64,
    /// Median shim PSS.
    pub shim_pss_mb: f64,
    /// Median PSS of each run's PID-namespace init (a fork of its shim; 0 where runs
    /// get no namespace).
    pub init_pss_mb: f64,
    /// Growth of the `up` process (server + daemon) per session.
    pub up_share_mb: f64,
    /// PSS of the daemon's shim launcher, which forks every shim (one per daemon).
    pub launcher_pss_mb: f64,
    /// shim PSS + init PSS + up share + launcher PSS / sessions: the cost of one idle
    /// session (goal ≤ 0.5 MB).
    pub per_session_mb: f64,
    /// PSS of each `dtach -n` process holding an idle session, median (None if dtach is
    /// not installed).
    pub dtach_pss_mb: Option<f64>,
    /// tmux server growth per idle session, for reference.
    pub tmux_per_session_mb: Option<f64>,
}

fn status_kb(pid: u32, file: &str, key: &str) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/{file}"))
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with(key)).and_then(|l| l.split_whitespace().nth(1)?.parse().ok()))
        .unwrap_or(f64::NAN)
}

/// A process's resident memory, in MB (NaN if it is gone).
pub(crate) fn rss_mb(pid: u32) -> f64 {
    status_kb(pid, "status", "VmRSS:") / 1024.0
}

/// Of a process's resident memory, what is its own (anonymous: heap, stacks), in MB; the
/// rest is pages of files it maps (its executable's code, shared with every other
/// `drover` process), which grows only as code is first run and is bounded by the binary.
pub(crate) fn anon_mb(pid: u32) -> f64 {
    status_kb(pid, "status", "RssAnon:") / 1024.0
}

fn pss_mb(pid: u32) -> f64 {
    status_kb(pid, "smaps_rollup", "Pss:") / 1024.0
}

/// Whether `pid` is the init of a PID namespace of its own (its last `NSpid` is 1).
fn is_namespace_init(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("NSpid:")).map(|l| l.split_whitespace().last() == Some("1")))
        .unwrap_or(false)
}

fn tmux(n: usize) -> Option<f64> {
    let sock = format!("drover-bench-mem-{}", std::process::id());
    let t = |args: &[&str]| Command::new("tmux").args(["-L", &sock, "-f", "/dev/null"]).args(args).stdin(Stdio::null()).output().ok();
    t(&["new-session", "-d", "-s", "s0", "sleep 1000000"])?;
    let pid: u32 = String::from_utf8(t(&["display-message", "-p", "#{pid}"])?.stdout).ok()?.trim().parse().ok()?;
    std::thread::sleep(Duration::from_millis(500));
    let before = rss_mb(pid);
    for i in 1..=n {
        t(&["new-session", "-d", "-s", &format!("s{i}"), "sleep 1000000"])?;
    }
    std::thread::sleep(Duration::from_secs(1));
    let after = rss_mb(pid);
    t(&["kill-server"]);
    Some((after - before) / n as f64)
}

/// The processes whose command line names `needle`.
fn pids_naming(needle: &str) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| String::from_utf8_lossy(&c).contains(needle)))
        .collect()
}

/// dtach's cost of an idle session: the PSS of each of `n` `dtach -n` processes, each
/// holding `sleep` in a terminal of its own, median; None if dtach is not installed.
fn dtach(n: usize) -> Option<f64> {
    let dir = tempfile::tempdir().ok()?;
    let sockets = dir.path().display().to_string();
    for i in 0..n {
        let sock = format!("{sockets}/s{i}");
        let ok = Command::new("dtach").args(["-n", &sock, "-z", "sleep", "1000000"]).stdin(Stdio::null()).status().ok()?.success();
        if !ok {
            return None;
        }
    }
    std::thread::sleep(Duration::from_secs(1));
    let masters: Vec<u32> = pids_naming(&sockets)
        .into_iter()
        .filter(|p| std::fs::read_to_string(format!("/proc/{p}/comm")).is_ok_and(|c| c.trim() == "dtach"))
        .collect();
    let mut pss: Vec<f64> = masters.iter().map(|p| pss_mb(*p)).collect();
    for pid in &masters {
        // SAFETY: kill(2) on a process the bench started (and its group); no memory is
        // involved. Its `sleep` gets SIGHUP as the terminal the process held closes.
        unsafe {
            libc::kill(-(*pid as i32), libc::SIGKILL);
            libc::kill(*pid as i32, libc::SIGKILL);
        }
    }
    (!pss.is_empty()).then(|| median(&mut pss))
}

/// The `up` process's shim launcher: its child running `drover shim-launcher`.
fn launcher_of(up: u32) -> Option<u32> {
    let dir = std::fs::read_dir("/proc").ok()?;
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok()).find(|pid| {
        let parent = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| s.rsplit_once(')')?.1.split_whitespace().nth(1)?.parse::<u32>().ok());
        parent == Some(up)
            && std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c.split(|b| *b == 0).any(|w| w == b"shim-launcher"))
    })
}

/// Runs the memory measurement.
pub fn run(exe: &Path, n: usize) -> Result<Memory> {
    let up = Up::start(exe)?;
    std::thread::sleep(Duration::from_secs(1));
    let before = rss_mb(up.pid());
    let mut ids = Vec::new();
    for _ in 0..n {
        ids.push(up.start_session(100, 30, &["sleep", "1000000"])?);
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    while up.cli(&["--json", "session", "list"])?.matches("\"outcome\": \"running\"").count() < n {
        anyhow::ensure!(Instant::now() < deadline, "not all sessions ran");
        std::thread::sleep(Duration::from_millis(100));
    }
    // Idle sessions, as they stay: past the quiet time after which a screen is packed.
    std::thread::sleep(drover_term::screen::QUIET + Duration::from_secs(3));
    let after = rss_mb(up.pid());
    let pids = up.shim_pids();
    let mut rss: Vec<f64> = pids.iter().map(|p| rss_mb(*p)).collect();
    let mut pss: Vec<f64> = pids.iter().map(|p| pss_mb(*p)).collect();
    let (shim_rss_mb, shim_pss_mb) = (median(&mut rss), median(&mut pss));
    let mut init: Vec<f64> = up.child_pids().iter().map(|p| if is_namespace_init(*p) { pss_mb(*p) } else { 0.0 }).collect();
    let init_pss_mb = if init.is_empty() { 0.0 } else { median(&mut init) };
    let up_share_mb = (after - before) / n as f64;
    let launcher = launcher_of(up.pid()).ok_or_else(|| anyhow::anyhow!("the daemon's shim launcher was not found"))?;
    let launcher_pss_mb = pss_mb(launcher);
    let r = Memory {
        sessions: n,
        shim_rss_mb,
        shim_pss_mb,
        init_pss_mb,
        up_share_mb,
        launcher_pss_mb,
        per_session_mb: shim_pss_mb + init_pss_mb + up_share_mb + launcher_pss_mb / n as f64,
        dtach_pss_mb: dtach(n),
        tmux_per_session_mb: tmux(n),
    };
    println!(
        "memory ({n} idle sessions): shim RSS {:.2} MB, PSS {:.2} MB; run init PSS {:.2} MB; server+daemon {:.2} MB per session; shim launcher {:.2} MB PSS → {:.2} MB per idle session (goal ≤ 0.5){}{}",
        r.shim_rss_mb,
        r.shim_pss_mb,
        r.init_pss_mb,
        r.up_share_mb,
        r.launcher_pss_mb,
        r.per_session_mb,
        r.dtach_pss_mb.map(|t| format!("; dtach {t:.2} MB PSS per session")).unwrap_or_else(|| "; dtach not installed".into()),
        r.tmux_per_session_mb.map(|t| format!("; tmux grows {t:.2} MB per session")).unwrap_or_default()
    );
    Ok(r)
}

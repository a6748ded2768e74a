//! The soak run (not part of the default run; `--only soak`): `drover server` and a
//! `drover device` in separate processes, the device's link through a proxy that drops
//! it every minute, N sessions printing numbered lines, viewers (`session tail
//! --follow`) coming and going. At the end every session's stored output is checked
//! line by line (no number missing, none twice) and the server's and device's memory
//! over the run is reported: resident memory at the end against the first sample after
//! warm-up (the first five minutes, or half of a shorter run), with both heaps in use
//! and the server's live structures (scraped from their `/metrics`) beside it, so growth
//! can be told apart as something kept (heap in use grows) or the allocator's (it does not).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde::Serialize;

use crate::memory::{anon_mb, rss_mb};
use drover_linkproxy::LinkProxy;

/// What the soak run found.
#[derive(Debug, Serialize)]
pub struct SoakReport {
    /// Sessions printing throughout.
    pub sessions: usize,
    /// Length of the run, in minutes.
    pub minutes: f64,
    /// Times the device's link was dropped.
    pub link_cuts: u64,
    /// Viewers started (each later stopped).
    pub viewers: usize,
    /// Lines stored in all.
    pub lines: u64,
    /// Line numbers missing from a session's stored output (goal 0).
    pub lines_missing: u64,
    /// Line numbers stored twice (goal 0).
    pub lines_doubled: u64,
    /// Sessions whose stored output falls short of the length their device reported at
    /// the end (a lost tail; goal 0).
    pub short_recordings: u64,
    /// Minutes of warm-up before the first memory sample.
    pub warmup_minutes: f64,
    /// Server memory (RSS, MB): first sample after warm-up, last, highest.
    pub server_rss_mb: (f64, f64, f64),
    /// Device daemon memory (RSS, MB): first after warm-up, last, highest.
    pub device_rss_mb: (f64, f64, f64),
    /// Of the server's RSS, its anonymous memory (MB): first after warm-up, last, highest.
    pub server_anon_mb: (f64, f64, f64),
    /// Of the device daemon's RSS, its anonymous memory (MB): first, last, highest.
    pub device_anon_mb: (f64, f64, f64),
    /// The server's heap in use (MB): first after warm-up, last, highest.
    pub server_heap_mb: (f64, f64, f64),
    /// The device daemon's heap in use (MB): first after warm-up, last, highest.
    pub device_heap_mb: (f64, f64, f64),
    /// Whether the run met the goal: server RSS at the end within 10% of its first
    /// sample after warm-up, the device's within 5%, nothing missing, doubled or short.
    pub flat: bool,
    /// Every sample after warm-up, 15 s apart.
    pub samples: Vec<Sample>,
}

/// One look at both processes.
#[derive(Debug, Clone, Serialize)]
pub struct Sample {
    /// Minutes since the sessions started.
    pub minute: f64,
    /// Server RSS (MB).
    pub server_rss_mb: f64,
    /// Device daemon RSS (MB).
    pub device_rss_mb: f64,
    /// Of each RSS, the anonymous memory (MB): server, device. The rest is the
    /// executable's pages, shared between them and every shim.
    pub anon_mb: (f64, f64),
    /// The server's heap in use and held free by the allocator (MB; NaN if unknown).
    pub server_heap_mb: (f64, f64),
    /// Of the heap in use, SQLite's: page caches, statements, schemas (MB).
    pub server_sqlite_mb: f64,
    /// The server's live structures (`drover_live_items`): hubs, viewers, tasks.
    pub hubs_viewers_tasks: (u64, u64, u64),
    /// The device daemon's heap in use and held free by the allocator (MB).
    pub device_heap_mb: (f64, f64),
}

struct Procs {
    children: Vec<Child>,
    device_home: PathBuf,
}

impl Drop for Procs {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        crate::drover::kill_sessions(&self.device_home.join("device-daemon/sessions"));
    }
}

fn cli(exe: &Path, home: &Path, args: &[&str]) -> Result<String> {
    let out = Command::new(exe).args(args).env("DROVER_HOME", home).stdin(Stdio::null()).output()?;
    if !out.status.success() {
        bail!("drover {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(String::from_utf8(out.stdout)?)
}

fn spawn(exe: &Path, home: &Path, args: &[&str]) -> Result<Child> {
    Command::new(exe)
        .args(args)
        .env("DROVER_HOME", home)
        .env("RUST_LOG", "error")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("starting drover {args:?}"))
}

/// Checks a session's text: lines `line 1`, `line 2`, … with none missing or doubled;
/// returns (lines, missing, doubled).
fn check_lines(text: &str) -> (u64, u64, u64) {
    let numbers: Vec<u64> = text.lines().filter_map(|l| l.trim().strip_prefix("line ")?.trim().parse().ok()).collect();
    let (mut missing, mut doubled) = (0, 0);
    let mut expect = 1;
    for n in &numbers {
        match n.cmp(&expect) {
            std::cmp::Ordering::Equal => expect += 1,
            std::cmp::Ordering::Greater => {
                missing += n - expect;
                expect = n + 1;
            }
            std::cmp::Ordering::Less => doubled += 1,
        }
    }
    (numbers.len() as u64, missing, doubled)
}

/// `GET /metrics` from the server's open metrics listener at `addr`.
fn scrape(addr: &str) -> Result<String> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr)?;
    write!(s, "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n")?;
    let mut body = String::new();
    s.read_to_string(&mut body)?;
    Ok(body)
}

/// The value of the sample `series` (name and labels, exactly) in a scrape.
fn metric(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.trim().parse().ok())
}

/// Both processes' memory now, their heaps, and the server's live structures; `metrics`
/// is where the server serves its metrics and where the device daemon serves its own.
fn sample(start: Instant, server_pid: u32, device_pid: u32, metrics: (&str, &str)) -> Sample {
    let (text, device) = (scrape(metrics.0).unwrap_or_default(), scrape(metrics.1).unwrap_or_default());
    let mb = |series: &str| metric(&text, series).map_or(f64::NAN, |b| b / 1e6);
    let device_mb = |series: &str| metric(&device, series).map_or(f64::NAN, |b| b / 1e6);
    let n = |structure: &str| metric(&text, &format!("drover_live_items{{structure=\"{structure}\"}}")).unwrap_or(f64::NAN) as u64;
    Sample {
        minute: start.elapsed().as_secs_f64() / 60.0,
        server_rss_mb: rss_mb(server_pid),
        device_rss_mb: rss_mb(device_pid),
        anon_mb: (anon_mb(server_pid), anon_mb(device_pid)),
        server_heap_mb: (mb("drover_heap_bytes{state=\"in_use\"}"), mb("drover_heap_bytes{state=\"free\"}")),
        server_sqlite_mb: mb("drover_sqlite_memory_bytes"),
        hubs_viewers_tasks: (n("hubs"), n("hub_viewers"), n("tasks")),
        device_heap_mb: (device_mb("drover_heap_bytes{state=\"in_use\"}"), device_mb("drover_heap_bytes{state=\"free\"}")),
    }
}

fn summary(samples: &[f64]) -> (f64, f64, f64) {
    let first = samples.first().copied().unwrap_or(f64::NAN);
    let last = samples.last().copied().unwrap_or(f64::NAN);
    (first, last, samples.iter().copied().fold(f64::NAN, f64::max))
}

/// Runs the soak: `sessions` sessions for `minutes`, the link dropped every `cut_every`.
pub fn run(exe: &Path, sessions: usize, minutes: f64, cut_every: Duration) -> Result<SoakReport> {
    let (server_home, device_home) = (tempfile::tempdir()?, tempfile::tempdir()?);
    let mut procs = Procs { children: Vec::new(), device_home: device_home.path().to_path_buf() };
    let port = || -> Result<String> { Ok(format!("127.0.0.1:{}", std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())) };
    let (metrics, device_metrics) = (port()?, port()?);
    let server_args = ["server", "--listen", "127.0.0.1:0", "--stop-grace", "1", "--metrics-listen", &metrics];
    let mut server = spawn(exe, server_home.path(), &server_args)?;
    let mut lines = BufReader::new(server.stdout.take().context("stdout")?).lines();
    let url = loop {
        match lines.next() {
            Some(Ok(l)) => {
                if let Some(u) = l.strip_prefix("Drover server is running at ") {
                    break u.split_whitespace().next().unwrap_or(u).to_string();
                }
            }
            _ => bail!("drover server exited"),
        }
    };
    std::thread::spawn(move || for _ in lines {});
    let server_pid = server.id();
    procs.children.push(server);
    let home = server_home.path();
    let slots = (sessions + 10).to_string();
    let cred: serde_json::Value = serde_json::from_str(&cli(exe, home, &["--json", "device", "add", "soak", "--slots", &slots])?)?;
    let token = cred["enrollment_token"].as_str().context("device enrollment token")?.to_string();
    let link = LinkProxy::start(url.trim_start_matches("http://").parse()?)?;
    let device_args =
        ["device", "--server", &link.url(), "--token", &token, "--name", "soak", "--slots", &slots, "--metrics-listen", &device_metrics];
    let device = spawn(exe, device_home.path(), &device_args)?;
    let device_pid = device.id();
    procs.children.push(device);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !cli(exe, home, &["device", "list"])?.contains("connected") {
        anyhow::ensure!(Instant::now() < deadline, "the device never connected");
        std::thread::sleep(Duration::from_millis(100));
    }

    // Numbered lines twice a second, with no process started per line (bash's `read -t`
    // on a pipe that never delivers is the pause).
    let script = "exec 3<> <(:); i=0; while :; do i=$((i+1)); echo \"line $i\"; read -t 0.5 -u 3; done";
    let mut ids = Vec::new();
    for _ in 0..sessions {
        let out = cli(exe, home, &["session", "start", "--device", "soak", "--", "bash", "-c", script])?;
        ids.push(out.trim().to_string());
    }
    println!("soak: {sessions} sessions running; {minutes} min, link dropped every {}s", cut_every.as_secs());

    let start = Instant::now();
    let end = start + Duration::from_secs_f64(minutes * 60.0);
    let warm = Duration::from_secs(300).min(Duration::from_secs_f64(minutes * 60.0 / 2.0));
    let mut samples = Vec::new();
    let (mut next_cut, mut next_sample, mut next_viewer) = (start + cut_every, start + warm, start);
    let mut viewers: Vec<Child> = Vec::new();
    let mut viewers_started = 0usize;
    while Instant::now() < end {
        let now = Instant::now();
        if now >= next_cut {
            link.cut();
            std::thread::sleep(Duration::from_secs(3));
            link.restore();
            next_cut += cut_every;
        }
        if now >= next_sample {
            samples.push(sample(start, server_pid, device_pid, (&metrics, &device_metrics)));
            next_sample += Duration::from_secs(15);
        }
        if now >= next_viewer {
            let id = &ids[viewers_started % ids.len()];
            let v = Command::new(exe)
                .args(["session", "tail", id, "--follow"])
                .env("DROVER_HOME", home)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()?;
            viewers.push(v);
            viewers_started += 1;
            if viewers.len() > 10 {
                let mut old = viewers.remove(0);
                let _ = old.kill();
                let _ = old.wait();
            }
            next_viewer += Duration::from_secs(2);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    for mut v in viewers {
        let _ = v.kill();
        let _ = v.wait();
    }
    samples.push(sample(start, server_pid, device_pid, (&metrics, &device_metrics)));

    for id in &ids {
        cli(exe, home, &["session", "stop", id])?;
    }
    let (mut total, mut missing, mut doubled, mut short) = (0, 0, 0, 0);
    for id in &ids {
        let deadline = Instant::now() + Duration::from_secs(30);
        let shown: serde_json::Value = loop {
            let v: serde_json::Value = serde_json::from_str(&cli(exe, home, &["--json", "session", "show", id])?)?;
            if v["final_offset"].is_u64() || Instant::now() > deadline {
                break v;
            }
            std::thread::sleep(Duration::from_millis(100));
        };
        if shown["final_offset"].as_u64().is_none_or(|end| shown["output_bytes"].as_u64() < Some(end)) {
            short += 1;
        }
        let text = cli(exe, home, &["session", "tail", id, "--lines", "100000000"])?;
        let (n, m, d) = check_lines(&text);
        total += n;
        missing += m;
        doubled += d;
    }
    let of = |f: fn(&Sample) -> f64| summary(&samples.iter().map(f).collect::<Vec<_>>());
    let (server_rss_mb, device_rss_mb) = (of(|s| s.server_rss_mb), of(|s| s.device_rss_mb));
    let (server_heap_mb, device_heap_mb) = (of(|s| s.server_heap_mb.0), of(|s| s.device_heap_mb.0));
    let (server_anon_mb, device_anon_mb) = (of(|s| s.anon_mb.0), of(|s| s.anon_mb.1));
    let growth = |(first, last, _): (f64, f64, f64)| last / first;
    let flat = growth(server_rss_mb) <= 1.10 && growth(device_rss_mb) <= 1.05 && missing + doubled + short == 0;
    let report = SoakReport {
        sessions,
        minutes,
        link_cuts: link.cuts(),
        viewers: viewers_started,
        lines: total,
        lines_missing: missing,
        lines_doubled: doubled,
        short_recordings: short,
        warmup_minutes: warm.as_secs_f64() / 60.0,
        server_rss_mb,
        device_rss_mb,
        server_anon_mb,
        device_anon_mb,
        server_heap_mb,
        device_heap_mb,
        flat,
        samples,
    };
    println!(
        "soak: {} lines stored, {} missing, {} doubled, {} recordings short of their end; link dropped {} times; {} viewers came and went",
        report.lines, report.lines_missing, report.lines_doubled, report.short_recordings, report.link_cuts, report.viewers
    );
    let line = |what: &str, (first, last, max): (f64, f64, f64)| {
        format!("{what} {first:.1} → {last:.1} MB (max {max:.1}, end/start {:.2})", last / first)
    };
    println!(
        "soak: from minute {:.1} to the end: {}; {}; {}; {}; {}; {}",
        report.warmup_minutes,
        line("server RSS", server_rss_mb),
        line("of it anonymous", server_anon_mb),
        line("server heap in use", server_heap_mb),
        line("device RSS", device_rss_mb),
        line("of it anonymous", device_anon_mb),
        line("device heap in use", device_heap_mb)
    );
    // One sample a minute (every fourth), to read the shape.
    let per_minute = |f: fn(&Sample) -> String| report.samples.iter().step_by(4).map(f).collect::<Vec<_>>().join(" ");
    println!("soak: server RSS (anonymous) each minute (MB): {}", per_minute(|s| format!("{:.0}({:.0})", s.server_rss_mb, s.anon_mb.0)));
    println!(
        "soak: server heap in use / free / SQLite's each minute (MB): {}",
        per_minute(|s| format!("{:.0}/{:.0}/{:.1}", s.server_heap_mb.0, s.server_heap_mb.1, s.server_sqlite_mb))
    );
    println!("soak: device RSS (anonymous) each minute (MB): {}", per_minute(|s| format!("{:.1}({:.1})", s.device_rss_mb, s.anon_mb.1)));
    println!(
        "soak: device heap in use / free each minute (MB): {}",
        per_minute(|s| format!("{:.1}/{:.1}", s.device_heap_mb.0, s.device_heap_mb.1))
    );
    println!(
        "soak: server hubs/viewers/tasks each minute: {}",
        per_minute(|s| format!("{}/{}/{}", s.hubs_viewers_tasks.0, s.hubs_viewers_tasks.1, s.hubs_viewers_tasks.2))
    );
    println!("soak: {} (goal: server RSS end/start ≤ 1.10, device ≤ 1.05, nothing lost)", if flat { "flat" } else { "NOT flat" });
    drop(procs);
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::check_lines;

    #[test]
    fn missing_and_doubled_lines_are_counted() {
        assert_eq!(check_lines("line 1\nline 2\nline 3\n"), (3, 0, 0));
        assert_eq!(check_lines("line 1\nline 3\n"), (2, 1, 0));
        assert_eq!(check_lines("line 1\nline 2\nline 2\nline 3"), (4, 0, 1));
        assert_eq!(check_lines("junk\nline 1\r\n"), (1, 0, 0));
    }
}

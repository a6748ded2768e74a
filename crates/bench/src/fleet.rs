//! The fleet run (not part of the default run; `--only fleet`): a real `drover server`,
//! on SQLite and on PostgreSQL, with up to 1,000 simulated devices that speak the real
//! device protocol (`drover_protocol::device`, as `drover_device::link` does) over their
//! own WebSockets: hello, a heartbeat at the daemon's default interval, and 8 live
//! sessions each, started through the real API (the server's Start answered with
//! Started), each printing one ~80-byte line every 10 s (at the end, what was sent is
//! checked against the server's `drover_output_bytes_total`). The database holds
//! 100,000 sandboxes at the largest size.
//!
//! Per fleet size it measures the server process (CPU from `/proc/PID/stat`, RSS from
//! `/proc/PID/status`) over windows: devices only heartbeating (the cost per heartbeat,
//! above the same server's idle floor with no device connected, measured first), then
//! the steady state with output on, then the Sessions list's first batch under that
//! load against `GET /api/v1/health`. The stale monitor sweeps every live session on its
//! own timer (the server's default, 30 s) inside each window.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde::Serialize;

use crate::drover::{Postgres, Up};
use crate::http::Client;
use crate::median;

mod meter;
pub mod replicas;
mod sim;

use meter::{measure, DbMeter, Sample};
use sim::{device, Counters};

/// Live sessions per simulated device (and its slots).
const SESSIONS_PER_DEVICE: usize = 8;

/// How often a device heartbeats: the daemon's default (`--heartbeat-secs`).
const HEARTBEAT: Duration = drover_device::HEARTBEAT;

/// Each live session prints one line this often.
const LINE_EVERY: Duration = Duration::from_secs(10);

/// Bytes per printed line.
const LINE_BYTES: usize = 80;

/// The stale monitor's interval: the server's default (`--monitor-secs`).
const MONITOR_SECS: f64 = 30.0;

/// Rounds of (health, Live, All) requests timed per size; medians are reported.
const LIST_ROUNDS: usize = 25;

/// Concurrent API clients registering devices and starting sessions.
const API_THREADS: usize = 6;

/// The fleet run's settings.
#[derive(Debug, Clone)]
pub struct FleetArgs {
    /// Device counts, measured in ascending order on one server (devices are added).
    pub sizes: Vec<usize>,
    /// Length of each measured window, in seconds.
    pub secs: f64,
    /// Sandboxes in the database at the largest size (history is seeded to reach it).
    pub sandboxes: usize,
}

/// The fleet run's figures, per database engine.
#[derive(Debug, Serialize)]
pub struct FleetReport {
    /// Length of each measured window, in seconds.
    pub window_secs: f64,
    /// Heartbeat interval of each device, in seconds.
    pub heartbeat_secs: f64,
    /// Seconds between lines of each live session.
    pub line_every_secs: f64,
    /// The stale monitor's interval, in seconds (the server's default).
    pub monitor_secs: f64,
    /// One entry per engine measured.
    pub engines: Vec<EngineFleet>,
    /// Why PostgreSQL was skipped, if it was.
    pub postgres_skipped: Option<String>,
}

/// The fleet on one database engine.
#[derive(Debug, Serialize)]
pub struct EngineFleet {
    /// `SQLite` or `PostgreSQL`.
    pub engine: String,
    /// The server with no device connected (the floor the others are measured against).
    pub idle: Window,
    /// The list's first batch (All) on the idle server, median ms.
    pub idle_list_all_ms: f64,
    /// `GET /api/v1/health` on the idle server, median ms.
    pub idle_health_ms: f64,
    /// One entry per fleet size, ascending.
    pub sizes: Vec<SizeFigures>,
}

/// What one measured window saw.
#[derive(Debug, Clone, Serialize)]
pub struct Window {
    /// Wall time, seconds.
    pub secs: f64,
    /// Server CPU, % of one core.
    pub cpu_pct: f64,
    /// The busiest second's server CPU, % of one core (the stale sweep shows here).
    pub peak_cpu_pct: f64,
    /// Server RSS at the end, MB.
    pub rss_mb: f64,
    /// CPU of the PostgreSQL backends serving this server's database, % of one core.
    pub db_cpu_pct: Option<f64>,
    /// CPU of all PostgreSQL processes (backends of every database, background workers).
    pub postgres_cpu_pct: Option<f64>,
    /// CPU of the simulator itself (this process), % of one core.
    pub simulator_cpu_pct: f64,
    /// Heartbeats the devices sent.
    pub heartbeats: u64,
    /// Output frames the devices sent.
    pub frames: u64,
}

/// Figures at one fleet size.
#[derive(Debug, Serialize)]
pub struct SizeFigures {
    /// Devices connected.
    pub devices: usize,
    /// Live sessions.
    pub sessions: usize,
    /// Sandboxes in the database.
    pub sandboxes: usize,
    /// Devices only heartbeating (output paused; sessions live).
    pub quiet: Window,
    /// Steady state: heartbeats and output.
    pub steady: Window,
    /// While the Sessions list was being timed (same load as `steady`).
    pub listing: Window,
    /// Server CPU per heartbeat above the idle floor, µs (everything the quiet window
    /// cost beyond the idle server: heartbeats, holding the links, the stale sweeps).
    pub heartbeat_cpu_us: f64,
    /// Quiet-window CPU over the idle floor's.
    pub quiet_vs_idle: f64,
    /// Server CPU per output frame (steady minus quiet), µs.
    pub frame_cpu_us: f64,
    /// Steady-state CPU above the idle floor per device, % of one core.
    pub cpu_per_device_pct: f64,
    /// `GET /api/v1/health` under load, median ms.
    pub health_ms: f64,
    /// The Sessions page's first batch (Live) under load, median ms.
    pub list_live_ms: f64,
    /// The Sessions page's first batch (All) under load, median ms.
    pub list_all_ms: f64,
    /// Output bytes sent but not stored (the server's `drover_output_bytes_total`) 10 s
    /// after the last measurement (goal 0).
    pub unstored_bytes: u64,
    /// Device links that dropped or were refused so far (goal 0).
    pub links_lost: u64,
    /// Sessions the server stopped or released so far (goal 0: nothing should end).
    pub ended_by_server: u64,
}

/// Runs the fleet on SQLite, then on PostgreSQL (`pg`, or why there is none).
pub fn run(exe: &Path, args: &FleetArgs, pg: &std::result::Result<Postgres, String>) -> Result<FleetReport> {
    let mut sizes = args.sizes.clone();
    sizes.sort_unstable();
    sizes.dedup();
    sizes.retain(|&n| n > 0);
    anyhow::ensure!(!sizes.is_empty(), "--fleet-sizes: no size above 0");
    println!(
        "fleet: sizes {sizes:?} devices × {SESSIONS_PER_DEVICE} live sessions; heartbeat every {}s, one {LINE_BYTES}-byte line per session every {}s, stale sweep every {MONITOR_SECS}s (server default); windows of {}s",
        HEARTBEAT.as_secs(),
        LINE_EVERY.as_secs(),
        args.secs
    );
    let mut engines = vec![run_engine(exe, &sizes, args, None)?];
    let postgres_skipped = match pg {
        Ok(pg) => {
            let name = format!("drover_fleet_{}", std::process::id());
            let r = run_engine(exe, &sizes, args, Some((pg, &name)));
            pg.drop_database(&name);
            engines.push(r?);
            None
        }
        Err(why) => {
            println!("fleet: PostgreSQL skipped: {why}");
            Some(why.clone())
        }
    };
    if engines.len() > 1 {
        println!("fleet, side by side at each size (steady-state server CPU, % of one core; list All under load):");
        for (i, n) in sizes.iter().enumerate() {
            let cells: Vec<String> = engines
                .iter()
                .map(|e| {
                    let s = &e.sizes[i];
                    format!(
                        "{}: CPU {:5.1}%  RSS {:5.0} MB  list All {:6.1} ms",
                        e.engine, s.steady.cpu_pct, s.steady.rss_mb, s.list_all_ms
                    )
                })
                .collect();
            println!("  {n:>5} devices  {}", cells.join("  |  "));
        }
    }
    Ok(FleetReport {
        window_secs: args.secs,
        heartbeat_secs: HEARTBEAT.as_secs_f64(),
        line_every_secs: LINE_EVERY.as_secs_f64(),
        monitor_secs: MONITOR_SECS,
        engines,
        postgres_skipped,
    })
}

/// The fleet on one server: SQLite in its home (`pg` None) or database `name` on `pg`.
fn run_engine(exe: &Path, sizes: &[usize], args: &FleetArgs, pg: Option<(&Postgres, &str)>) -> Result<EngineFleet> {
    let engine = if pg.is_some() { "PostgreSQL" } else { "SQLite" };
    let database = pg.map(|(pg, name)| pg.url(name));
    let up = Up::server(exe, database.as_deref(), &[])?;
    let pid = up.pid();
    let (url, _) = up.client_config()?;
    let ws_url = format!("{}/api/v1/device/connect", url.replacen("http://", "ws://", 1));
    let db_meter = pg.and_then(|(pg, name)| Some(DbMeter { postmaster: pg.postmaster?, database: name.to_string() }));
    let max = *sizes.last().expect("sizes");
    println!("fleet on {engine}: registering {max} devices");
    let t0 = Instant::now();
    let creds = register(&[&up], max, "sim")?;
    let history = args.sandboxes.saturating_sub(max * SESSIONS_PER_DEVICE);
    let db_url = database.clone().unwrap_or_else(|| format!("sqlite://{}", up.home.path().join("drover.db").display()));
    tokio::runtime::Builder::new_current_thread().enable_all().build()?.block_on(crate::list::seed(&db_url, history, 0))?;
    println!("  registered {max} devices and seeded {history} finished sandboxes in {:.1}s", t0.elapsed().as_secs_f64());

    let client = Client::for_up(&up)?;
    let counters = Arc::new(Counters::default());
    std::thread::sleep(Duration::from_secs(2));
    let idle = measure(pid, args.secs, db_meter.as_ref(), &counters);
    let (idle_health_ms, _, idle_list_all_ms) = list_rounds(&client)?;
    println!(
        "  idle floor (0 devices): CPU {:.2}% of a core, RSS {:.0} MB{}; list All {idle_list_all_ms:.1} ms, health {idle_health_ms:.2} ms",
        idle.cpu_pct,
        idle.rss_mb,
        db_cpu(&idle)
    );

    // The simulator: one worker thread for every device link.
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build()?;
    let mut figures = Vec::new();
    let mut connected = 0;
    for &size in sizes {
        let t0 = Instant::now();
        connect(&rt, &[ws_url.as_str()], &creds, connected..size, &counters)?;
        start_sessions(&[&up], &creds[connected..size])?;
        connected = size;
        let sessions = size * SESSIONS_PER_DEVICE;
        println!("  {size} devices connected, {sessions} sessions running ({:.1}s)", t0.elapsed().as_secs_f64());

        counters.output_on.store(false, Relaxed);
        std::thread::sleep(Duration::from_secs(3));
        let quiet = measure(pid, args.secs, db_meter.as_ref(), &counters);
        counters.output_on.store(true, Relaxed);
        std::thread::sleep(LINE_EVERY);
        let steady = measure(pid, args.secs, db_meter.as_ref(), &counters);
        let t_list = Instant::now();
        let before = Sample::take(pid, db_meter.as_ref(), &counters);
        let (health_ms, list_live_ms, list_all_ms) = list_rounds(&client)?;
        let listing = Sample::take(pid, db_meter.as_ref(), &counters).since(&before, t_list.elapsed().as_secs_f64(), 0.0);
        let unstored_bytes = unstored(std::slice::from_ref(&client), &counters)?;
        let cpu_s = |w: &Window| w.cpu_pct / 100.0 * w.secs;
        let idle_cpu_s = idle.cpu_pct / 100.0 * quiet.secs;
        let f = SizeFigures {
            devices: size,
            sessions,
            sandboxes: history + sessions,
            heartbeat_cpu_us: (cpu_s(&quiet) - idle_cpu_s) * 1e6 / quiet.heartbeats.max(1) as f64,
            quiet_vs_idle: quiet.cpu_pct / idle.cpu_pct,
            frame_cpu_us: (steady.cpu_pct - quiet.cpu_pct) / 100.0 * steady.secs * 1e6 / steady.frames.max(1) as f64,
            cpu_per_device_pct: (steady.cpu_pct - idle.cpu_pct) / size as f64,
            health_ms,
            list_live_ms,
            list_all_ms,
            unstored_bytes,
            links_lost: counters.links_lost.load(Relaxed),
            ended_by_server: counters.ended_by_server.load(Relaxed),
            quiet,
            steady,
            listing,
        };
        println!(
            "  {size} devices, heartbeats only: CPU {:.2}% ({:.1}× idle), {} heartbeats, {:.0} µs of server CPU each above the idle floor{}",
            f.quiet.cpu_pct,
            f.quiet_vs_idle,
            f.quiet.heartbeats,
            f.heartbeat_cpu_us,
            db_cpu(&f.quiet)
        );
        println!(
            "  {size} devices, steady state: CPU {:.2}% (peak second {:.1}%), RSS {:.0} MB, {} frames ({:.0} µs each), {:.4}% per device{}; simulator {:.1}%",
            f.steady.cpu_pct,
            f.steady.peak_cpu_pct,
            f.steady.rss_mb,
            f.steady.frames,
            f.frame_cpu_us,
            f.cpu_per_device_pct,
            db_cpu(&f.steady),
            f.steady.simulator_cpu_pct
        );
        println!(
            "  {size} devices, Sessions list under load ({} sandboxes): Live {:.1} ms, All {:.1} ms vs health {:.2} ms ({:.0}× health); not stored {} B, links lost {}, ended by the server {}",
            f.sandboxes,
            f.list_live_ms,
            f.list_all_ms,
            f.health_ms,
            f.list_all_ms / f.health_ms,
            f.unstored_bytes,
            f.links_lost,
            f.ended_by_server
        );
        figures.push(f);
    }
    rt.shutdown_background();
    drop(up);
    print_table(engine, &idle, &figures);
    Ok(EngineFleet { engine: engine.to_string(), idle, idle_list_all_ms, idle_health_ms, sizes: figures })
}

fn db_cpu(w: &Window) -> String {
    match (w.db_cpu_pct, w.postgres_cpu_pct) {
        (Some(db), Some(all)) => format!(" (+ PostgreSQL: its backends {db:.2}%, all postgres processes {all:.2}%)"),
        _ => String::new(),
    }
}

fn print_table(engine: &str, idle: &Window, sizes: &[SizeFigures]) {
    println!("fleet on {engine}: server CPU (% of one core) and memory; idle floor {:.2}%, {:.0} MB", idle.cpu_pct, idle.rss_mb);
    println!(
        "  {:>7} {:>8} | {:>9} {:>9} {:>8} | {:>9} {:>7} {:>10} {:>8} {:>7} | {:>8} {:>8} {:>8}",
        "devices",
        "sessions",
        "quiet CPU",
        "µs/beat",
        "×idle",
        "steady",
        "peak",
        "per device",
        "µs/frame",
        "RSS MB",
        "health",
        "Live",
        "All"
    );
    for s in sizes {
        println!(
            "  {:>7} {:>8} | {:>8.2}% {:>9.0} {:>7.1}× | {:>8.2}% {:>6.1}% {:>9.4}% {:>8.0} {:>7.0} | {:>5.2} ms {:>5.1} ms {:>5.1} ms",
            s.devices,
            s.sessions,
            s.quiet.cpu_pct,
            s.heartbeat_cpu_us,
            s.quiet_vs_idle,
            s.steady.cpu_pct,
            s.steady.peak_cpu_pct,
            s.cpu_per_device_pct,
            s.frame_cpu_us,
            s.steady.rss_mb,
            s.health_ms,
            s.list_live_ms,
            s.list_all_ms
        );
    }
    if let (Some(first), Some(last)) = (sizes.first(), sizes.last()) {
        if sizes.len() > 1 {
            let growth = last.cpu_per_device_pct / first.cpu_pct_floor();
            let verdict = if growth <= 1.25 { "linear or better" } else { "grows faster than linear" };
            // The goals at 10,000 devices: at most 60% of a core on SQLite, 40% on
            // PostgreSQL, 600 MB.
            let goal = if engine == "SQLite" { 60.0 } else { 40.0 };
            println!(
                "  cost per device from {} to {} devices: ×{growth:.2} ({verdict}); steady state at {} devices: {:.2}% of one core (goal ≤ {goal:.0}% at 10,000), RSS {:.0} MB (goal ≤ 600 MB)",
                first.devices, last.devices, last.devices, last.steady.cpu_pct, last.steady.rss_mb
            );
        }
    }
}

impl SizeFigures {
    /// Per-device cost, kept above zero for ratios on a noisy machine.
    fn cpu_pct_floor(&self) -> f64 {
        self.cpu_per_device_pct.max(1e-6)
    }
}

/// Output bytes the simulated devices of `counters` sent that the servers of `clients`
/// have not stored (their `drover_output_bytes_total` summed), after waiting up to 10 s.
fn unstored(clients: &[Client], counters: &Counters) -> Result<u64> {
    let stored = || -> Result<u64> { clients.iter().map(stored_bytes).sum() };
    let sent = counters.bytes_sent.load(Relaxed);
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut got = stored()?;
    while got < sent && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        got = stored()?;
    }
    Ok(sent.saturating_sub(got))
}

/// Output bytes the server has stored since it started (`drover_output_bytes_total`
/// from its `/metrics`, read with the owner's token).
fn stored_bytes(client: &Client) -> Result<u64> {
    let text = String::from_utf8(client.get("/metrics")?)?;
    let value = text.lines().find_map(|l| l.strip_prefix("drover_output_bytes_total ")?.trim().parse::<f64>().ok());
    Ok(value.context("no drover_output_bytes_total in /metrics")? as u64)
}

/// Registers and enrolls `n` devices named `{prefix}-NNNN` with slots for their
/// sessions, through the servers in `ups` in turn; their names and device tokens.
fn register(ups: &[&Up], n: usize, prefix: &str) -> Result<Vec<(String, String)>> {
    parallel(ups, n, |client, i| {
        let name = format!("{prefix}-{i:04}");
        let added: serde_json::Value =
            serde_json::from_slice(&client.post("/api/v1/devices", &serde_json::json!({ "name": name, "slots": SESSIONS_PER_DEVICE }))?)?;
        let token = added["enrollment_token"].as_str().context("enrollment token")?;
        let cred: serde_json::Value =
            serde_json::from_slice(&client.post("/api/v1/devices/enroll", &serde_json::json!({ "token": token, "name": name }))?)?;
        Ok((name, cred["token"].as_str().context("device token")?.to_string()))
    })
}

/// Links devices `range` of `creds` as simulated devices on `rt`, device i to
/// `ws_urls[i % len]`, and waits until `counters` has them all connected.
fn connect(
    rt: &tokio::runtime::Runtime,
    ws_urls: &[&str],
    creds: &[(String, String)],
    range: std::ops::Range<usize>,
    counters: &Arc<Counters>,
) -> Result<()> {
    let size = range.end;
    for i in range {
        let (name, token) = &creds[i];
        rt.spawn(device(ws_urls[i % ws_urls.len()].to_string(), name.clone(), token.clone(), i, counters.clone()));
    }
    let deadline = Instant::now() + Duration::from_secs(60 + size as u64 / 10);
    while counters.connected.load(Relaxed) < size {
        if Instant::now() > deadline || counters.links_lost.load(Relaxed) > 0 {
            bail!(
                "{} of {size} devices connected; {} links lost: {:?}",
                counters.connected.load(Relaxed),
                counters.links_lost.load(Relaxed),
                counters.notes()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}

/// Starts every device's sessions through the API, session k of all through
/// `ups[k % len]`, and checks each is running once its start is answered.
fn start_sessions(ups: &[&Up], devices: &[(String, String)]) -> Result<()> {
    let new: Vec<(&str, usize)> = devices.iter().flat_map(|(name, _)| (0..SESSIONS_PER_DEVICE).map(move |j| (name.as_str(), j))).collect();
    parallel(ups, new.len(), |client, k| {
        let (name, j) = new[k];
        let body = serde_json::json!({ "device": name, "command": ["agent", "--fleet"], "title": format!("fleet {name} #{j}"), "cols": 120, "rows": 40 });
        let view: serde_json::Value = serde_json::from_slice(&client.post("/api/v1/sessions", &body)?)?;
        anyhow::ensure!(view["outcome"] == "running", "session on {name} is {} after its start", view["outcome"]);
        Ok(())
    })?;
    Ok(())
}

/// Runs `f(client, i)` for i in 0..n on a few threads, item i through `ups[i % len]`
/// (each thread has its own API client for every server).
fn parallel<T: Send>(ups: &[&Up], n: usize, f: impl Fn(&Client, usize) -> Result<T> + Sync) -> Result<Vec<T>> {
    let next = AtomicUsize::new(0);
    let out: Mutex<Vec<Option<T>>> = Mutex::new((0..n).map(|_| None).collect());
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..API_THREADS.min(n.max(1)))
            .map(|_| {
                s.spawn(|| -> Result<()> {
                    let clients = ups.iter().map(|up| Client::for_up(up)).collect::<Result<Vec<_>>>()?;
                    loop {
                        let i = next.fetch_add(1, Relaxed);
                        if i >= n {
                            return Ok(());
                        }
                        let v = f(&clients[i % clients.len()], i)?;
                        out.lock().expect("lock")[i] = Some(v);
                    }
                })
            })
            .collect();
        workers.into_iter().try_for_each(|w| w.join().expect("worker panicked"))
    })?;
    Ok(out.into_inner().expect("lock").into_iter().map(|v| v.expect("every item done")).collect())
}

/// Times LIST_ROUNDS rounds of health, the first batch Live and All; medians in ms.
fn list_rounds(client: &Client) -> Result<(f64, f64, f64)> {
    let (mut health, mut live, mut all) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..LIST_ROUNDS {
        for (path, v) in [
            ("/api/v1/health", &mut health),
            ("/api/v1/sandboxes?filter=live&limit=50", &mut live),
            ("/api/v1/sandboxes?filter=all&limit=50", &mut all),
        ] {
            let t0 = Instant::now();
            client.get(path)?;
            v.push(t0.elapsed().as_secs_f64() * 1000.0);
        }
    }
    Ok((median(&mut health), median(&mut live), median(&mut all)))
}

//! Replicas earn their keep (`--only replicas`): one `drover server` on a PostgreSQL
//! database serving N simulated devices (the baseline), and two replicas on another
//! database of the same PostgreSQL serving 2N, each device linked to one of them and
//! every other session started through the replica its device is not linked to (so
//! half the Starts are relayed, as behind a balancer). All three servers run at once,
//! so every window measures the baseline and the replicas under the same machine load;
//! the windows are repeated and the spread is shown. Goal: each replica's CPU within
//! 1.2× of the one server's. Then, with the fleets still running, the relay run
//! ([`crate::relay`]) on the two replicas: a Start, input and a viewer's join through
//! the replica a real device is not linked to, against the one it is.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use serde::Serialize;

use super::meter::{delta, proc_cpu, DbMeter};
use super::sim::Counters;
use super::{connect, register, start_sessions, unstored, LINE_EVERY, SESSIONS_PER_DEVICE};
use crate::drover::{Postgres, Up};
use crate::http::Client;
use crate::median;
use crate::memory::rss_mb;
use crate::relay::{RelayArgs, RelayFigures};

/// The goal: each replica's CPU at 2× the fleet over one server's at 1×.
const GOAL_RATIO: f64 = 1.2;

/// The replica fleet's figures.
#[derive(Debug, Serialize)]
pub struct ReplicaFleet {
    /// Devices of the one server; the two replicas serve twice as many.
    pub devices: usize,
    /// Live sessions per device.
    pub sessions_per_device: usize,
    /// Seconds of each measured window.
    pub window_secs: f64,
    /// One entry per window, in order.
    pub windows: Vec<ReplicaWindow>,
    /// Median over the windows: the one server's CPU, % of one core.
    pub one_cpu_pct: f64,
    /// Median over the windows: each replica's CPU, % of one core.
    pub replica_cpu_pct: [f64; 2],
    /// Median over the windows of each replica's CPU over the one server's, in the same
    /// window (goal ≤ 1.2).
    pub ratio: [f64; 2],
    /// The windows' range of the larger ratio.
    pub ratio_range: (f64, f64),
    /// RSS at the end, MB: the one server, then each replica.
    pub rss_mb: [f64; 3],
    /// Output bytes sent but not stored, per setup (goal 0): one server, the replicas.
    pub unstored_bytes: [u64; 2],
    /// Device links lost, per setup (goal 0).
    pub links_lost: [u64; 2],
    /// The relayed paths against the local ones on the two replicas, under this load.
    pub relay: RelayFigures,
}

/// One measured window.
#[derive(Debug, Serialize)]
pub struct ReplicaWindow {
    /// The one server's CPU, % of one core.
    pub one_cpu_pct: f64,
    /// Each replica's CPU, % of one core.
    pub replica_cpu_pct: [f64; 2],
    /// CPU of the PostgreSQL backends serving the one server's database.
    pub one_db_cpu_pct: Option<f64>,
    /// CPU of the PostgreSQL backends serving the replicas' database.
    pub replicas_db_cpu_pct: Option<f64>,
    /// Output frames the one server's devices and the replicas' devices sent.
    pub frames: [u64; 2],
}

/// A running setup: its servers, the simulated devices' counters.
struct Setup {
    servers: Vec<Up>,
    counters: Arc<Counters>,
    db: Option<DbMeter>,
}

/// Runs the replica fleet: N devices on one server and 2N on two replicas, `rounds`
/// windows of `secs` each.
pub fn run(exe: &std::path::Path, devices: usize, secs: f64, rounds: usize, relay: RelayArgs, pg: &Postgres) -> Result<ReplicaFleet> {
    anyhow::ensure!(devices > 0, "--fleet-devices must be above 0");
    let names = [format!("drover_one_{}", std::process::id()), format!("drover_replicas_{}", std::process::id())];
    let r = run_on(exe, devices, (secs, rounds.max(1)), relay, pg, &names);
    for n in &names {
        pg.drop_database(n);
    }
    r
}

fn run_on(
    exe: &std::path::Path,
    n: usize,
    (secs, rounds): (f64, usize),
    relay: RelayArgs,
    pg: &Postgres,
    names: &[String; 2],
) -> Result<ReplicaFleet> {
    println!(
        "replicas: {n} devices × {SESSIONS_PER_DEVICE} sessions on one server, {} on two replicas of another database, all at once; {rounds} windows of {secs}s",
        2 * n
    );
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build()?;
    let one = setup(exe, pg, &names[0], 1, n, "one", &rt)?;
    let two = setup(exe, pg, &names[1], 2, 2 * n, "two", &rt)?;
    for s in [&one, &two] {
        s.counters.output_on.store(true, Relaxed);
    }
    std::thread::sleep(LINE_EVERY);
    let pids: Vec<u32> = [&one, &two].iter().flat_map(|s| s.servers.iter().map(Up::pid)).collect();
    let mut windows = Vec::new();
    for round in 0..rounds {
        let w = window(&pids, [&one, &two], secs);
        println!(
            "  window {}: one server {:.2}% | replicas {:.2}% and {:.2}% ({:.2}× and {:.2}×){}",
            round + 1,
            w.one_cpu_pct,
            w.replica_cpu_pct[0],
            w.replica_cpu_pct[1],
            w.replica_cpu_pct[0] / w.one_cpu_pct,
            w.replica_cpu_pct[1] / w.one_cpu_pct,
            match (w.one_db_cpu_pct, w.replicas_db_cpu_pct) {
                (Some(a), Some(b)) => format!("; PostgreSQL backends {a:.2}% and {b:.2}%"),
                _ => String::new(),
            }
        );
        windows.push(w);
    }
    let clients = |s: &Setup| s.servers.iter().map(Client::for_up).collect::<Result<Vec<_>>>();
    let unstored_bytes = [unstored(&clients(&one)?, &one.counters)?, unstored(&clients(&two)?, &two.counters)?];
    let links_lost = [one.counters.links_lost.load(Relaxed), two.counters.links_lost.load(Relaxed)];
    let rss_mb = [rss_mb(pids[0]), rss_mb(pids[1]), rss_mb(pids[2])];
    println!("replicas: the relay run on the two replicas, their {} devices still running", 2 * n);
    let relay = crate::relay::measure(exe, &two.servers[0], &two.servers[1], relay)?;
    rt.shutdown_background();
    let r = summarise(n, secs, windows, rss_mb, (unstored_bytes, links_lost), relay);
    println!(
        "replicas: one server at {n} devices {:.2}% of a core; two replicas at {} devices {:.2}% and {:.2}%: {:.2}× and {:.2}× (windows' range of the larger {:.2}–{:.2}; goal ≤ {GOAL_RATIO}×: {}); RSS {:.0} MB vs {:.0} and {:.0} MB; not stored {} B / {} B, links lost {} / {}",
        r.one_cpu_pct,
        2 * n,
        r.replica_cpu_pct[0],
        r.replica_cpu_pct[1],
        r.ratio[0],
        r.ratio[1],
        r.ratio_range.0,
        r.ratio_range.1,
        if r.ratio.iter().all(|x| *x <= GOAL_RATIO) { "met" } else { "not met" },
        r.rss_mb[0],
        r.rss_mb[1],
        r.rss_mb[2],
        r.unstored_bytes[0],
        r.unstored_bytes[1],
        r.links_lost[0],
        r.links_lost[1]
    );
    Ok(r)
}

/// Starts `replicas` servers on database `name`, registers `devices` devices through
/// them, links device i to server i % replicas and starts every device's sessions,
/// session k through server k % replicas.
fn setup(
    exe: &std::path::Path,
    pg: &Postgres,
    name: &str,
    replicas: usize,
    devices: usize,
    prefix: &str,
    rt: &tokio::runtime::Runtime,
) -> Result<Setup> {
    let t0 = Instant::now();
    let url = pg.url(name);
    // One after the other: the first creates and migrates the database.
    let servers = (0..replicas).map(|_| Up::server(exe, Some(&url), &[])).collect::<Result<Vec<_>>>()?;
    let ups: Vec<&Up> = servers.iter().collect();
    let creds = register(&ups, devices, prefix)?;
    let ws_urls = servers
        .iter()
        .map(|s| Ok(format!("{}/api/v1/device/connect", s.client_config()?.0.replacen("http://", "ws://", 1))))
        .collect::<Result<Vec<_>>>()?;
    let ws: Vec<&str> = ws_urls.iter().map(String::as_str).collect();
    let counters = Arc::new(Counters::default());
    connect(rt, &ws, &creds, 0..devices, &counters)?;
    // Each replica learns where the others' devices are linked within a second.
    std::thread::sleep(Duration::from_secs(2));
    start_sessions(&ups, &creds)?;
    println!(
        "  {replicas} server(s) on {name}: {devices} devices, {} sessions running ({:.1}s)",
        devices * SESSIONS_PER_DEVICE,
        t0.elapsed().as_secs_f64()
    );
    let db = pg.postmaster.map(|postmaster| DbMeter { postmaster, database: name.to_string() });
    Ok(Setup { servers, counters, db })
}

/// One window of `secs`: each server's CPU (`pids`: the one server, then the replicas)
/// and each database's backends.
fn window(pids: &[u32], setups: [&Setup; 2], secs: f64) -> ReplicaWindow {
    let cpu = || pids.iter().map(|p| proc_cpu(*p).map_or(0.0, |(s, _)| s)).collect::<Vec<f64>>();
    let dbs = || setups.map(|s| s.db.as_ref().map(|d| d.sample().0));
    let frames = || setups.map(|s| s.counters.frames.load(Relaxed));
    let (t0, cpu0, db0, f0) = (Instant::now(), cpu(), dbs(), frames());
    std::thread::sleep(Duration::from_secs_f64(secs));
    let (cpu1, db1, f1) = (cpu(), dbs(), frames());
    let elapsed = t0.elapsed().as_secs_f64();
    let pct = |i: usize| (cpu1[i] - cpu0[i]) / elapsed * 100.0;
    let db_pct = |i: usize| match (&db0[i], &db1[i]) {
        (Some(a), Some(b)) => Some(delta(a, b) / elapsed * 100.0),
        _ => None,
    };
    ReplicaWindow {
        one_cpu_pct: pct(0),
        replica_cpu_pct: [pct(1), pct(2)],
        one_db_cpu_pct: db_pct(0),
        replicas_db_cpu_pct: db_pct(1),
        frames: [f1[0] - f0[0], f1[1] - f0[1]],
    }
}

fn summarise(
    devices: usize,
    window_secs: f64,
    windows: Vec<ReplicaWindow>,
    rss_mb: [f64; 3],
    (unstored_bytes, links_lost): ([u64; 2], [u64; 2]),
    relay: RelayFigures,
) -> ReplicaFleet {
    let med = |f: &dyn Fn(&ReplicaWindow) -> f64| median(&mut windows.iter().map(f).collect::<Vec<_>>());
    let worst: Vec<f64> = windows.iter().map(|w| w.replica_cpu_pct[0].max(w.replica_cpu_pct[1]) / w.one_cpu_pct).collect();
    let ratio_range = (worst.iter().copied().fold(f64::INFINITY, f64::min), worst.iter().copied().fold(0.0, f64::max));
    ReplicaFleet {
        devices,
        sessions_per_device: SESSIONS_PER_DEVICE,
        window_secs,
        one_cpu_pct: med(&|w| w.one_cpu_pct),
        replica_cpu_pct: [med(&|w| w.replica_cpu_pct[0]), med(&|w| w.replica_cpu_pct[1])],
        ratio: [med(&|w| w.replica_cpu_pct[0] / w.one_cpu_pct), med(&|w| w.replica_cpu_pct[1] / w.one_cpu_pct)],
        ratio_range,
        rss_mb,
        unstored_bytes,
        links_lost,
        relay,
        windows,
    }
}

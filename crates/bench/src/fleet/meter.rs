//! Measuring the fleet run: the server's and the database's CPU and memory over a window.

use std::collections::HashMap;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use super::sim::Counters;
use super::Window;
use crate::memory::rss_mb;

/// CPU time of a process (utime + stime), seconds, and its parent's id.
pub(super) fn proc_cpu(pid: u32) -> Option<(f64, u32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields: Vec<&str> = stat[stat.rfind(')')? + 1..].split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    // SAFETY: sysconf only reads a configuration value.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    Some((ticks as f64 / hz, fields.get(1)?.parse().ok()?))
}

/// The PostgreSQL processes to measure: the postmaster's children, and among them the
/// backends serving `database` (their process title names it).
pub(super) struct DbMeter {
    pub(super) postmaster: u32,
    pub(super) database: String,
}

impl DbMeter {
    /// CPU seconds per process: (backends of the database, every postgres process).
    pub(super) fn sample(&self) -> (HashMap<u32, f64>, HashMap<u32, f64>) {
        let (mut db, mut all) = (HashMap::new(), HashMap::new());
        if let Some((cpu, _)) = proc_cpu(self.postmaster) {
            all.insert(self.postmaster, cpu);
        }
        let Ok(entries) = std::fs::read_dir("/proc") else { return (db, all) };
        for e in entries.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
            let Some((cpu, parent)) = proc_cpu(pid) else { continue };
            if parent != self.postmaster {
                continue;
            }
            all.insert(pid, cpu);
            let title = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            if String::from_utf8_lossy(&title).split_whitespace().any(|w| w == self.database) {
                db.insert(pid, cpu);
            }
        }
        (db, all)
    }
}

/// CPU consumed between two samples of per-process CPU (processes started meanwhile
/// count from zero).
pub(super) fn delta(before: &HashMap<u32, f64>, after: &HashMap<u32, f64>) -> f64 {
    after.iter().map(|(pid, cpu)| cpu - before.get(pid).copied().unwrap_or(0.0)).filter(|d| *d > 0.0).sum()
}

/// One reading of everything a window measures.
pub(super) struct Sample {
    pub(super) at: Instant,
    pub(super) server: f64,
    pub(super) me: f64,
    pub(super) db: Option<(HashMap<u32, f64>, HashMap<u32, f64>)>,
    pub(super) heartbeats: u64,
    pub(super) frames: u64,
    pub(super) rss_mb: f64,
}

impl Sample {
    pub(super) fn take(pid: u32, db: Option<&DbMeter>, c: &Counters) -> Sample {
        Sample {
            at: Instant::now(),
            server: proc_cpu(pid).map_or(0.0, |(s, _)| s),
            me: proc_cpu(std::process::id()).map_or(0.0, |(s, _)| s),
            db: db.map(DbMeter::sample),
            heartbeats: c.heartbeats.load(Relaxed),
            frames: c.frames.load(Relaxed),
            rss_mb: rss_mb(pid),
        }
    }

    /// The window from `before` to this sample.
    pub(super) fn since(&self, before: &Sample, secs: f64, peak_cpu_pct: f64) -> Window {
        let secs = secs.max(self.at.duration_since(before.at).as_secs_f64()).max(1e-3);
        let pct = |cpu: f64| cpu / secs * 100.0;
        let (db_cpu_pct, postgres_cpu_pct) = match (&before.db, &self.db) {
            (Some((b_db, b_all)), Some((a_db, a_all))) => (Some(pct(delta(b_db, a_db))), Some(pct(delta(b_all, a_all)))),
            _ => (None, None),
        };
        Window {
            secs,
            cpu_pct: pct(self.server - before.server),
            peak_cpu_pct,
            rss_mb: self.rss_mb,
            db_cpu_pct,
            postgres_cpu_pct,
            simulator_cpu_pct: pct(self.me - before.me),
            heartbeats: self.heartbeats - before.heartbeats,
            frames: self.frames - before.frames,
        }
    }
}

/// Measures the server for `secs`, sampling its CPU every second for the peak.
pub(super) fn measure(pid: u32, secs: f64, db: Option<&DbMeter>, c: &Counters) -> Window {
    let first = Sample::take(pid, db, c);
    let end = first.at + Duration::from_secs_f64(secs);
    let (mut last_at, mut last_cpu, mut peak) = (first.at, first.server, 0.0f64);
    while Instant::now() < end {
        std::thread::sleep(Duration::from_secs(1).min(end.saturating_duration_since(Instant::now())));
        let (now, cpu) = (Instant::now(), proc_cpu(pid).map_or(last_cpu, |(s, _)| s));
        let dt = now.duration_since(last_at).as_secs_f64();
        if dt > 0.5 {
            peak = peak.max((cpu - last_cpu) / dt * 100.0);
        }
        (last_at, last_cpu) = (now, cpu);
    }
    Sample::take(pid, db, c).since(&first, 0.0, peak)
}

//! Which background monitors this server runs. Each monitor runs on one server at a
//! time, however many replicas share the database: this server holds a lease on it
//! (`drover_store::Store::hold_lease`), renewed every third of its lifetime. A monitor
//! runs a pass only while its lease is held by our own clock's reckoning, so a replica
//! that cannot renew (cut off from the database) stops before another may take over.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

use crate::AppState;

/// A background monitor that must run once across replicas.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Monitor {
    /// The stale monitor (flags, lost sessions, stalled runs).
    Stale,
    /// The scheduler (staffing waiting stages).
    Scheduler,
    /// The webhook sender.
    Webhooks,
    /// The pruning job.
    Retention,
    /// The Web Push sender.
    Push,
    /// The screen checkpointer.
    Screens,
}

impl Monitor {
    /// Every monitor.
    pub const ALL: [Monitor; 6] =
        [Monitor::Stale, Monitor::Scheduler, Monitor::Webhooks, Monitor::Retention, Monitor::Push, Monitor::Screens];

    /// The lease's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Monitor::Stale => "stale_monitor",
            Monitor::Scheduler => "scheduler",
            Monitor::Webhooks => "webhooks",
            Monitor::Retention => "retention",
            Monitor::Push => "push",
            Monitor::Screens => "screens",
        }
    }
}

/// The leases this server holds, each until when (by our clock, from when we asked).
#[derive(Debug, Default)]
pub struct Leases {
    held: Mutex<HashMap<Monitor, Instant>>,
}

impl Leases {
    /// Whether this server may run `monitor` now.
    pub fn holds(&self, monitor: Monitor) -> bool {
        self.held.lock().expect("leases lock").get(&monitor).is_some_and(|until| Instant::now() < *until)
    }

    fn set(&self, monitor: Monitor, until: Option<Instant>) {
        let mut held = self.held.lock().expect("leases lock");
        match until {
            Some(t) => held.insert(monitor, t),
            None => held.remove(&monitor),
        };
    }
}

/// Keeps asking for (and renewing) every monitor's lease until the process ends.
pub fn spawn(state: AppState) {
    tokio::spawn(async move {
        let ttl = state.config.lease_ttl;
        loop {
            for monitor in Monitor::ALL {
                // Counted from before the question: the lease cannot have lasted longer.
                let asked = Instant::now();
                let until = match state.store.hold_lease(monitor.as_str(), &state.replica, ttl).await {
                    Ok(true) => Some(asked + ttl.mul_f64(0.9)),
                    Ok(false) => None,
                    Err(e) => {
                        tracing::warn!("renewing the {} lease: {e}", monitor.as_str());
                        continue;
                    }
                };
                let had = state.leases.holds(monitor);
                state.leases.set(monitor, until);
                if until.is_some() && !had {
                    tracing::info!(replica = %state.replica, "this server now runs the {}", monitor.as_str());
                    if monitor == Monitor::Scheduler {
                        state.scheduler.notify_one();
                    }
                }
            }
            tokio::time::sleep(ttl / 3).await;
        }
    });
}

//! The pruning job: every `prune_every`, removes what finished longer ago than the
//! retention window (finished sessions' recordings and events, finished tasks' old
//! activity, settled webhook deliveries). Live sessions are never touched.

use crate::leases::Monitor;
use crate::AppState;

/// Runs the job until the process ends (while this server holds its lease).
pub fn spawn(state: AppState) {
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(state.config.prune_every).await;
            if !state.leases.holds(Monitor::Retention) {
                continue;
            }
            let window = chrono::Duration::from_std(state.config.retention).unwrap_or(chrono::Duration::MAX);
            let Some(cutoff) = chrono::Utc::now().checked_sub_signed(window) else { continue };
            match state.store.prune(&drover_store::format_time(cutoff)).await {
                Ok(p) if p.sessions + p.events + p.deliveries > 0 => {
                    tracing::info!(
                        sessions = p.sessions,
                        events = p.events,
                        deliveries = p.deliveries,
                        "pruned what finished before {cutoff}"
                    )
                }
                Ok(_) => {}
                Err(e) => tracing::warn!("pruning: {e}"),
            }
        }
    });
}

//! The stale monitor (seed 001 "When a session goes quiet"): every `monitor_every` it
//! looks at every live session, flags the ones whose device has gone silent or whose
//! sandbox has retired, and marks lost the ones still flagged at the next check (their
//! stage is then staffed again, like any run that ended without a hand-off). A task's
//! run that has stalled (quiet, no progress, not waiting on a person) is replaced.

use std::time::Duration;

use chrono::{DateTime, Utc};
use drover_core::liveness::{flag, recheck, stalled, stalled_reason, Observed, StaleFlag, Verdict};
use drover_core::RunEnd;
use drover_protocol::device::ServerMessage;
use drover_store::{LiveCheck, LiveGlance, SessionRow, StoreError};

use crate::leases::Monitor;
use crate::{ingest, AppState};

/// Runs the monitor until the process ends (while this server holds its lease).
pub fn spawn(state: AppState) {
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(state.config.monitor_every).await;
            if !state.leases.holds(Monitor::Stale) {
                continue;
            }
            if let Err(e) = check(&state).await {
                tracing::warn!("stale monitor: {e}");
            }
        }
    });
}

fn age(now: DateTime<Utc>, at: Option<&str>) -> Option<Duration> {
    let t = drover_store::parse_time(at?)?;
    Some((now - t).to_std().unwrap_or_default())
}

/// What the monitor knows about one live session now.
fn observe(now: DateTime<Utc>, g: &LiveGlance) -> Observed {
    // A new session gets the same window from its creation as a device's silence.
    let since_created = age(now, Some(&g.created_at)).unwrap_or_default();
    let since_contact = age(now, g.last_contact_at.as_deref()).map_or(since_created, |d| d.min(since_created));
    let sandbox_finished_for = if g.sandbox_finished { age(now, Some(&g.sandbox_changed_at)) } else { None };
    Observed { since_contact, sandbox_finished_for, device_revoked: g.device_revoked }
}

/// One check of every live session; a failure on one is logged and the rest go on.
/// A glance at each tells which need a closer look: one with a flag to raise or clear,
/// or a task's run (which may have stalled). The rest, nearly all of a fleet, cost no
/// more than their glance.
pub async fn check(state: &AppState) -> Result<(), StoreError> {
    let now = Utc::now();
    for g in state.store.live_glances().await? {
        if !g.task_run && g.stale_flag.is_none() && flag(&state.config.liveness, &observe(now, &g)).is_none() {
            continue;
        }
        let checked = match state.store.live_check(g.session).await {
            Ok(Some(c)) => check_one(state, &c).await,
            Ok(None) => Ok(()),
            Err(e) => Err(e),
        };
        if let Err(e) = checked {
            tracing::warn!(session = %g.session, "stale monitor: {e}");
        }
    }
    Ok(())
}

/// Whether a task's live run has stalled (its device connected, so its output is seen).
async fn is_stalled(state: &AppState, c: &LiveCheck, now: DateTime<Utc>) -> Result<bool, StoreError> {
    let Some(task) = c.session.task else { return Ok(false) };
    // A run whose work was handed off is on its way out, not stalled; one not yet
    // started (a slow checkout) has not had a chance to print.
    if c.session.stale_flag.is_some()
        || c.session.handed_off.is_some()
        || c.session.outcome != drover_core::Outcome::Running
        || !state.devices.is_connected(c.session.device)
    {
        return Ok(false);
    }
    let since_start = age(now, Some(c.session.started_at.as_deref().unwrap_or(&c.session.created_at))).unwrap_or_default();
    // Its own evidence of progress, or a person answering its task's question or
    // resolving its blocker (which it then needs time to act on).
    let progress = state.store.last_progress(c.session.id).await?.map(|(_, at)| at);
    let answered = state.store.last_note_closed_at(task).await?;
    let since_progress = progress.into_iter().chain(answered).max().and_then(|at| age(now, Some(&at)));
    let waiting = state.store.waiting_on_person(task).await?;
    // Quiet for: as this server's link saw it, or (its device linked to another
    // replica) as the database recorded it.
    let since_output = match state.hubs.get(c.session.id).filter(|_| state.devices.is_local(c.session.device)) {
        Some(hub) => hub.since_output(),
        None => age(now, c.session.last_output_at.as_deref()).unwrap_or(since_start),
    };
    Ok(stalled(state.config.stall_after, since_output, since_progress, since_start, waiting))
}

async fn check_one(state: &AppState, c: &LiveCheck) -> Result<(), StoreError> {
    if is_stalled(state, c, Utc::now()).await? {
        return end_lost(state, &c.session, RunEnd::Lost { reason: stalled_reason(state.config.stall_after) }).await;
    }
    let earned = flag(&state.config.liveness, &observe(Utc::now(), &c.glance()));
    match recheck(c.session.stale_flag, earned) {
        Verdict::Clear => {
            if c.session.stale_flag.is_some() {
                state.store.set_stale_flag(c.session.id, None).await?;
            }
        }
        Verdict::Flag(f) => {
            if state.store.set_stale_flag(c.session.id, Some(f)).await? {
                tracing::warn!(session = %c.session.id, device = %c.session.device_name, "flagged: {}", f.label());
            }
        }
        Verdict::Lost(_) => {
            // The read above may be stale (the device may have reconnected meanwhile):
            // decide again on a fresh read, right before ending the run.
            let Some(fresh) = state.store.live_check(c.session.id).await? else { return Ok(()) };
            let Verdict::Lost(f) = recheck(fresh.session.stale_flag, flag(&state.config.liveness, &observe(Utc::now(), &fresh.glance())))
            else {
                return Ok(());
            };
            let reason = f.lost_reason().to_string();
            let end = match f {
                StaleFlag::DeviceSilent | StaleFlag::DeviceRevoked => RunEnd::DeviceLost { reason },
                StaleFlag::SandboxRetired => RunEnd::OutlivedSandbox { reason },
            };
            end_lost(state, &fresh.session, end).await?;
        }
    }
    Ok(())
}

/// Ends a live run as lost (its stage is staffed again), and tells its device, if
/// connected, to stop it: its lease is gone. A device that is away is told when it
/// reconnects (the run is then not among those the server resumes).
async fn end_lost(state: &AppState, row: &SessionRow, end: RunEnd) -> Result<(), StoreError> {
    tracing::warn!(session = %row.id, device = %row.device_name, "marked lost: {end:?}");
    let report = ingest::EndReport::now(end, row.output_bytes);
    ingest::end_session(state, row.device, &row.device_name, row.id, &report).await?;
    // Whoever's end was stored, the run is over: its device is told to stop it.
    if state.store.session(row.id).await?.is_some_and(|r| !r.outcome.is_live()) {
        let _ = state.devices.send(row.device, &ServerMessage::Release { session: row.id }).await;
    }
    Ok(())
}

//! Idle-parking (seed 001: "a session you started that was stopped or idle-parked" is
//! Released): a task-free session that has printed nothing, been typed into by nobody
//! and watched by nobody for `--park-after` is stopped, and ends `released` with the
//! reason "idle-parked after …". Each server parks the sessions of the devices linked
//! to it, whose output it sees first-hand.

use std::time::Duration;

use drover_core::liveness::{idle_parked, parked_reason};
use drover_core::SessionId;
use drover_protocol::device::ServerMessage;
use drover_store::StoreError;

use crate::AppState;

/// Who stops a parked session, in its activity.
pub const PARK_ACTOR: &str = "idle parking";

/// Runs the parker until the process ends, when parking is on.
pub fn spawn(state: AppState) {
    let Some(after) = state.config.park_after else { return };
    let every = (after / 8).clamp(Duration::from_millis(100), Duration::from_secs(60));
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(every).await;
            if let Err(e) = park_idle(&state, after).await {
                tracing::warn!("idle parking: {e}");
            }
        }
    });
}

/// Parks every idle task-free session on a device linked here. The hubs say which have
/// been idle long enough (a fleet's live sessions are not all read every round); only
/// those are read from the database.
async fn park_idle(state: &AppState, after: Duration) -> Result<(), StoreError> {
    for (session, hub) in state.hubs.all() {
        let idle = hub.idle_for();
        // Idle long enough were it task-free: the rest cost no read.
        if idle_parked(Some(after), false, idle) {
            park(state, session, after, idle).await?;
        }
    }
    Ok(())
}

/// Stops the session with the parking reason (its end records it, by [`PARK_ACTOR`]),
/// if it is parked: live here, task-free (a task's run is the stall monitor's to
/// replace), idle for `idle`, and watched by nobody on any replica.
async fn park(state: &AppState, session: SessionId, after: Duration, idle: Option<Duration>) -> Result<(), StoreError> {
    let Some(row) = state.store.session(session).await? else { return Ok(()) };
    if !row.outcome.is_live() || !state.devices.is_local(row.device) || !idle_parked(Some(after), row.task.is_some(), idle) {
        return Ok(());
    }
    if state.topology.attached(state, session).await? > 0 {
        return Ok(());
    }
    if state.store.mark_stop_for(session, PARK_ACTOR, &parked_reason(after)).await? {
        tracing::info!(%session, device = %row.device_name, "idle-parked");
        let grace_ms = state.config.stop_grace.as_millis() as u64;
        let _ = state.devices.send(row.device, &ServerMessage::Stop { session, grace_ms }).await;
    }
    Ok(())
}

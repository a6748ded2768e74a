//! Spend caps: after each usage report, the run's task and workspace are checked against
//! their caps; a run whose spending reached one is stopped (it ends `released` with the
//! reason "spend cap: …"), recorded as "spend cap reached" (and webhooked).

use drover_core::spend::cap_crossed;
use drover_protocol::device::ServerMessage;

use crate::AppState;

/// Who a cap's stop is recorded as.
pub const CAP_ACTOR: &str = "spend cap";

/// Why `task` may not get a new run, if its spending reached its cap or the workspace's.
pub async fn over_cap(state: &AppState, task: &drover_store::TaskRow) -> Result<Option<String>, drover_store::StoreError> {
    // The priced part of the spend (a cap is never crossed, or missed, by a guess).
    let task_cap = match task.spend_cap {
        Some(cap) => Some((cap, state.store.task_spend(task.id).await?)),
        None => None,
    };
    let workspace = match state.store.workspace_spend_cap(task.workspace).await? {
        Some(cap) => Some((cap, state.store.month_spend(task.workspace).await?)),
        None => None,
    };
    Ok(cap_crossed(task_cap, workspace).map(|c| format!("{}: raise the cap to run it again", c.reason())))
}

/// Stops `session` if its spending reached its task's or its workspace's cap.
pub async fn enforce(state: &AppState, session: drover_core::SessionId) -> Result<(), drover_store::StoreError> {
    let Some(row) = state.store.session(session).await? else { return Ok(()) };
    if !row.outcome.is_live() {
        return Ok(());
    }
    let check = state.store.cap_check(session).await?;
    let Some(crossed) = cap_crossed(check.task, check.workspace) else { return Ok(()) };
    let reason = crossed.reason();
    let grace_ms = state.config.stop_grace.as_millis() as u64;
    if !state.store.mark_stop_for(session, CAP_ACTOR, &reason).await? {
        // Already being stopped; a cap's stop may have been lost with the link: again.
        if row.stop_reason.is_some() {
            let _ = state.devices.send(row.device, &ServerMessage::Stop { session, grace_ms }).await;
        }
        return Ok(());
    }
    let (cap, spent, scope) = match crossed {
        drover_core::spend::CapCrossed::Task { cap, spent } => (cap, spent, "task"),
        drover_core::spend::CapCrossed::Workspace { cap, spent } => (cap, spent, "workspace"),
    };
    let event = drover_store::NewEvent {
        workspace: row.workspace,
        session: Some(session),
        task: row.task,
        kind: drover_core::activity::EventKind::SpendCapReached,
        actor: CAP_ACTOR.into(),
        detail: serde_json::json!({
            "scope": scope,
            "cap_usd": drover_core::spend::usd(cap),
            "spent_usd": drover_core::spend::usd(spent),
            "reason": reason,
        }),
    };
    state.store.record_event(&event).await?;
    let _ = state.devices.send(row.device, &ServerMessage::Stop { session, grace_ms }).await;
    Ok(())
}

//! The Sessions panel's controls on a task: Launch, Activate, Finish, Mark done, Abandon, Cancel.

use axum::extract::{Path, Query, State};
use axum::Json;
use drover_api::{TaskControls, TaskView};
use drover_core::permissions::{allowed, task_allowed, Action, Caller as PermCaller, TaskAction};
use drover_core::sandbox::SandboxEvent;
use drover_core::task::TaskStatus;
use drover_core::SandboxState;
use drover_protocol::device::ServerMessage;
use drover_store::{Principal, TaskRow};
use serde::Deserialize;

use super::tasks::{load_task, member, task_view};
use crate::auth::Caller;
use crate::{ApiError, AppState};

/// `POST /api/v1/tasks/{id}/launch`: sets up a fresh run for the current stage when the
/// task has no live run (clears a flag).
pub async fn launch(State(state): State<AppState>, caller: Caller, Path(id): Path<String>) -> Result<Json<TaskView>, ApiError> {
    caller.member_name()?;
    let t = load_task(&state, &caller, &id).await?;
    let Some(stage) = t.stage() else { return Err(ApiError::Conflict(format!("task {} is {}", t.id, t.status.as_str()))) };
    if stage.agent().is_none() {
        return Err(ApiError::Conflict(format!("the {} stage is worked by a person: hand it off with `drover task advance`", stage.stage)));
    }
    if t.sandbox_state == Some(SandboxState::Completing) {
        return Err(ApiError::Conflict(
            "the sandbox is completing (Finish session): Mark done closes it, then a launch starts a fresh one".into(),
        ));
    }
    if let Some(live) = state.store.live_task_session(t.id).await? {
        return Err(ApiError::Conflict(format!("the task already has a live run: {}", live.id)));
    }
    if let Some(why) = crate::spend::over_cap(&state, &t).await? {
        return Err(ApiError::Conflict(why));
    }
    state.store.relaunch_task(t.id).await?;
    state.scheduler.notify_one();
    Ok(Json(task_view(&state.store.task(t.id).await?.expect("exists"), None)))
}

/// `POST /api/v1/tasks/{id}/activate`: Activate (seed 001): the current stage, prepared
/// and waiting for a person, starts (it waits for a slot like any run).
pub async fn activate(State(state): State<AppState>, caller: Caller, Path(id): Path<String>) -> Result<Json<TaskView>, ApiError> {
    let who = caller.member_name()?;
    let t = load_task(&state, &caller, &id).await?;
    let Some(stage) = t.stage() else { return Err(ApiError::Conflict(format!("task {} is {}", t.id, t.status.as_str()))) };
    if !t.awaits_activation() {
        return Err(ApiError::Conflict(format!("the {} stage of task {} does not wait for Activate", stage.stage, t.id)));
    }
    if let Some(why) = crate::spend::over_cap(&state, &t).await? {
        return Err(ApiError::Conflict(why));
    }
    if !state.store.activate_task(&t, &who).await? {
        return Err(ApiError::Conflict(format!("task {} moved on or is flagged: `drover task show {}` says why", t.id, t.id)));
    }
    state.scheduler.notify_one();
    Ok(Json(task_view(&state.store.task(t.id).await?.expect("exists"), None)))
}

/// Stops the task's live run, if any; true if there was one. Completing: the run ends
/// `completed` with that reason; otherwise `released`.
pub(super) async fn stop_live(state: &AppState, t: &TaskRow, completes: Option<&str>, by: &str) -> Result<bool, ApiError> {
    let live = state.store.live_task_session(t.id).await?;
    if let Some(live) = &live {
        match completes {
            Some(why) => state.store.mark_completing(live.id, why).await?,
            None => state.store.mark_stop_requested(live.id, by).await?,
        }
        let grace_ms = state.config.stop_grace.as_millis() as u64;
        let _ = state.devices.send(live.device, &ServerMessage::Stop { session: live.id, grace_ms }).await;
    }
    Ok(live.is_some())
}

/// The caller's name if they may retire a sandbox (Mark done, Abandon): the Retire
/// rule of the permission matrix, before the task is even looked up.
fn retirer(caller: &Caller) -> Result<String, ApiError> {
    let (_, name, role) = member(caller)?;
    if !allowed(PermCaller::Member { role, operates_agent: false, pinned_assignee: false }, Action::Retire) {
        return Err(ApiError::Forbidden("only a workspace owner or admin can do this".into()));
    }
    Ok(name)
}

/// Which of the Sessions panel's controls the caller may use on `t`.
pub(super) async fn controls(state: &AppState, caller: &Caller, t: &TaskRow) -> Result<TaskControls, ApiError> {
    let Principal::Member { id, name, role, .. } = &caller.0 else { return Ok(TaskControls::default()) };
    // The stage's pinned assignee is an agent: its operator acts for it.
    let pinned = match t.stage().and_then(|s| s.agent().map(str::to_string)) {
        Some(agent) => state.store.agent_by_name(t.workspace, &agent).await?.is_some_and(|a| a.operator == *id),
        None => false,
    };
    let as_member = PermCaller::Member { role: *role, operates_agent: false, pinned_assignee: pinned };
    Ok(TaskControls {
        finish: allowed(as_member, Action::Finish),
        retire: allowed(as_member, Action::Retire),
        cancel: task_allowed(*role, t.created_by == *name, TaskAction::Cancel),
    })
}

/// `POST /api/v1/tasks/{id}/finish`: moves the sandbox toward a normal close (completing).
pub async fn finish(State(state): State<AppState>, caller: Caller, Path(id): Path<String>) -> Result<Json<TaskView>, ApiError> {
    member(&caller)?;
    let t = load_task(&state, &caller, &id).await?;
    if !controls(&state, &caller, &t).await?.finish {
        return Err(ApiError::Forbidden(
            "only the stage's pinned assignee (its agent's operator) or an admin can finish the session".into(),
        ));
    }
    let Some(sandbox) = t.sandbox else { return Err(ApiError::Conflict("the task has no sandbox yet".into())) };
    state
        .store
        .sandbox_event(sandbox, SandboxEvent::Finish, Some(&caller.member_name()?))
        .await?
        .map_err(|e| ApiError::Conflict(format!("the sandbox is {}: only an active or ready sandbox can be finished", e.from)))?;
    Ok(Json(task_view(&state.store.task(t.id).await?.expect("exists"), None)))
}

/// `POST /api/v1/tasks/{id}/mark-done`: closes the sandbox for good: stops a live run
/// (it ends `completed`), removes the worktree (keeping the branch); the task's stage is
/// not touched.
pub async fn mark_done(State(state): State<AppState>, caller: Caller, Path(id): Path<String>) -> Result<Json<TaskView>, ApiError> {
    let who = retirer(&caller)?;
    let t = load_task(&state, &caller, &id).await?;
    let Some(sandbox) = t.sandbox else { return Err(ApiError::Conflict("the task has no sandbox yet".into())) };
    state.store.sandbox_event(sandbox, SandboxEvent::MarkDone, Some(&who)).await?.map_err(|e| {
        ApiError::Conflict(match e.from {
            SandboxState::Ready | SandboxState::Active | SandboxState::Provision => {
                format!("the sandbox is {}: Finish session first, then Mark done closes it", e.from)
            }
            other => format!("the sandbox is already {other}"),
        })
    })?;
    // Closed for good: a stage waiting for a slot does not reopen it.
    state.store.unqueue_task(t.id).await?;
    // With a run still stopping, its worktree goes once it has ended (after_end).
    if !stop_live(&state, &t, Some("the sandbox was retired with Mark done"), &who).await? {
        crate::tasks::remove_worktree(&state, &t, false).await?;
    }
    Ok(Json(task_view(&state.store.task(t.id).await?.expect("exists"), None)))
}

/// `POST /api/v1/tasks/{id}/abandon`: tears the task's sandbox down without merging; a
/// live run ends `released`. The task waits for Launch (a fresh sandbox), or with
/// `?task=true` is abandoned too.
pub async fn abandon(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    Query(q): Query<AbandonParams>,
) -> Result<Json<TaskView>, ApiError> {
    let who = retirer(&caller)?;
    let t = load_task(&state, &caller, &id).await?;
    let sandbox_open = match t.sandbox {
        Some(sandbox) => state.store.sandbox_event(sandbox, SandboxEvent::Abandon, Some(&who)).await?.is_ok(),
        None => false,
    };
    let task_open = q.task && state.store.finish_task(t.id, TaskStatus::Abandoned, &who).await?;
    if !sandbox_open && !task_open {
        return Err(ApiError::Conflict(match q.task {
            true => format!("task {} is already {}, and its sandbox is closed", t.id, t.status.as_str()),
            false => format!("task {} has no open sandbox to abandon", t.id),
        }));
    }
    // The task itself stays open, waiting for a person: no run is staffed until Launch.
    if !q.task {
        state.store.unqueue_task(t.id).await?;
    }
    // With a run still stopping, its worktree goes once it has ended (after_end).
    if !stop_live(&state, &t, None, &who).await? {
        crate::tasks::remove_worktree(&state, &t, true).await?;
    }
    Ok(Json(task_view(&state.store.task(t.id).await?.expect("exists"), None)))
}

/// Query of Abandon.
#[derive(Debug, Deserialize)]
pub struct AbandonParams {
    /// Abandon the task too (it will not run again); by default only its sandbox is
    /// torn down and its run released, and the task waits for Launch.
    #[serde(default)]
    pub task: bool,
}

/// `POST /api/v1/tasks/{id}/cancel`: calls the task off; a live run is stopped (released).
pub async fn cancel(State(state): State<AppState>, caller: Caller, Path(id): Path<String>) -> Result<Json<TaskView>, ApiError> {
    let who = caller.member_name()?;
    let t = load_task(&state, &caller, &id).await?;
    if !controls(&state, &caller, &t).await?.cancel {
        return Err(ApiError::Forbidden(format!("only {}, who filed the task, or an admin can cancel it", t.created_by)));
    }
    if !state.store.finish_task(t.id, TaskStatus::Cancelled, &who).await? {
        return Err(ApiError::Conflict(format!("task {} is already {}", t.id, t.status.as_str())));
    }
    // The sandbox closes with the task; its branch (and commits) stay.
    if let Some(sandbox) = t.sandbox {
        // Already closed (Mark done) is fine: there is nothing more to close.
        let _ = state.store.sandbox_event(sandbox, SandboxEvent::TaskEnded, None).await?;
    }
    if !stop_live(&state, &t, None, &who).await? {
        crate::tasks::remove_worktree(&state, &t, false).await?;
    }
    Ok(Json(task_view(&state.store.task(t.id).await?.expect("exists"), None)))
}

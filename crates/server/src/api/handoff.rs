//! An agent's hand-off of its stage: the next stage, or the merge a merge stage makes.

use std::time::Duration;

use axum::extract::{Path, State};
use axum::Json;
use drover_api::{TaskView, TextBody};
use drover_core::activity::EventKind;
use drover_core::task::AfterHandOff;
use drover_core::{SessionId, TaskId};
use drover_protocol::device::{MergeResult, ServerMessage};
use drover_store::{HandOffRefused, TaskRow};

use super::tasks::{actor_for, load_task, task_view, MAX_TEXT};
use super::ApiJson;
use crate::auth::Caller;
use crate::devices::NoAnswer;
use crate::{ApiError, AppState};

/// How long after a hand-off the run is stopped (its `drover task advance` gets its answer first).
const STOP_AFTER_HAND_OFF: Duration = Duration::from_millis(500);

/// How long a merge stage's hand-off waits for the device to merge.
const MERGE_TIMEOUT: Duration = Duration::from_secs(120);

/// `POST /api/v1/tasks/{id}/advance`: hands the current stage off with a note.
pub async fn advance(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    ApiJson(req): ApiJson<TextBody>,
) -> Result<Json<TaskView>, ApiError> {
    let t = load_task(&state, &caller, &id).await?;
    let (actor, session) = actor_for(&caller, &t)?;
    if req.text.len() > MAX_TEXT {
        return Err(ApiError::TooLarge(format!("the note is over {MAX_TEXT} bytes")));
    }
    // One hand-off per task at a time: a second one (a double click, a retry) waits
    // for no merge and is refused, and neither can move a stage it did not see.
    let _guard = HandOffGuard::take(&state, t.id)?;
    if t.stage().is_some_and(|stage| stage.merge) {
        state.store.can_hand_off(t.id, t.stage_index, session).await?.map_err(|r| refusal(&t, session, r))?;
        merge_branch(&state, &t, session, &actor, &req.text).await?;
    }
    match state.store.hand_off(t.id, t.stage_index, session, &req.text, &actor).await? {
        Ok(next) => {
            if let Some(session) = session {
                // The run's work is handed off: end it (it completes), after this reply.
                let (st, device) = (state.clone(), state.store.session(session).await?.map(|s| s.device));
                if let Some(device) = device {
                    tokio::spawn(async move {
                        tokio::time::sleep(STOP_AFTER_HAND_OFF).await;
                        let grace_ms = st.config.stop_grace.as_millis() as u64;
                        let _ = st.devices.send(device, &ServerMessage::Stop { session, grace_ms }).await;
                    });
                }
            } else if next == AfterHandOff::Done {
                crate::tasks::remove_worktree(&state, &state.store.task(t.id).await?.expect("exists"), false).await?;
            }
            state.scheduler.notify_one();
            let t = state.store.task(t.id).await?.expect("exists");
            Ok(Json(task_view(&t, None)))
        }
        Err(r) => Err(refusal(&t, session, r)),
    }
}

/// A task's hand-off under way; released when dropped.
struct HandOffGuard {
    state: AppState,
    task: TaskId,
}

impl HandOffGuard {
    fn take(state: &AppState, task: TaskId) -> Result<HandOffGuard, ApiError> {
        if !state.hand_offs.lock().expect("hand-offs").insert(task) {
            return Err(ApiError::Conflict(format!("a hand-off of task {task} is already under way")));
        }
        Ok(HandOffGuard { state: state.clone(), task })
    }
}

impl Drop for HandOffGuard {
    fn drop(&mut self) {
        self.state.hand_offs.lock().expect("hand-offs").remove(&self.task);
    }
}

fn refusal(t: &TaskRow, session: Option<SessionId>, r: HandOffRefused) -> ApiError {
    ApiError::Conflict(match r {
        HandOffRefused::TaskFinished(s) => format!("task {} is {}; there is nothing to hand off", t.id, s.as_str()),
        HandOffRefused::NotCurrent => match session {
            Some(_) => "this session is not the live run of the task's current stage (it may have been handed off already)".into(),
            None => "the current stage has a live run: it hands off itself (or stop it first)".into(),
        },
    })
}

/// A merge stage's merge, on the sandbox's device. Whatever the hand-off then comes to,
/// the merge (or the device's refusal) is on the task's record; a refusal is answered
/// with what to fix.
async fn merge_branch(state: &AppState, t: &TaskRow, session: Option<SessionId>, actor: &str, note: &str) -> Result<(), ApiError> {
    let Some((device, worktree)) = crate::tasks::sandbox_worktree(state, t).await? else {
        return Err(ApiError::Conflict(match t.sandbox_device {
            None => "this stage merges the task's branch, but no run has worked the task yet: launch a session first".into(),
            Some(_) => {
                "the sandbox's device no longer declares the repository (`drover repo add`), so there is no clone to merge in".into()
            }
        }));
    };
    let branch = worktree.branch.clone();
    let stage = t.stage().map(|s| s.stage.as_str()).unwrap_or_default();
    let mut message = format!("Merge {branch}: {}\n\nTask {}, {stage} stage handed off by {actor}.", t.title, t.id);
    if !note.trim().is_empty() {
        message.push_str("\n\n");
        message.push_str(note.trim());
    }
    let device_name = state.store.device(device).await?.map(|d| d.name).unwrap_or_else(|| device.to_string());
    let record = |kind: EventKind, detail: serde_json::Value| drover_store::NewEvent {
        workspace: t.workspace,
        session,
        task: Some(t.id),
        kind,
        actor: actor.into(),
        detail,
    };
    match state.devices.merge(device, worktree, message, MERGE_TIMEOUT).await {
        Ok(MergeResult::Merged { into, commit, already }) => {
            let detail = serde_json::json!({ "branch": branch, "into": into, "commit": commit, "already": already });
            state.store.record_event(&record(EventKind::Merged, detail)).await?;
            Ok(())
        }
        Ok(MergeResult::Refused { reason }) => {
            state.store.record_event(&record(EventKind::MergeRefused, serde_json::json!({ "branch": branch, "reason": reason }))).await?;
            Err(ApiError::Conflict(format!("the stage was not handed off: {reason}")))
        }
        Err(NoAnswer::NotConnected) => Err(ApiError::Unavailable(format!(
            "the merge runs on device {device_name}, which is not connected: hand off again once it is back"
        ))),
        Err(NoAnswer::Disconnected | NoAnswer::Timeout) => Err(ApiError::Timeout(format!(
            "device {device_name} did not report the merge's result: hand off again (a merge that went through is not repeated)"
        ))),
    }
}

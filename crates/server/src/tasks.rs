//! What happens to a task when one of its runs ends: a handed-off run completes (and a
//! finished task's worktree is cleaned up); a run that ended without a hand-off is
//! replaced, a bounded number of times, before the task is flagged for a human.

use drover_core::outcome::{Ending, Fault};
use drover_core::sandbox::SandboxEvent;
use drover_core::task::{restaff, Restaff, TaskStatus};
use drover_core::{branch, DeviceId, Outcome, SandboxState};
use drover_protocol::device::{ServerMessage, Worktree};
use drover_store::{SessionRow, StoreError, TaskRow};

use crate::AppState;

/// Follows up a task run that just ended, `fault` saying whose doing the end was.
pub async fn after_end(state: &AppState, row: &SessionRow, ending: &Ending, fault: Fault) -> Result<(), StoreError> {
    let Some(task_id) = row.task else { return Ok(()) };
    let Some(task) = state.store.task(task_id).await? else { return Ok(()) };
    if matches!(row.sandbox_state, SandboxState::Done | SandboxState::Abandoned) {
        // Mark done or Abandon stopped this run: its worktree can go now that it has ended.
        remove_worktree(state, &task, row.sandbox_state == SandboxState::Abandoned).await?;
    } else if task.status == TaskStatus::Done && ending.outcome == Outcome::Completed {
        remove_worktree(state, &task, false).await?;
        if let Some(sandbox) = task.sandbox {
            // The task's end closes its sandbox, unless something closed it first.
            let _ = state.store.sandbox_event(sandbox, SandboxEvent::TaskEnded, None).await?;
        }
    } else if task.status == TaskStatus::Open
        && matches!(ending.outcome, Outcome::Incomplete | Outcome::Failed | Outcome::Lost)
        && task.stage().map(|s| &s.stage) == row.stage.as_ref()
    {
        let stage = row.stage.clone().unwrap_or_default();
        let device_losses = match fault {
            Fault::Device => state.store.device_losses(task.id, &stage).await?,
            _ => 0,
        };
        match restaff(fault, task.attempts, device_losses, state.config.max_attempts) {
            Restaff::Again(_) => state.store.queue_task(task.id, task.stage_index, true).await?,
            Restaff::Uncounted => state.store.queue_task(task.id, task.stage_index, false).await?,
            Restaff::Flag => {
                let why = format!("the {stage} stage ended {} times without a hand-off", task.attempts);
                state.store.flag_task(task.id, &why, "scheduler").await?;
            }
            Restaff::FlagDevices => {
                let why = format!("the {stage} stage's devices lost {device_losses} of its runs: check them (`drover device list`)");
                state.store.flag_task(task.id, &why, "scheduler").await?;
            }
            Restaff::FlagSetup => {
                let why = format!("the {stage} stage {}", ending.reason);
                state.store.flag_task(task.id, &why, "scheduler").await?;
            }
        }
    }
    state.scheduler.notify_one();
    Ok(())
}

/// The task's worktree in the clone at `repo_path`: its branch (named when its first
/// sandbox was made), its folder (the branch's name without `drover/`, so a task keeps
/// its folder whatever later versions make of its title) and the branch it starts from
/// and merges into.
pub fn task_worktree(task: &TaskRow, repo_path: String) -> Worktree {
    let branch = task.branch.clone().unwrap_or_else(|| branch::branch_name(task.id, &task.title));
    let dir = branch.strip_prefix("drover/").map(str::to_string).unwrap_or_else(|| branch::worktree_dir(task.id, &task.title));
    Worktree { repo_path, dir, branch, base: task.repo_base.clone() }
}

/// The task's worktree on its sandbox's device, with that device; None before the task
/// has a sandbox or when the device no longer declares the repository.
pub async fn sandbox_worktree(state: &AppState, task: &TaskRow) -> Result<Option<(DeviceId, Worktree)>, StoreError> {
    let Some(device) = task.sandbox_device else { return Ok(None) };
    let Some(repo_path) = state.store.device_repo_path(device, task.repo).await? else { return Ok(None) };
    Ok(Some((device, task_worktree(task, repo_path))))
}

/// Asks the sandbox's device to remove the task's worktree (the branch stays). Without
/// `force` a worktree with uncommitted work is kept.
pub async fn remove_worktree(state: &AppState, task: &TaskRow, force: bool) -> Result<(), StoreError> {
    let Some((device, worktree)) = sandbox_worktree(state, task).await? else { return Ok(()) };
    if state.devices.send(device, &ServerMessage::RemoveWorktree { worktree, force }).await.is_err() {
        tracing::warn!(task = %task.id, "the sandbox's device is offline: its worktree stays until removed by hand");
    }
    Ok(())
}

/// A device set a prepared sandbox up (or could not): a problem flags its task at once,
/// as a set-up failure of a run would.
pub async fn prepared(state: &AppState, device: DeviceId, sandbox: drover_core::SandboxId, problem: Option<String>) {
    let Some(problem) = problem else {
        tracing::info!(%sandbox, "sandbox prepared; waiting for Activate");
        return;
    };
    let flagged = async {
        let Some((task, on)) = state.store.sandbox_task(sandbox).await? else { return Ok(()) };
        let Some(t) = state.store.task(task).await?.filter(|t| on == device && t.sandbox == Some(sandbox)) else { return Ok(()) };
        let stage = t.stage().map(|s| s.stage.clone()).unwrap_or_default();
        state.store.flag_task(t.id, &format!("the {stage} stage could not be prepared: {problem}"), "scheduler").await
    };
    if let Err(e) = flagged.await {
        tracing::warn!(%sandbox, "recording a failed preparation: {e}");
    }
}

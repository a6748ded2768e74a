//! Staffing: each task stage waiting for a slot is started on an eligible device (the
//! sandbox's device once the task has one; otherwise any connected device that has the
//! repository and a free slot), first queued first started. Runs once per wake-up (a
//! task filed or handed off, a run ended, a device connected) and on a timer.

use std::collections::HashMap;

use drover_core::harness::{opening, resume_message, stage_prompt, Harness, Opening, StagePlace};
use drover_core::schedule::{pick, Candidate};
use drover_core::{DeviceId, Outcome, RunEnd, WorkspaceId};
use drover_protocol::device::ServerMessage;
use drover_protocol::shim::SessionSpec;
use drover_store::{AgentRow, DeviceRow, NewTaskSession, TaskRow};

use crate::leases::Monitor;
use crate::{auth, ingest, AppState};

/// Terminal size of an agent's run until a viewer resizes it.
const AGENT_SIZE: (u16, u16) = (120, 40);
/// Waiting stages read per batch (a round reads them all, batch by batch).
const BATCH: i64 = 200;

/// Runs the scheduler until the process ends (while this server holds its lease).
pub fn spawn(state: AppState) {
    tokio::spawn(async move {
        loop {
            if state.leases.holds(Monitor::Scheduler) {
                if let Err(e) = round(&state).await {
                    tracing::warn!("scheduler: {e}");
                }
            }
            tokio::select! {
                _ = state.scheduler.notified() => {}
                _ = tokio::time::sleep(state.config.schedule_tick) => {}
            }
        }
    });
}

/// One pass over every waiting stage, first queued first. A stage that cannot start
/// (its devices are busy or away) does not hold up later ones that can; a workspace
/// with no free connected slot left is skipped without further queries.
pub async fn round(state: &AppState) -> Result<(), drover_store::StoreError> {
    let mut devices: HashMap<WorkspaceId, Vec<DeviceRow>> = HashMap::new();
    let mut after: Option<(String, drover_core::TaskId)> = None;
    loop {
        let batch = state.store.queued_tasks(after.as_ref().map(|(at, id)| (at.as_str(), *id)), BATCH).await?;
        let full_batch = batch.len() as i64 == BATCH;
        for task in batch {
            after = Some((task.queued_at.clone().unwrap_or_default(), task.id));
            let list = match devices.entry(task.workspace) {
                std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::hash_map::Entry::Vacant(e) => e.insert(state.store.list_devices(task.workspace).await?),
            };
            if !list.iter().any(|d| d.live_sessions < d.slots && state.devices.is_connected(d.id)) {
                continue;
            }
            if let Some(device) = staff(state, &task, list).await? {
                if let Some(d) = list.iter_mut().find(|d| d.id == device) {
                    d.live_sessions += 1;
                }
            }
        }
        if !full_batch {
            return Ok(());
        }
    }
}

/// Whether a device runs a task's run (never unconfined): not if its last hello said it
/// cannot sandbox and was not started `--unsandboxed`. A device that never said is tried.
fn runs_what_it_is_given(d: &DeviceRow) -> bool {
    let offer = d.sandbox.as_deref().and_then(|j| serde_json::from_str::<drover_core::confinement::Offer>(j).ok());
    !matches!(offer, Some(drover_core::confinement::Offer::Unavailable { .. }))
}

/// Whether a device has not reported in for the Device-silent window: it may still hold
/// its link open (a stopped process, a hung machine) but would only lose a new run.
fn is_silent(state: &AppState, d: &DeviceRow) -> bool {
    let last = d.last_contact_at.as_deref().and_then(drover_store::parse_time);
    last.is_some_and(|at| (chrono::Utc::now() - at).to_std().unwrap_or_default() >= state.config.liveness.device_silent_after)
}

/// Starts a run for `task`'s current stage if a device can take it; returns the device.
async fn staff(state: &AppState, task: &TaskRow, devices: &[DeviceRow]) -> Result<Option<DeviceId>, drover_store::StoreError> {
    let Some(stage) = task.stage() else { return Ok(None) };
    let Some(agent_name) = stage.agent() else { return Ok(None) };
    // One run at a time per sandbox: the previous stage's run finishes leaving first
    // (its end wakes the scheduler again).
    if state.store.live_task_session(task.id).await?.is_some() {
        return Ok(None);
    }
    // A task at its spend cap gets no new run until someone raises the cap.
    if let Some(why) = crate::spend::over_cap(state, task).await? {
        state.store.flag_task(task.id, &why, "spend cap").await?;
        return Ok(None);
    }
    let Some(agent) = state.store.agent_by_name(task.workspace, agent_name).await? else {
        state.store.flag_task(task.id, &format!("no agent named `{agent_name}` to staff the {} stage", stage.stage), "scheduler").await?;
        return Ok(None);
    };
    let mut candidates = Vec::new();
    let mut paths = HashMap::new();
    for d in devices.iter().filter(|d| task.sandbox_device.is_none_or(|s| s == d.id)) {
        let path = state.store.device_repo_path(d.id, task.repo).await?;
        candidates.push(Candidate {
            id: d.id,
            name: d.name.clone(),
            connected: state.devices.is_connected(d.id),
            silent: is_silent(state, d),
            has_repo: path.is_some(),
            slots: d.slots,
            live: d.live_sessions,
            runs: runs_what_it_is_given(d),
        });
        if let Some(p) = path {
            paths.insert(d.id, p);
        }
    }
    let Some(device) = pick(&candidates) else { return Ok(None) };
    let device_name = devices.iter().find(|d| d.id == device).map(|d| d.name.clone()).unwrap_or_default();
    if task.awaits_activation() {
        prepare(state, task, &agent, device, paths[&device].clone()).await?;
        return Ok(None);
    }
    let place = StagePlace { is_last: task.stage_index + 1 == task.workflow.len(), merges: stage.merge };
    let earlier = state.store.earlier_notes(task.id).await?;
    let earlier: Vec<_> = earlier.iter().map(drover_store::EarlierNote::as_earlier).collect();
    let prompt = stage_prompt(&task.title, &task.body, &stage.stage, place, &earlier);
    let harness = Harness::parse(&agent.harness);
    // The stage's previous run was lost with this agent on it: resume its conversation.
    let runs = state.store.task_sessions(task.id).await?;
    let previous = runs.iter().rev().find(|r| r.stage.as_deref() == Some(stage.stage.as_str()));
    let previous_lost = previous.is_some_and(|r| r.outcome == Outcome::Lost && r.agent == Some(agent.id) && r.started_at.is_some());
    let opening = match harness.clone().and_then(|h| opening(h, &prompt, &agent.route, &agent.template, previous_lost)) {
        Ok(o) => o,
        Err(e) => {
            state.store.flag_task(task.id, &format!("agent `{}` cannot be started: {e}", agent.name), "scheduler").await?;
            return Ok(None);
        }
    };
    // What is typed in once the run is up: the carry-on message for a resumed run, the
    // prompt for a harness that takes none on its command line.
    let (command, first_message, resumed) = match opening {
        Opening::Resume(argv) => (argv, Some(resume_message(&stage.stage)), true),
        Opening::Start(argv) => (argv, harness.is_ok_and(Harness::prompt_as_input).then(|| prompt.clone()), false),
    };
    let worktree = crate::tasks::task_worktree(task, paths[&device].clone());
    let branch = worktree.branch.clone();
    let (cols, rows) = AGENT_SIZE;
    let new = NewTaskSession {
        task: task.id,
        device,
        agent: agent.id,
        stage_index: task.stage_index,
        command: command.clone(),
        cwd: String::new(),
        branch,
        cols,
        rows,
        resumed,
    };
    // The task may have moved on (handed off, launched, cancelled) since it was read.
    let Some((session, _)) = state.store.create_task_session(&new, "scheduler").await? else { return Ok(None) };
    let token = match auth::issue_session_token(&state.store, session).await {
        Ok(t) => t,
        Err(e) => {
            let end = RunEnd::StartFailed { reason: format!("could not issue the run's credential: {e}") };
            ingest::end_session(state, device, &device_name, session, &ingest::EndReport::now(end, 0)).await?;
            return Ok(None);
        }
    };
    let env = vec![
        ("DROVER_URL".to_string(), state.config.public_url.clone()),
        ("DROVER_TOKEN".to_string(), token),
        ("DROVER_SESSION".to_string(), session.to_string()),
        ("DROVER_TASK".to_string(), task.id.to_string()),
        ("DROVER_STAGE".to_string(), stage.stage.clone()),
    ];
    let harness = Harness::parse(&agent.harness).ok();
    let spec =
        SessionSpec { session, command, cwd: String::new(), env, cols, rows, harness, unconfined: false, policy: None, link_secret: None };
    let skills = skill_bundles(state, task, &agent).await?;
    if state.devices.send(device, &ServerMessage::Start { spec: Box::new(spec), worktree: Some(worktree), skills }).await.is_err() {
        let end = RunEnd::DeviceLost { reason: "the device disconnected before the run could be started".into() };
        ingest::end_session(state, device, &device_name, session, &ingest::EndReport::now(end, 0)).await?;
        return Ok(None);
    }
    // A cancel or abandon that raced this start found no live run to stop: stop it now.
    if state.store.task(task.id).await?.is_some_and(|t| t.status != drover_core::task::TaskStatus::Open) {
        let grace_ms = state.config.stop_grace.as_millis() as u64;
        let _ = state.devices.send(device, &ServerMessage::Stop { session, grace_ms }).await;
    }
    if let Some(message) = first_message {
        // Typed in once the run is up, through the audited path.
        tokio::spawn(send_prompt(state.clone(), task.id, session, message));
    }
    tracing::info!(task = %task.id, %session, device = %device_name, stage = %stage.stage, "staffed");
    Ok(Some(device))
}

/// Sets the task's sandbox up on `device` for a stage that starts on Activate: the
/// worktree made and the skills placed, no run started.
async fn prepare(
    state: &AppState,
    task: &TaskRow,
    agent: &AgentRow,
    device: DeviceId,
    repo_path: String,
) -> Result<(), drover_store::StoreError> {
    let worktree = crate::tasks::task_worktree(task, repo_path);
    let Some(sandbox) = state.store.prepare_task_sandbox(task.id, task.stage_index, device, &worktree.branch, "scheduler").await? else {
        return Ok(());
    };
    let skills = skill_bundles(state, task, agent).await?;
    if state.devices.send(device, &ServerMessage::Prepare { sandbox, worktree, skills }).await.is_err() {
        // Not set up after all: back in the queue for the next device.
        state.store.queue_task(task.id, task.stage_index, false).await?;
    }
    tracing::info!(task = %task.id, %sandbox, "prepared; waiting for Activate");
    Ok(())
}

/// The workspace's skills, for where the agent's harness looks for them.
async fn skill_bundles(
    state: &AppState,
    task: &TaskRow,
    agent: &AgentRow,
) -> Result<Vec<drover_protocol::device::SkillBundle>, drover_store::StoreError> {
    let folder = Harness::parse(&agent.harness).ok().and_then(drover_core::skill::folder).map(str::to_string);
    Ok(state
        .store
        .skills(task.workspace)
        .await?
        .into_iter()
        .map(|s| drover_protocol::device::SkillBundle { name: s.name, folder: folder.clone(), files: s.files })
        .collect())
}

/// Longest a run may take to start (its worktree checkout included) before its first
/// message is given up on.
const PROMPT_START_WAIT: std::time::Duration = std::time::Duration::from_secs(600);

/// Types the stage's first message into a run whose harness takes none on its command
/// line, once it runs. If it cannot be delivered, the task is flagged for a person
/// rather than left with an agent idling at an empty prompt.
async fn send_prompt(state: AppState, task: drover_core::TaskId, session: drover_core::SessionId, prompt: String) {
    let deadline = tokio::time::Instant::now() + PROMPT_START_WAIT.max(state.config.start_wait);
    let row = loop {
        match state.store.session(session).await {
            Ok(Some(s)) if s.outcome == drover_core::Outcome::Running => break s,
            Ok(Some(s)) if s.outcome == drover_core::Outcome::Starting && tokio::time::Instant::now() < deadline => {}
            // Ended before it ran: its end is handled (restaffed or flagged) like any other.
            Ok(Some(s)) if s.outcome != drover_core::Outcome::Starting => return,
            _ => return flag_unsent(&state, task, session, "the run did not start in time".into()).await,
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    match crate::api::sessions::deliver_to(&state, &row, "scheduler".into(), &prompt).await {
        Ok(_) => {}
        // It may have arrived: a person can see on the terminal whether it did.
        Err(e @ crate::ApiError::Timeout(_)) => tracing::warn!(%session, "the stage's first message may not have arrived: {e}"),
        Err(e) => flag_unsent(&state, task, session, e.to_string()).await,
    }
}

async fn flag_unsent(state: &AppState, task: drover_core::TaskId, session: drover_core::SessionId, why: String) {
    tracing::warn!(%session, "the stage's first message was not delivered: {why}");
    let reason = format!("the first message for run {session} could not be typed in ({why}): send it from the live terminal's Send box");
    if let Err(e) = state.store.flag_task(task, &reason, "scheduler").await {
        tracing::warn!(%session, "flagging the task: {e}");
    }
}

//! Staffing: each task stage waiting for a slot is started on an eligible device (the
//! sandbox's device once the task has one; otherwise any connected device that has the
//! repository and a free slot), first queued first started. Runs once per wake-up (a
//! task filed or handed off, a run ended, a device connected) and on a timer.

use std::collections::HashMap;
use std::future::Future;

use drover_core::harness::{opening, resume_message, stage_prompt, with_settings, Harness, Opening, StagePlace};
use drover_core::schedule::{pick, Candidate};
use drover_core::{DeviceId, Outcome, RunEnd, SessionId, TaskId, WorkspaceId};
use drover_protocol::device::ServerMessage;
use drover_protocol::shim::SessionSpec;
use drover_store::{AgentRow, DeviceRow, NewTaskSession, StageSpec, StoreError, TaskRow};

use crate::leases::Monitor;
use crate::{auth, ingest, AppState};

#[cfg(test)]
mod tests;

type Res<T> = Result<T, StoreError>;

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

/// A task waiting for a slot, as a round walks the queue.
pub(crate) trait QueuedTask {
    /// Its id (with `queued_at`, where the next batch starts).
    fn id(&self) -> TaskId;
    /// The workspace whose devices may take it.
    fn workspace(&self) -> WorkspaceId;
    /// When it was queued (the queue's order).
    fn queued_at(&self) -> &str;
}

impl QueuedTask for TaskRow {
    fn id(&self) -> TaskId {
        self.id
    }

    fn workspace(&self) -> WorkspaceId {
        self.workspace
    }

    fn queued_at(&self) -> &str {
        self.queued_at.as_deref().unwrap_or_default()
    }
}

/// What a round needs: the queue, the devices, and starting one task's stage.
pub(crate) trait Staffing: Sync {
    /// What the queue holds of a task (what [`Staffing::staff`] starts it from).
    type Task: QueuedTask + Send;
    /// Up to `limit` queued tasks after `after` (queued time, id), first queued first.
    fn queued_tasks(&self, after: Option<(&str, TaskId)>, limit: i64) -> impl Future<Output = Res<Vec<Self::Task>>> + Send;
    /// A workspace's devices, with their live runs.
    fn list_devices(&self, workspace: WorkspaceId) -> impl Future<Output = Res<Vec<DeviceRow>>> + Send;
    /// Whether the device is connected (to this server or another replica).
    fn is_connected(&self, device: DeviceId) -> bool;
    /// Starts a run for the task's current stage if one of `devices` can take it;
    /// answers the device.
    fn staff(&self, task: &Self::Task, devices: &[DeviceRow]) -> impl Future<Output = Res<Option<DeviceId>>> + Send;
}

impl Staffing for AppState {
    type Task = TaskRow;

    fn queued_tasks(&self, after: Option<(&str, TaskId)>, limit: i64) -> impl Future<Output = Res<Vec<TaskRow>>> + Send {
        self.store.queued_tasks(after, limit)
    }

    fn list_devices(&self, workspace: WorkspaceId) -> impl Future<Output = Res<Vec<DeviceRow>>> + Send {
        self.store.list_devices(workspace)
    }

    fn is_connected(&self, device: DeviceId) -> bool {
        self.devices.is_connected(device)
    }

    fn staff(&self, task: &TaskRow, devices: &[DeviceRow]) -> impl Future<Output = Res<Option<DeviceId>>> + Send {
        staff(self, task, devices)
    }
}

/// One pass over every waiting stage, first queued first. A stage that cannot start
/// (its devices are busy or away) does not hold up later ones that can; a workspace
/// with no free connected slot left is skipped without further queries.
pub async fn round(state: &AppState) -> Result<(), drover_store::StoreError> {
    round_with(state).await
}

/// [`round`] over any [`Staffing`].
async fn round_with<S: Staffing>(s: &S) -> Res<()> {
    let mut devices: HashMap<WorkspaceId, Vec<DeviceRow>> = HashMap::new();
    let mut after: Option<(String, TaskId)> = None;
    loop {
        let batch = s.queued_tasks(after.as_ref().map(|(at, id)| (at.as_str(), *id)), BATCH).await?;
        let full_batch = batch.len() as i64 == BATCH;
        for task in batch {
            after = Some((task.queued_at().to_string(), task.id()));
            let list = match devices.entry(task.workspace()) {
                std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::hash_map::Entry::Vacant(e) => e.insert(s.list_devices(task.workspace()).await?),
            };
            if !has_free_slot(list, |d| s.is_connected(d)) {
                continue;
            }
            if let Some(device) = s.staff(&task, list).await? {
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

/// Whether any of `devices` is connected with a slot free.
fn has_free_slot(devices: &[DeviceRow], connected: impl Fn(DeviceId) -> bool) -> bool {
    devices.iter().any(|d| d.live_sessions < d.slots && connected(d.id))
}

/// Whether a device runs a task's run (never unconfined): not if its last hello said it
/// cannot sandbox and was not started `--unsandboxed`. A device that never said is tried.
fn runs_what_it_is_given(d: &DeviceRow) -> bool {
    let offer = d.sandbox.as_deref().and_then(|j| serde_json::from_str::<drover_core::confinement::Offer>(j).ok());
    !matches!(offer, Some(drover_core::confinement::Offer::Unavailable { .. }))
}

/// Whether a device has not reported in for the Device-silent window (`silent_after`):
/// it may still hold its link open (a stopped process, a hung machine) but would only
/// lose a new run.
pub(crate) fn is_silent(silent_after: std::time::Duration, now: chrono::DateTime<chrono::Utc>, d: &DeviceRow) -> bool {
    let last = d.last_contact_at.as_deref().and_then(drover_store::parse_time);
    last.is_some_and(|at| (now - at).to_std().unwrap_or_default() >= silent_after)
}

/// The devices a task's stage may go to, as the pick sees them: only its sandbox's
/// device once it has one. `repo_paths` holds where each device has the task's
/// repository.
fn candidates(
    sandbox_device: Option<DeviceId>,
    devices: &[DeviceRow],
    repo_paths: &HashMap<DeviceId, String>,
    connected: impl Fn(DeviceId) -> bool,
    silent: impl Fn(&DeviceRow) -> bool,
) -> Vec<Candidate<DeviceId>> {
    devices
        .iter()
        .filter(|d| sandbox_device.is_none_or(|s| s == d.id))
        .map(|d| Candidate {
            id: d.id,
            name: d.name.clone(),
            connected: connected(d.id),
            silent: silent(d),
            has_repo: repo_paths.contains_key(&d.id),
            slots: d.slots,
            live: d.live_sessions,
            runs: runs_what_it_is_given(d),
        })
        .collect()
}

/// Starts a run for `task`'s current stage if a device can take it; returns the device.
#[tracing::instrument(name = "task", skip_all, fields(task = %task.id))]
async fn staff(state: &AppState, task: &TaskRow, devices: &[DeviceRow]) -> Res<Option<DeviceId>> {
    let Some((stage, agent)) = staffable(state, task).await? else { return Ok(None) };
    let Some((device, repo_path)) = choose_device(state, task, devices).await? else { return Ok(None) };
    if task.awaits_activation() {
        prepare(state, task, &agent, device, repo_path).await?;
        return Ok(None);
    }
    let Some(launch) = launch(state, task, stage, &agent).await? else { return Ok(None) };
    let device_name = devices.iter().find(|d| d.id == device).map(|d| d.name.clone()).unwrap_or_default();
    let place = Place { device, device_name, repo_path };
    start_run(state, task, stage, &agent, place, launch).await
}

/// The current stage and the agent to staff it, if it is to be staffed now; a task
/// that cannot be (at its spend cap, no such agent) is flagged for a person.
async fn staffable<'t>(state: &AppState, task: &'t TaskRow) -> Res<Option<(&'t StageSpec, AgentRow)>> {
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
    Ok(Some((stage, agent)))
}

/// The device to run the task's stage on, and where it has the task's repository.
async fn choose_device(state: &AppState, task: &TaskRow, devices: &[DeviceRow]) -> Res<Option<(DeviceId, String)>> {
    let mut paths = HashMap::new();
    let eligible = devices.iter().filter(|d| task.sandbox_device.is_none_or(|s| s == d.id));
    for d in eligible {
        if let Some(p) = state.store.device_repo_path(d.id, task.repo).await? {
            paths.insert(d.id, p);
        }
    }
    let (window, now) = (state.config.liveness.device_silent_after, chrono::Utc::now());
    let list = candidates(task.sandbox_device, devices, &paths, |d| state.devices.is_connected(d), |d| is_silent(window, now, d));
    Ok(pick(&list).map(|device| (device, paths.remove(&device).expect("a picked device has the repository"))))
}

/// How a stage's run starts: its command, and what is typed in once it is up.
struct Launch {
    command: Vec<String>,
    /// The carry-on message for a resumed run, the prompt for a harness that takes none
    /// on its command line.
    first_message: Option<String>,
    /// It resumes the conversation of the stage's lost run.
    resumed: bool,
}

/// How the stage's run starts; None (the task flagged) when its agent cannot be
/// started.
async fn launch(state: &AppState, task: &TaskRow, stage: &StageSpec, agent: &AgentRow) -> Res<Option<Launch>> {
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
    let allow = state.store.task_allow_rules(task.id).await?;
    let settled = |argv: Vec<String>| match &harness {
        Ok(h) => with_settings(*h, argv, &allow),
        Err(_) => argv,
    };
    Ok(Some(match opening {
        Opening::Resume(argv) => Launch { command: settled(argv), first_message: Some(resume_message(&stage.stage)), resumed: true },
        Opening::Start(argv) => {
            Launch { command: settled(argv), first_message: harness.is_ok_and(Harness::prompt_as_input).then_some(prompt), resumed: false }
        }
    }))
}

/// The device a run goes to, by id and name, and where it has the task's repository.
struct Place {
    device: DeviceId,
    device_name: String,
    repo_path: String,
}

/// Creates the stage's run and has `place`'s device start it; returns the device.
async fn start_run(
    state: &AppState,
    task: &TaskRow,
    stage: &StageSpec,
    agent: &AgentRow,
    place: Place,
    launch: Launch,
) -> Res<Option<DeviceId>> {
    let Place { device, device_name, repo_path } = place;
    let worktree = crate::tasks::task_worktree(task, repo_path);
    let (cols, rows) = AGENT_SIZE;
    let new = NewTaskSession {
        task: task.id,
        device,
        agent: agent.id,
        stage_index: task.stage_index,
        command: launch.command.clone(),
        cwd: String::new(),
        branch: worktree.branch.clone(),
        cols,
        rows,
        resumed: launch.resumed,
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
    let command = launch.command;
    let spec =
        SessionSpec { session, command, cwd: String::new(), env, cols, rows, harness, unconfined: false, policy: None, link_secret: None };
    let skills = skill_bundles(state, task, agent).await?;
    if state.devices.send(device, &ServerMessage::Start { spec: Box::new(spec), worktree: Some(worktree), skills }).await.is_err() {
        let end = RunEnd::DeviceLost { reason: "the device disconnected before the run could be started".into() };
        ingest::end_session(state, device, &device_name, session, &ingest::EndReport::now(end, 0)).await?;
        return Ok(None);
    }
    started(state, task.id, device, session, launch.first_message).await?;
    tracing::info!(task = %task.id, %session, device = %device_name, stage = %stage.stage, "staffed");
    Ok(Some(device))
}

/// After a run's Start reached its device: stops it if the task was cancelled or
/// abandoned meanwhile, and has its first message typed in once it is up.
async fn started(state: &AppState, task: TaskId, device: DeviceId, session: SessionId, first_message: Option<String>) -> Res<()> {
    // A cancel or abandon that raced this start found no live run to stop: stop it now.
    if state.store.task(task).await?.is_some_and(|t| t.status != drover_core::task::TaskStatus::Open) {
        let grace_ms = state.config.stop_grace.as_millis() as u64;
        let _ = state.devices.send(device, &ServerMessage::Stop { session, grace_ms }).await;
    }
    if let Some(message) = first_message {
        // Typed in once the run is up, through the audited path.
        tokio::spawn(tracing::Instrument::in_current_span(send_prompt(state.clone(), task, session, message)));
    }
    Ok(())
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

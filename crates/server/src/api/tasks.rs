//! Tasks, agents and repositories: filing and reading tasks, the agent's own calls
//! (hand off, comment, blockers, questions) and the Sessions panel's controls.

use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::Json;
use drover_api::{
    AddRepo, AgentView, CreateAgent, CreateTask, NoteView, RepoAdded, RepoView, StageView, TaskControls, TaskDetail, TaskView, TextBody,
    TurnView, UpdateTask, WorkflowView,
};
use drover_core::activity::EventKind;
use drover_core::permissions::{allowed, Action, Caller as PermCaller, Role};
use drover_core::sandbox::SandboxEvent;
use drover_core::task::{check_workflow, merges_by_default, AfterHandOff, TaskStatus, DEFAULT_STAGES};
use drover_core::{NoteId, SandboxState, SessionId, TaskId, WorkspaceId};
use drover_protocol::device::{MergeResult, ServerMessage};
use drover_store::{BaseRefused, HandOffRefused, NewTask, NoteRow, Principal, StageSpec, TaskRow};
use serde::Deserialize;

use super::sessions::view as session_view;
use super::ApiJson;
use crate::auth::Caller;
use crate::devices::NoAnswer;
use crate::{ApiError, AppState};

/// Longest task body accepted.
const MAX_BODY: usize = 64 * 1024;
/// Longest note, comment or answer accepted.
const MAX_TEXT: usize = 16 * 1024;
/// How long after a hand-off the run is stopped (its `drover task advance` gets its answer first).
const STOP_AFTER_HAND_OFF: Duration = Duration::from_millis(500);
/// How long a merge stage's hand-off waits for the device to merge.
const MERGE_TIMEOUT: Duration = Duration::from_secs(120);

fn bad(e: impl std::fmt::Display) -> ApiError {
    ApiError::BadRequest(e.to_string())
}

fn check_text(what: &str, text: &str, max: usize) -> Result<(), ApiError> {
    if text.trim().is_empty() {
        return Err(bad(format!("the {what} is empty")));
    }
    if text.len() > max {
        return Err(ApiError::TooLarge(format!("the {what} is over {max} bytes")));
    }
    if text.contains('\0') {
        return Err(bad(format!("the {what} contains a NUL byte")));
    }
    Ok(())
}

fn member(caller: &Caller) -> Result<(drover_core::MemberId, String, Role), ApiError> {
    match &caller.0 {
        Principal::Member { id, name, role, .. } => Ok((*id, name.clone(), *role)),
        _ => Err(caller.member_name().expect_err("not a member")),
    }
}

fn admin(caller: &Caller) -> Result<String, ApiError> {
    let (_, name, role) = member(caller)?;
    if !role.is_admin() {
        return Err(ApiError::Forbidden("only a workspace owner or admin can do this".into()));
    }
    Ok(name)
}

async fn load_task(state: &AppState, caller: &Caller, id: &str) -> Result<TaskRow, ApiError> {
    let tid: TaskId = id.trim().parse().map_err(bad)?;
    match state.store.task(tid).await? {
        Some(t) if t.workspace == caller.0.workspace() => Ok(t),
        _ => Err(ApiError::NotFound(format!("no task {tid}: `drover task list` shows the tasks there are"))),
    }
}

/// Members may act on any task; an agent only on its own session's task.
fn actor_for(caller: &Caller, task: &TaskRow) -> Result<(String, Option<drover_core::SessionId>), ApiError> {
    match &caller.0 {
        Principal::Member { name, .. } => Ok((name.clone(), None)),
        Principal::Agent { task: Some(t), session, name, .. } if *t == task.id => Ok((format!("agent {name}"), Some(*session))),
        Principal::Agent { .. } => Err(ApiError::Forbidden("an agent can only act on the task of its own session".into())),
        Principal::Device { .. } => Err(ApiError::Forbidden("device credentials can only open the device link".into())),
    }
}

/// The API's view of a task; `live` is its live run and whether the caller may drop in.
fn task_view(t: &TaskRow, live: Option<(drover_core::SessionId, bool)>) -> TaskView {
    TaskView {
        id: t.id,
        kind: t.kind.clone(),
        title: t.title.clone(),
        body: t.body.clone(),
        status: t.status.as_str().into(),
        repo: t.repo_name.clone(),
        workflow: t.workflow.iter().map(stage_view).collect(),
        stage: t.stage().map(|s| s.stage.clone()),
        attempts: t.attempts,
        queued_at: t.queued_at.clone(),
        flagged: t.flagged.clone(),
        branch: t.branch.clone(),
        sandbox: t.sandbox,
        sandbox_state: t.sandbox_state.map(|s| s.as_str().to_string()),
        live_session: live.map(|(id, _)| id),
        turn: {
            let turn = t.turn();
            TurnView { kind: turn.kind().into(), label: turn.label(), needs_person: turn.needs_person() }
        },
        can_drop_in: live.is_some_and(|(_, may)| may),
        cost_usd: t.cost.flatten().map(drover_core::spend::usd),
        cost_unknown: matches!(t.cost, Some(None)),
        spend_cap_usd: t.spend_cap.map(drover_core::spend::usd),
        created_by: t.created_by.clone(),
        created_at: t.created_at.clone(),
    }
}

fn stage_view(s: &StageSpec) -> StageView {
    StageView { stage: s.stage.clone(), assignee: s.assignee.clone(), merge: Some(s.merge), activate: Some(s.activate) }
}

/// Checks stages given by a caller (names, agents that exist) and fills in what they
/// leave out: `agent` for stages with no assignee, and merging for a stage called `merge`.
async fn stage_specs(state: &AppState, ws: WorkspaceId, stages: Vec<StageView>, agent: Option<&str>) -> Result<Vec<StageSpec>, ApiError> {
    let names: Vec<String> = stages.iter().map(|s| s.stage.clone()).collect();
    check_workflow(&names).map_err(bad)?;
    let mut out = Vec::new();
    for s in stages {
        // A stage kept for people stays with them whatever `--agent` says.
        let assignee = s.assignee.or_else(|| agent.map(str::to_string));
        if let Some(a) = drover_core::task::stage_agent(assignee.as_deref()) {
            if state.store.agent_by_name(ws, a).await?.is_none() {
                return Err(ApiError::NotFound(format!("no agent named `{a}`: `drover agent create` registers one")));
            }
        }
        let merge = s.merge.unwrap_or_else(|| merges_by_default(&s.stage));
        out.push(StageSpec { stage: s.stage, assignee, merge, activate: s.activate.unwrap_or(false) });
    }
    Ok(out)
}

/// The stages a task gets when it names none: the workspace's, or the default ones.
async fn workspace_stages(state: &AppState, ws: WorkspaceId) -> Result<Vec<StageSpec>, ApiError> {
    Ok(state.store.workspace_workflow(ws).await?.unwrap_or_else(|| {
        DEFAULT_STAGES
            .iter()
            .map(|s| StageSpec { stage: s.to_string(), assignee: None, merge: merges_by_default(s), activate: false })
            .collect()
    }))
}

/// `GET /api/v1/workflow`: the stages new tasks get.
pub async fn workflow(State(state): State<AppState>, caller: Caller) -> Result<Json<WorkflowView>, ApiError> {
    caller.member_name()?;
    let stages = workspace_stages(&state, caller.0.workspace()).await?;
    Ok(Json(WorkflowView { stages: stages.iter().map(stage_view).collect() }))
}

/// `PUT /api/v1/workflow`: sets the stages new tasks get (tasks already filed keep theirs).
pub async fn set_workflow(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(req): ApiJson<WorkflowView>,
) -> Result<Json<WorkflowView>, ApiError> {
    admin(&caller)?;
    let ws = caller.0.workspace();
    let stages = stage_specs(&state, ws, req.stages, None).await?;
    state.store.set_workspace_workflow(ws, &stages).await?;
    Ok(Json(WorkflowView { stages: stages.iter().map(stage_view).collect() }))
}

fn note_view(n: NoteRow) -> NoteView {
    NoteView {
        id: n.id.to_string(),
        kind: n.kind,
        text: n.text,
        answer: n.answer,
        closed_by: n.closed_by,
        closed_at: n.closed_at,
        created_by: n.created_by,
    }
}

/// `POST /api/v1/repos`.
pub async fn add_repo(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(req): ApiJson<AddRepo>,
) -> Result<(StatusCode, Json<RepoAdded>), ApiError> {
    admin(&caller)?;
    drover_core::names::check_device_name(&req.name).map_err(|_| bad("a repository name is 1–64 letters, digits, `-`, `_` or `.`"))?;
    if req.path.is_empty() || !req.path.starts_with('/') || req.path.contains('\0') || req.path.len() > 4096 {
        return Err(bad("the clone's path must be an absolute path on the device"));
    }
    if let Some(base) = &req.base {
        if !drover_core::branch::is_valid_branch(base) {
            return Err(bad(format!("`{}` is not a valid branch name for the base branch", base.chars().take(80).collect::<String>())));
        }
    }
    let ws = caller.0.workspace();
    let device = state
        .store
        .device_by_name(ws, &req.device)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("no device named `{}`", req.device)))?;
    // The device checks its clone before tasks rely on it: there, not here, is where
    // the path and its branches are.
    let base = match &req.base {
        Some(b) => Some(b.clone()),
        None => state.store.list_repos(ws).await?.into_iter().find(|r| r.name == req.name).and_then(|r| r.base),
    };
    let unchecked = match state.devices.check_repo(device.id, req.path.clone(), base, REPO_CHECK_TIMEOUT).await {
        Ok(None) => None,
        Ok(Some(problem)) => return Err(bad(format!("device `{}` says: {problem}", device.name))),
        Err(NoAnswer::Timeout) => Some(format!("device `{}` did not answer in time", device.name)),
        Err(_) => Some(format!("device `{}` is not connected", device.name)),
    };
    let repo = state.store.add_repo(ws, &req.name, req.base.as_deref()).await?;
    state.store.set_device_repo(device.id, repo, &req.path).await?;
    state.scheduler.notify_one();
    Ok((StatusCode::CREATED, Json(RepoAdded { checked: unchecked.is_none(), unchecked_because: unchecked })))
}

/// How long `repo add` waits for the device to check its clone.
const REPO_CHECK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(15);

/// `GET /api/v1/repos`.
pub async fn repos(State(state): State<AppState>, caller: Caller) -> Result<Json<Vec<RepoView>>, ApiError> {
    caller.member_name()?;
    let rows = state.store.list_repos(caller.0.workspace()).await?;
    Ok(Json(rows.into_iter().map(|r| RepoView { name: r.name, devices: r.devices, base: r.base }).collect()))
}

/// `POST /api/v1/agents`: the caller becomes the agent's operator.
pub async fn create_agent(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(req): ApiJson<CreateAgent>,
) -> Result<StatusCode, ApiError> {
    let (id, _, _) = member(&caller)?;
    drover_core::names::check_device_name(&req.name).map_err(|_| bad("an agent name is 1–64 letters, digits, `-`, `_` or `.`"))?;
    if req.name.eq_ignore_ascii_case(drover_core::task::HUMAN) {
        return Err(bad("`human` marks a stage that people work (`--assign review=human`): pick another agent name"));
    }
    let harness = drover_core::harness::Harness::parse(&req.harness).map_err(bad)?;
    if harness == drover_core::harness::Harness::Custom {
        drover_core::harness::check_template(&req.template).map_err(bad)?;
    }
    if req.template.len() > 64 || req.template.iter().any(|a| a.len() > 4096 || a.contains('\0')) {
        return Err(bad("the command template is too long or contains a NUL byte"));
    }
    if harness == drover_core::harness::Harness::Opencode
        && req.model.as_deref().is_some_and(|m| !m.contains('/'))
        && req.provider.as_deref().is_none_or(str::is_empty)
    {
        return Err(bad("OpenCode names models as provider/model: pass --provider, or --model provider/model"));
    }
    let route = drover_core::harness::Route { model: req.model, provider: req.provider, account: req.account, effort: req.effort };
    match state.store.create_agent(caller.0.workspace(), &req.name, id, harness.as_str(), &route, &req.template).await? {
        Some(_) => Ok(StatusCode::CREATED),
        None => Err(ApiError::Conflict(format!("an agent named `{}` already exists", req.name))),
    }
}

/// `GET /api/v1/agents`.
pub async fn agents(State(state): State<AppState>, caller: Caller) -> Result<Json<Vec<AgentView>>, ApiError> {
    caller.member_name()?;
    let rows = state.store.list_agents(caller.0.workspace()).await?;
    Ok(Json(rows.into_iter().map(agent_view).collect()))
}

/// The API's view of an agent.
pub(crate) fn agent_view(a: drover_store::AgentRow) -> AgentView {
    AgentView {
        name: a.name,
        operator: a.operator_name,
        harness: a.harness,
        model: a.route.model,
        provider: a.route.provider,
        account: a.route.account,
        effort: a.route.effort,
    }
}

/// `POST /api/v1/tasks`: files a task; its first stage is staffed when an agent is pinned.
pub async fn create(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(req): ApiJson<CreateTask>,
) -> Result<(StatusCode, Json<TaskView>), ApiError> {
    let who = caller.member_name()?;
    drover_core::names::check_title(&req.title).map_err(bad)?;
    check_text("title", &req.title, 500)?;
    if req.body.len() > MAX_BODY || req.body.contains('\0') {
        return Err(ApiError::TooLarge(format!("the body is over {MAX_BODY} bytes or contains a NUL byte")));
    }
    let kind = req.kind.unwrap_or_else(|| "story".into());
    if !(1..=32).contains(&kind.len()) || !kind.bytes().all(|b| b.is_ascii_lowercase() || b == b'-') {
        return Err(bad("a task type is a short lowercase word (story, bug, chore, …)"));
    }
    let ws = caller.0.workspace();
    let repo = state
        .store
        .repo_by_name(ws, &req.repo)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("no repository named `{}`: `drover repo add` registers one", req.repo)))?;
    let stages = match req.workflow {
        Some(stages) => stages,
        None => workspace_stages(&state, ws).await?.iter().map(stage_view).collect(),
    };
    let workflow = stage_specs(&state, ws, stages, req.agent.as_deref()).await?;
    let new = NewTask { workspace: ws, kind, title: req.title, body: req.body, repo, workflow, created_by: who };
    let spend_cap = match req.spend_cap_usd {
        Some(u) => Some(drover_core::spend::nano_from_usd(u).ok_or_else(|| bad("a spend cap is an amount in USD, 0 or more"))?),
        None => None,
    };
    let id = state.store.create_task(&new).await?;
    if spend_cap.is_some() {
        state.store.set_task_spend_cap(id, spend_cap).await?;
    }
    state.scheduler.notify_one();
    let t = state.store.task(id).await?.expect("just created");
    Ok((StatusCode::CREATED, Json(task_view(&t, None))))
}

/// `GET /api/v1/tasks`.
pub async fn list(State(state): State<AppState>, caller: Caller) -> Result<Json<Vec<TaskView>>, ApiError> {
    caller.member_name()?;
    let rows = state.store.list_tasks(caller.0.workspace(), 500).await?;
    Ok(Json(task_views(&state, &caller, rows).await?))
}

/// The API's views of tasks, each with its live run and whether the caller may drop in.
pub(crate) async fn task_views(state: &AppState, caller: &Caller, rows: Vec<TaskRow>) -> Result<Vec<TaskView>, ApiError> {
    let mut out = Vec::new();
    for t in rows {
        let live = if t.status == TaskStatus::Open { state.store.live_task_session(t.id).await? } else { None };
        let live = live.map(|s| (s.id, caller.may_drop_in(&s)));
        out.push(task_view(&t, live));
    }
    Ok(out)
}

/// `GET /api/v1/tasks/{id}`.
pub async fn show(State(state): State<AppState>, caller: Caller, Path(id): Path<String>) -> Result<Json<TaskDetail>, ApiError> {
    let t = load_task(&state, &caller, &id).await?;
    actor_for(&caller, &t)?;
    let sessions = state.store.task_sessions(t.id).await?;
    let live = sessions.iter().rev().find(|s| s.outcome.is_live()).map(|s| (s.id, caller.may_drop_in(s)));
    let notes = state.store.task_notes(t.id).await?;
    let events = state.store.task_events(t.id, 1000).await?;
    Ok(Json(TaskDetail {
        task: task_view(&t, live),
        sessions: sessions.into_iter().map(|s| session_view(&state, &caller, s)).collect(),
        notes: notes.into_iter().map(note_view).collect(),
        events: events.into_iter().map(super::events::view).collect(),
        controls: controls(&state, &caller, &t).await?,
    }))
}

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

/// `POST /api/v1/tasks/{id}/comments`.
pub async fn comment(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    ApiJson(req): ApiJson<TextBody>,
) -> Result<StatusCode, ApiError> {
    let t = load_task(&state, &caller, &id).await?;
    let (actor, session) = actor_for(&caller, &t)?;
    check_text("comment", &req.text, MAX_TEXT)?;
    state.store.comment(&t, session, &req.text, &actor).await?;
    Ok(StatusCode::CREATED)
}

async fn add_note(state: &AppState, caller: &Caller, id: &str, kind: &str, text: &str) -> Result<(StatusCode, Json<NoteView>), ApiError> {
    let t = load_task(state, caller, id).await?;
    let (actor, session) = actor_for(caller, &t)?;
    check_text(kind, text, MAX_TEXT)?;
    let note = state.store.add_note(&t, session, kind, text, &actor).await?;
    Ok((StatusCode::CREATED, Json(note_view(state.store.note(note).await?.expect("just added")))))
}

/// `POST /api/v1/tasks/{id}/blockers`.
pub async fn block(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    ApiJson(req): ApiJson<TextBody>,
) -> Result<(StatusCode, Json<NoteView>), ApiError> {
    add_note(&state, &caller, &id, "blocker", &req.text).await
}

/// `POST /api/v1/tasks/{id}/questions`: an agent asks a human.
pub async fn ask(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    ApiJson(req): ApiJson<TextBody>,
) -> Result<(StatusCode, Json<NoteView>), ApiError> {
    add_note(&state, &caller, &id, "question", &req.text).await
}

async fn load_note(state: &AppState, caller: &Caller, id: &str) -> Result<(NoteRow, TaskRow), ApiError> {
    let nid: NoteId = id.trim().parse().map_err(bad)?;
    let note = state.store.note(nid).await?.ok_or_else(|| ApiError::NotFound(format!("no blocker or question {nid}")))?;
    let task = load_task(state, caller, &note.task.to_string()).await?;
    actor_for(caller, &task)?;
    Ok((note, task))
}

/// How long to wait for an answer.
#[derive(Debug, Deserialize)]
pub struct WaitParams {
    /// Seconds to wait for the note to close (at most 3600).
    pub wait: Option<f64>,
}

/// `GET /api/v1/notes/{id}`: a blocker or question; with `wait`, returns once it is
/// resolved or answered (or the wait is over).
pub async fn note(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    Query(p): Query<WaitParams>,
) -> Result<Json<NoteView>, ApiError> {
    let (mut note, _) = load_note(&state, &caller, &id).await?;
    let wait = match p.wait {
        Some(w) if (0.0..=3600.0).contains(&w) => Duration::from_secs_f64(w),
        Some(_) => return Err(bad("wait must be between 0 and 3600 seconds")),
        None => Duration::ZERO,
    };
    let deadline = tokio::time::Instant::now() + wait;
    let mut changes = state.store.subscribe();
    while note.closed_at.is_none() {
        tokio::select! {
            _ = tokio::time::sleep_until(deadline) => break,
            c = changes.recv() => if c.is_err() { changes = state.store.subscribe(); },
        }
        note = state.store.note(note.id).await?.expect("notes are not deleted");
    }
    Ok(Json(note_view(note)))
}

/// `POST /api/v1/notes/{id}/answer`: a person answers a question (or resolves a blocker).
pub async fn answer(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    ApiJson(req): ApiJson<TextBody>,
) -> Result<Json<NoteView>, ApiError> {
    let who = caller.member_name()?;
    let (note, task) = load_note(&state, &caller, &id).await?;
    if note.kind == "question" {
        check_text("answer", &req.text, MAX_TEXT)?;
    }
    let answer = (!req.text.trim().is_empty()).then_some(req.text.as_str());
    if !state.store.close_note(&task, note.id, answer, &who).await? {
        return Err(ApiError::Conflict(format!("{} {} was already closed", note.kind, note.id)));
    }
    Ok(Json(note_view(state.store.note(note.id).await?.expect("exists"))))
}

/// `POST /api/v1/notes/{id}/resolve`: resolves a blocker (the agent that filed it, or a person).
pub async fn resolve(State(state): State<AppState>, caller: Caller, Path(id): Path<String>) -> Result<Json<NoteView>, ApiError> {
    let (note, task) = load_note(&state, &caller, &id).await?;
    let (actor, _) = actor_for(&caller, &task)?;
    if note.kind != "blocker" {
        return Err(bad("only blockers are resolved; questions are answered"));
    }
    if !state.store.close_note(&task, note.id, None, &actor).await? {
        return Err(ApiError::Conflict(format!("blocker {} was already resolved", note.id)));
    }
    Ok(Json(note_view(state.store.note(note.id).await?.expect("exists"))))
}

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
async fn stop_live(state: &AppState, t: &TaskRow, completes: Option<&str>, by: &str) -> Result<bool, ApiError> {
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

/// Which of the Sessions panel's controls the caller may use on `t`.
async fn controls(state: &AppState, caller: &Caller, t: &TaskRow) -> Result<TaskControls, ApiError> {
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
        cancel: role.is_admin() || t.created_by == *name,
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
    let who = admin(&caller)?;
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
    let who = admin(&caller)?;
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

/// `PATCH /api/v1/tasks/{id}`: changes a task before its first run (its base branch),
/// checked on the device that has its repository. Who filed it, or an admin.
pub async fn update(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    ApiJson(req): ApiJson<UpdateTask>,
) -> Result<Json<TaskView>, ApiError> {
    let who = caller.member_name()?;
    let t = load_task(&state, &caller, &id).await?;
    if !controls(&state, &caller, &t).await?.cancel {
        return Err(ApiError::Forbidden(format!("only {}, who filed the task, or an admin can change it", t.created_by)));
    }
    let Some(base) = req.base else { return Ok(Json(task_view(&t, None))) };
    if !drover_core::branch::is_valid_branch(&base) {
        return Err(bad(format!("`{}` is not a valid branch name for the base branch", base.chars().take(80).collect::<String>())));
    }
    check_base_on_devices(&state, &t, &base).await?;
    match state.store.set_task_base(&t, &base, &who).await? {
        Ok(()) => {}
        Err(BaseRefused::Finished) => return Err(ApiError::Conflict(format!("task {} is already {}", t.id, t.status.as_str()))),
        Err(BaseRefused::Started) => {
            return Err(ApiError::Conflict(format!(
                "a run of task {} has started: its branch was made from `{}`; file a new task for another base",
                t.id,
                t.repo_base.as_deref().unwrap_or("the checked-out branch")
            )))
        }
    }
    Ok(Json(task_view(&state.store.task(t.id).await?.expect("exists"), None)))
}

/// Asks the devices that may run the task (its sandbox's, or every one with its
/// repository) whether `base` exists in their clone; a device that is offline is
/// skipped (the run finds out).
async fn check_base_on_devices(state: &AppState, t: &TaskRow, base: &str) -> Result<(), ApiError> {
    let repos = state.store.list_repos(t.workspace).await?;
    let clones = repos.into_iter().find(|r| r.id == t.repo).map(|r| r.devices).unwrap_or_default();
    for (device_name, path) in clones {
        let Some(device) = state.store.device_by_name(t.workspace, &device_name).await? else { continue };
        if t.sandbox_device.is_some_and(|d| d != device.id) {
            continue;
        }
        if let Ok(Some(problem)) = state.devices.check_repo(device.id, path, Some(base.to_string()), REPO_CHECK_TIMEOUT).await {
            return Err(bad(format!("device `{device_name}` says: {problem}")));
        }
    }
    Ok(())
}

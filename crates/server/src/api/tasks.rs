//! Tasks: filing, listing, reading and changing them, and the helpers the other task
//! routes share (who is calling, loading a task, its view).

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use drover_api::{CreateTask, TaskDetail, TaskView, TurnView, UpdateTask};
use drover_core::permissions::{task_allowed, workspace_allowed, Role, TaskAction, WorkspaceAction};
use drover_core::task::TaskStatus;
use drover_core::TaskId;
use drover_store::{BaseRefused, NewTask, Principal, TaskRow};

use super::notes::note_view;
use super::sessions::view as session_view;
use super::task_controls::controls;
use super::workflow::{stage_specs, stage_view, workspace_stages};
use super::ApiJson;
use crate::auth::Caller;
use crate::{ApiError, AppState};

/// Longest task body accepted.
const MAX_BODY: usize = 64 * 1024;

/// Longest note, comment or answer accepted.
pub(super) const MAX_TEXT: usize = 16 * 1024;

pub(super) fn bad(e: impl std::fmt::Display) -> ApiError {
    ApiError::BadRequest(e.to_string())
}

pub(super) fn check_text(what: &str, text: &str, max: usize) -> Result<(), ApiError> {
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

pub(super) fn member(caller: &Caller) -> Result<(drover_core::MemberId, String, Role), ApiError> {
    match &caller.0 {
        Principal::Member { id, name, role, .. } => Ok((*id, name.clone(), *role)),
        _ => Err(caller.member_name().expect_err("not a member")),
    }
}

pub(super) fn admin(caller: &Caller) -> Result<String, ApiError> {
    let (_, name, role) = member(caller)?;
    if !workspace_allowed(role, WorkspaceAction::Administer) {
        return Err(ApiError::Forbidden("only a workspace owner or admin can do this".into()));
    }
    Ok(name)
}

pub(super) async fn load_task(state: &AppState, caller: &Caller, id: &str) -> Result<TaskRow, ApiError> {
    let tid: TaskId = id.trim().parse().map_err(bad)?;
    match state.store.task(tid).await? {
        Some(t) if t.workspace == caller.0.workspace() => Ok(t),
        _ => Err(ApiError::NotFound(format!("no task {tid}: `drover task list` shows the tasks there are"))),
    }
}

/// Members may act on any task; an agent only on its own session's task.
pub(super) fn actor_for(caller: &Caller, task: &TaskRow) -> Result<(String, Option<drover_core::SessionId>), ApiError> {
    match &caller.0 {
        Principal::Member { name, .. } => Ok((name.clone(), None)),
        Principal::Agent { task: Some(t), session, name, .. } if *t == task.id => Ok((format!("agent {name}"), Some(*session))),
        Principal::Agent { .. } => Err(ApiError::Forbidden("an agent can only act on the task of its own session".into())),
        Principal::Device { .. } => Err(ApiError::Forbidden("device credentials can only open the device link".into())),
    }
}

/// The API's view of a task; `live` is its live run and whether the caller may drop in.
pub(super) fn task_view(t: &TaskRow, live: Option<(drover_core::SessionId, bool)>) -> TaskView {
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

/// How long `repo add` waits for the device to check its clone.
pub(super) const REPO_CHECK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(15);

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
    // Read again after its notes: a question listed as open is then also in the turn.
    let t = state.store.task(t.id).await?.unwrap_or(t);
    let allow_rules = state.store.task_allow_rules(t.id).await?;
    let why = super::why::why_line(&state, &t, &sessions, &notes).await?;
    Ok(Json(TaskDetail {
        task: task_view(&t, live),
        sessions: sessions.into_iter().map(|s| session_view(&state, &caller, s)).collect(),
        notes: notes.into_iter().map(note_view).collect(),
        events: events.into_iter().map(|e| super::events::view_for(&caller, e)).collect(),
        controls: controls(&state, &caller, &t).await?,
        allow_rules,
        why,
    }))
}

/// `PATCH /api/v1/tasks/{id}`: changes a task before its first run (its base branch),
/// checked on the device that has its repository. Who filed it, or an admin.
pub async fn update(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    ApiJson(req): ApiJson<UpdateTask>,
) -> Result<Json<TaskView>, ApiError> {
    let (_, who, role) = member(&caller)?;
    let t = load_task(&state, &caller, &id).await?;
    if !task_allowed(role, t.created_by == who, TaskAction::Change) {
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

//! The workspace's workflow (its stages and who owns each), repositories and agents.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use drover_api::{AddRepo, AgentView, CreateAgent, RepoAdded, RepoView, StageView, WorkflowView};
use drover_core::task::{check_workflow, merges_by_default, DEFAULT_STAGES};
use drover_core::WorkspaceId;
use drover_store::StageSpec;

use super::tasks::{admin, bad, member, REPO_CHECK_TIMEOUT};
use super::ApiJson;
use crate::auth::Caller;
use crate::devices::NoAnswer;
use crate::{ApiError, AppState};

pub(super) fn stage_view(s: &StageSpec) -> StageView {
    StageView { stage: s.stage.clone(), assignee: s.assignee.clone(), merge: Some(s.merge), activate: Some(s.activate) }
}

/// Checks stages given by a caller (names, agents that exist) and fills in what they
/// leave out: `agent` for stages with no assignee, and merging for a stage called `merge`.
pub(super) async fn stage_specs(
    state: &AppState,
    ws: WorkspaceId,
    stages: Vec<StageView>,
    agent: Option<&str>,
) -> Result<Vec<StageSpec>, ApiError> {
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
pub(super) async fn workspace_stages(state: &AppState, ws: WorkspaceId) -> Result<Vec<StageSpec>, ApiError> {
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

//! `GET /api/v1/agents/{name}` and `GET /api/v1/repos/{name}`: an agent's and a
//! repository's pages: their runs (live ones first), their tasks and their spend.

use axum::extract::{Path, State};
use axum::Json;
use drover_api::{AgentPage, PageSpend, RepoPage, RepoView, SessionView, PAGE_SESSIONS};
use drover_store::SessionRow;

use super::sessions::view as session_view;
use super::tasks::task_views;
use super::workflow::agent_view;
use crate::auth::Caller;
use crate::{ApiError, AppState};

/// The most tasks a page lists.
const PAGE_TASKS: i64 = 200;

/// The runs to show (one more was asked for, to tell whether there are more).
fn sessions(state: &AppState, caller: &Caller, mut rows: Vec<SessionRow>) -> (Vec<SessionView>, bool) {
    let more = rows.len() > PAGE_SESSIONS;
    rows.truncate(PAGE_SESSIONS);
    (rows.into_iter().map(|r| session_view(state, caller, r)).collect(), more)
}

/// A cost sum as the API gives it (as a task's is).
fn spend(cost: Option<Option<u64>>) -> PageSpend {
    PageSpend { cost_usd: cost.flatten().map(drover_core::spend::usd), cost_unknown: matches!(cost, Some(None)) }
}

/// `GET /api/v1/agents/{name}`: the agent, its runs, the tasks it is pinned to or has
/// run, and what its runs cost. Members only.
pub async fn agent(State(state): State<AppState>, caller: Caller, Path(name): Path<String>) -> Result<Json<AgentPage>, ApiError> {
    caller.member_name()?;
    let ws = caller.0.workspace();
    let a = state
        .store
        .agent_by_name(ws, &name)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("no agent named `{name}`: `drover agent list` shows the agents there are")))?;
    let runs = state.store.agent_sessions(a.id, PAGE_SESSIONS as i64 + 1).await?;
    let (sessions, more_sessions) = sessions(&state, &caller, runs);
    let tasks = task_views(&state, &caller, state.store.agent_tasks(ws, &a, PAGE_TASKS).await?).await?;
    let spend = spend(state.store.agent_spend(a.id).await?);
    Ok(Json(AgentPage { agent: agent_view(a), sessions, more_sessions, tasks, spend }))
}

/// `GET /api/v1/repos/{name}`: the repository with the devices that have it, its runs,
/// its tasks, and what its runs cost. Members only.
pub async fn repo(State(state): State<AppState>, caller: Caller, Path(name): Path<String>) -> Result<Json<RepoPage>, ApiError> {
    caller.member_name()?;
    let r =
        state.store.list_repos(caller.0.workspace()).await?.into_iter().find(|r| r.name == name).ok_or_else(|| {
            ApiError::NotFound(format!("no repository named `{name}`: `drover repo list` shows the repositories there are"))
        })?;
    let runs = state.store.repo_sessions(r.id, PAGE_SESSIONS as i64 + 1).await?;
    let (sessions, more_sessions) = sessions(&state, &caller, runs);
    let tasks = task_views(&state, &caller, state.store.repo_tasks(r.id, PAGE_TASKS).await?).await?;
    let spend = spend(state.store.repo_spend(r.id).await?);
    let repo = RepoView { name: r.name, devices: r.devices, base: r.base };
    Ok(Json(RepoPage { repo, sessions, more_sessions, tasks, spend }))
}

//! The workspace's spend (by agent, model and day) and spend caps: the workspace's
//! monthly cap and a task's lifetime cap (owners and admins set them).

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::Json;
use drover_api::{SpendCap, SpendReport, SpendRowView};
use drover_core::permissions::WorkspaceAction;
use drover_core::spend::{nano_from_usd, usd};
use drover_store::{SpendKey, SpendRow};
use serde::Deserialize;

use super::ApiJson;
use crate::auth::Caller;
use crate::{ApiError, AppState};

/// Parameters of the spend view.
#[derive(Debug, Deserialize)]
pub struct SpendParams {
    /// Days back from today (default 30, at most 366).
    pub days: Option<u32>,
}

fn row(r: SpendRow) -> SpendRowView {
    SpendRowView { key: r.key, usd: usd(r.cost), unknown: r.unpriced > 0, turns: r.turns, tokens: r.tokens, runs: r.runs }
}

/// `GET /api/v1/spend`.
pub async fn report(State(state): State<AppState>, caller: Caller, Query(p): Query<SpendParams>) -> Result<Json<SpendReport>, ApiError> {
    caller.require(WorkspaceAction::Work)?;
    let days = p.days.unwrap_or(30);
    if !(1..=366).contains(&days) {
        return Err(ApiError::BadRequest("days must be between 1 and 366".into()));
    }
    let ws = caller.0.workspace();
    let since = drover_store::format_time(
        (chrono::Utc::now() - chrono::Duration::days(days.into()) + chrono::Duration::days(1))
            .date_naive()
            .and_hms_opt(0, 0, 0)
            .expect("midnight")
            .and_utc(),
    );
    let month = drover_store::month_start(&drover_store::now());
    let month_usd = state.store.spend_by(ws, &month, SpendKey::Day).await?.iter().map(|r| usd(r.cost)).sum();
    Ok(Json(SpendReport {
        cap_usd: state.store.workspace_spend_cap(ws).await?.map(usd),
        month_usd,
        by_agent: state.store.spend_by(ws, &since, SpendKey::Agent).await?.into_iter().map(row).collect(),
        by_model: state.store.spend_by(ws, &since, SpendKey::Model).await?.into_iter().map(row).collect(),
        by_day: state.store.spend_by(ws, &since, SpendKey::Day).await?.into_iter().map(row).collect(),
        since,
    }))
}

fn cap(usd: Option<f64>) -> Result<Option<u64>, ApiError> {
    usd.map(|u| nano_from_usd(u).ok_or_else(|| ApiError::BadRequest("a cap is an amount in USD, 0 or more".into()))).transpose()
}

/// `PUT /api/v1/spend/cap` (owners and admins): the workspace's monthly cap.
pub async fn set_cap(State(state): State<AppState>, caller: Caller, ApiJson(req): ApiJson<SpendCap>) -> Result<StatusCode, ApiError> {
    caller.require(WorkspaceAction::Administer)?;
    state.store.set_workspace_spend_cap(caller.0.workspace(), cap(req.usd)?).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `PUT /api/v1/tasks/{id}/spend-cap` (owners and admins): a task's lifetime cap.
pub async fn set_task_cap(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    ApiJson(req): ApiJson<SpendCap>,
) -> Result<StatusCode, ApiError> {
    caller.require(WorkspaceAction::Administer)?;
    let tid: drover_core::TaskId = id.trim().parse().map_err(|e: drover_core::IdError| ApiError::BadRequest(e.to_string()))?;
    match state.store.task(tid).await? {
        Some(t) if t.workspace == caller.0.workspace() => {}
        _ => return Err(ApiError::NotFound(format!("no task {tid}"))),
    }
    state.store.set_task_spend_cap(tid, cap(req.usd)?).await?;
    Ok(StatusCode::NO_CONTENT)
}

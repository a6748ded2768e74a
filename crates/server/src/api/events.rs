//! The activity record: `GET /api/v1/events`, `GET /api/v1/sessions/{id}/events` and
//! the audit export.

use axum::extract::{Path, Query, State};
use axum::response::IntoResponse;
use axum::Json;
use drover_api::EventView;
use drover_core::activity::EventKind;
use drover_core::permissions::{workspace_allowed, WorkspaceAction};
use drover_store::EventRow;
use serde::Deserialize;

use super::sessions::load_session;
use crate::auth::Caller;
use crate::{ApiError, AppState};

/// Paging of an event list.
#[derive(Debug, Deserialize)]
pub struct EventParams {
    /// Only events after this sequence number.
    #[serde(default)]
    pub after: i64,
    /// Newest first instead, before this sequence number (for a feed read backwards).
    #[serde(default)]
    pub newest: bool,
    /// With `newest`: only events before this sequence number.
    pub before: Option<i64>,
    /// At most this many (default 200, at most 1000).
    pub limit: Option<i64>,
}

/// The view of a stored event `caller` may have: what was typed into a session and its
/// full command line only for those who may drop in to it.
pub fn view_for(caller: &Caller, mut e: EventRow) -> EventView {
    if e.session.is_some() {
        let operator = e.session_operator.as_deref().and_then(|o| o.parse().ok());
        if !caller.may_drop_in_run(operator) {
            drover_core::activity::need_to_know::conceal(&e.kind, &mut e.detail);
        }
    }
    view(e)
}

/// The API's view of a stored event, whole (the audit export, for owners and admins).
pub fn view(e: EventRow) -> EventView {
    EventView {
        seq: e.seq,
        label: EventKind::parse(&e.kind).map(|k| k.label().to_string()).unwrap_or_else(|| e.kind.clone()),
        session: e.session.and_then(|s| s.parse().ok()),
        task: e.task,
        session_title: e.session_title,
        task_title: e.task_title,
        id: e.id,
        kind: e.kind,
        actor: e.actor,
        detail: e.detail,
        at: e.at,
    }
}

/// The workspace's activity feed, oldest first (or newest first with `newest`).
pub async fn list(State(state): State<AppState>, caller: Caller, Query(p): Query<EventParams>) -> Result<Json<Vec<EventView>>, ApiError> {
    caller.member_name()?;
    let limit = p.limit.unwrap_or(200).clamp(1, 1000);
    let rows = if p.newest {
        state.store.list_events_before(caller.0.workspace(), p.before, limit).await?
    } else {
        state.store.list_events(caller.0.workspace(), None, p.after, limit).await?
    };
    Ok(Json(rows.into_iter().map(|e| view_for(&caller, e)).collect()))
}

/// Parameters of the audit export.
#[derive(Debug, Deserialize)]
pub struct ExportParams {
    /// From this time on (RFC 3339, or a date: midnight UTC).
    pub since: String,
    /// Up to this time (exclusive), if given.
    pub until: Option<String>,
}

/// A time given as RFC 3339 or a date, in the stored format.
fn time_param(name: &str, v: &str) -> Result<String, ApiError> {
    let t = chrono::DateTime::parse_from_rfc3339(v.trim())
        .map(|t| t.with_timezone(&chrono::Utc))
        .or_else(|_| chrono::NaiveDate::parse_from_str(v.trim(), "%Y-%m-%d").map(|d| d.and_hms_opt(0, 0, 0).expect("midnight").and_utc()))
        .map_err(|_| ApiError::BadRequest(format!("`{name}` must be a time (2026-11-30T09:00:00Z) or a date (2026-11-30)")))?;
    Ok(drover_store::format_time(t))
}

/// Events per page of the export.
const EXPORT_PAGE: i64 = 1000;

/// `GET /api/v1/audit/export?since=…[&until=…]` (owners and admins): every event in the
/// window as JSON lines, oldest first, streamed page by page.
pub async fn export(State(state): State<AppState>, caller: Caller, Query(p): Query<ExportParams>) -> Result<impl IntoResponse, ApiError> {
    let workspace = caller.0.workspace();
    match &caller.0 {
        drover_store::Principal::Member { role, .. } if workspace_allowed(*role, WorkspaceAction::Administer) => {}
        drover_store::Principal::Member { .. } => {
            return Err(ApiError::Forbidden("only a workspace owner or admin can export the audit trail".into()))
        }
        _ => return Err(caller.member_name().expect_err("not a member")),
    }
    let since = time_param("since", &p.since)?;
    let until = p.until.as_deref().map(|u| time_param("until", u)).transpose()?;
    let pages = futures_util::stream::try_unfold(Some(0i64), move |after| {
        let (state, since, until) = (state.clone(), since.clone(), until.clone());
        async move {
            let Some(after) = after else { return Ok(None) };
            let rows = state.store.events_between(workspace, &since, until.as_deref(), after, EXPORT_PAGE).await?;
            let next = (rows.len() as i64 == EXPORT_PAGE).then(|| rows.last().map(|r| r.seq)).flatten();
            let mut chunk = String::new();
            for r in rows {
                chunk.push_str(&serde_json::to_string(&view(r)).expect("serialises"));
                chunk.push('\n');
            }
            Ok::<_, drover_store::StoreError>(Some((axum::body::Bytes::from(chunk), next)))
        }
    });
    Ok(([(axum::http::header::CONTENT_TYPE, "application/x-ndjson")], axum::body::Body::from_stream(pages)))
}

/// One session's events, oldest first.
pub async fn for_session(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    Query(p): Query<EventParams>,
) -> Result<Json<Vec<EventView>>, ApiError> {
    let row = load_session(&state, &caller, &id).await?;
    let limit = p.limit.unwrap_or(200).clamp(1, 1000);
    let rows = state.store.list_events(row.workspace, Some(row.id), p.after, limit).await?;
    Ok(Json(rows.into_iter().map(|e| view_for(&caller, e)).collect()))
}

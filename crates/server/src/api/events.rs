//! The activity record: `GET /api/v1/events` and `GET /api/v1/sessions/{id}/events`.

use axum::extract::{Path, Query, State};
use axum::Json;
use drover_core::activity::EventKind;
use drover_protocol::api::EventView;
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

/// The API's view of a stored event.
pub fn view(e: EventRow) -> EventView {
    EventView {
        seq: e.seq,
        label: EventKind::parse(&e.kind).map(|k| k.label().to_string()).unwrap_or_else(|| e.kind.clone()),
        session: e.session.and_then(|s| s.parse().ok()),
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
    Ok(Json(rows.into_iter().map(view).collect()))
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
    Ok(Json(rows.into_iter().map(view).collect()))
}

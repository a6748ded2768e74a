//! `GET /api/v1/stream`: live updates for the web app as server-sent events.
//!
//! Each activity event goes out as `event: activity` with its sequence number as the
//! SSE id, so a browser that reconnects (it sends `Last-Event-ID`) misses nothing; a
//! change without an event (a session started running) goes out as `event: changed`; a
//! subscriber that fell too far behind gets `event: resync` and reloads what it shows.

use std::collections::VecDeque;
use std::convert::Infallible;

use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use drover_api::StreamUpdate;
use drover_core::{SessionId, WorkspaceId};
use futures_util::Stream;
use serde::{Deserialize, Serialize};
use tokio::sync::broadcast::error::RecvError;

use crate::auth::Caller;
use crate::{ApiError, AppState};

/// Events sent per database read.
const BATCH: i64 = 200;

/// Where to start.
#[derive(Debug, Deserialize)]
pub struct StreamParams {
    /// Events after this sequence number (default: only new ones).
    pub since: Option<i64>,
}

struct Feed {
    state: AppState,
    caller: Caller,
    workspace: WorkspaceId,
    last: i64,
    rx: tokio::sync::broadcast::Receiver<drover_store::Change>,
    pending: VecDeque<Event>,
}

impl Feed {
    /// Queues the events after `last`; false if the database failed.
    async fn fill(&mut self, session: Option<SessionId>) -> bool {
        let store = &self.state.store;
        let (events, running) =
            match (store.list_events(self.workspace, None, self.last, BATCH).await, store.count_live_sessions(self.workspace).await) {
                (Ok(e), Ok(r)) => (e, r),
                (Err(e), _) | (_, Err(e)) => {
                    tracing::warn!("live updates: {e}");
                    return false;
                }
            };
        if events.is_empty() {
            self.pending.push_back(json_event("changed", &drover_api::StreamChanged { session, running }));
        }
        for e in events {
            self.last = e.seq;
            let seq = e.seq;
            let update = StreamUpdate { event: super::events::view_for(&self.caller, e), running };
            self.pending.push_back(json_event("activity", &update).id(seq.to_string()));
        }
        true
    }
}

fn json_event<T: Serialize>(name: &str, value: &T) -> Event {
    Event::default().event(name).data(serde_json::to_string(value).expect("serialises"))
}

/// Streams the workspace's live updates.
pub async fn stream(
    State(state): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    Query(p): Query<StreamParams>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    caller.member_name()?;
    let workspace = caller.0.workspace();
    let resume = headers.get("last-event-id").and_then(|v| v.to_str().ok()).and_then(|v| v.trim().parse::<i64>().ok()).or(p.since);
    let rx = state.store.subscribe();
    let last = match resume {
        Some(seq) => seq.max(0),
        None => state.store.latest_event_seq(workspace).await?,
    };
    let mut feed = Feed { state, caller, workspace, last, rx, pending: VecDeque::new() };
    // Catch up at once (a resumed stream), then say how many run now.
    if !feed.fill(None).await {
        return Err(ApiError::Internal("the database failed; see the server log".into()));
    }
    let stream = futures_util::stream::unfold(feed, |mut feed| async move {
        loop {
            if let Some(e) = feed.pending.pop_front() {
                return Some((Ok(e), feed));
            }
            match feed.rx.recv().await {
                Ok(change) if change.workspace != feed.workspace => continue,
                Ok(change) => {
                    if !feed.fill(change.session).await {
                        return None;
                    }
                }
                Err(RecvError::Lagged(_)) => {
                    feed.pending.push_back(Event::default().event("resync").data("{}"));
                    if !feed.fill(None).await {
                        return None;
                    }
                }
                Err(RecvError::Closed) => return None,
            }
        }
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}

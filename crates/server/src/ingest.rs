//! Applies, in order, the events of a device's link that must follow its output (a
//! session's end, a resize): each waits until the output read before it is stored. An
//! end behind output that will not be stored on this link is left for the device to
//! report again; a resize is recorded even so (a mark carries its own time).
//! The output itself goes from the link straight to the writer (`crate::writer`). What
//! ingest needs from the store is the [`IngestStore`] seam (`ingest/store.rs`).

use std::future::Future;
use std::time::Duration;

use drover_core::outcome::Ending;
use drover_core::{DeviceId, RunEnd, SessionId};
use drover_protocol::device::ServerMessage;
use drover_protocol::viewer::ViewerEvent;
use drover_store::{Mark, SessionRow, StoreError};
use tokio::sync::mpsc;
use tracing::Instrument;

use crate::writer::Link;
use crate::AppState;

/// Events queued before the device link waits.
pub const INGEST_QUEUE: usize = 1024;

mod store;
pub(crate) use store::IngestStore;

#[cfg(test)]
mod tests;

/// An event of the device link that follows its output.
#[derive(Debug)]
pub enum Item {
    /// The terminal was resized.
    Resized {
        /// Whose terminal.
        session: SessionId,
        /// When, in µs since the run started: where the resize mark goes in its recording.
        t_micros: u64,
        /// The new width, in columns.
        cols: u16,
        /// The new height, in rows.
        rows: u16,
    },
    /// A session ended.
    Ended {
        /// Which session ended.
        session: SessionId,
        /// How it ended, as its device reported.
        report: EndReport,
    },
}

impl Item {
    /// The session it is about.
    fn session(&self) -> SessionId {
        match self {
            Item::Resized { session, .. } | Item::Ended { session, .. } => *session,
        }
    }
}

/// Runs until the device link drops its sender.
pub(crate) async fn run(state: AppState, link: Link, device_name: String, mut rx: mpsc::Receiver<Item>) {
    while let Some(item) = rx.recv().await {
        let stored = state.output.stored(&state, link).await;
        let span = tracing::info_span!("session", session = %item.session());
        apply(&state, link.device, &device_name, item, stored).instrument(span).await;
    }
}

/// Applies `item`; `stored` says whether the output before it is stored (when not, the
/// link was closed and the device reports its ends again when it reconnects).
async fn apply(state: &AppState, device: DeviceId, device_name: &str, item: Item, stored: bool) {
    match item {
        Item::Resized { session, t_micros, cols, rows } => {
            record_resize(&state.store, session, t_micros, cols, rows).await;
            if let Some(hub) = state.hubs.get(session) {
                hub.sized(cols, rows);
            }
        }
        Item::Ended { session, .. } if !stored => {
            tracing::info!(%session, "not recording an end behind output that was not stored; the device reports it again");
        }
        Item::Ended { session, report } => {
            // The device keeps the session until it is released: only release once the
            // end is stored. A failure is retried; if it persists, the device reports
            // the end again when it next connects.
            if !retried(session, END_BACKOFF, || end_session(state, device, device_name, session, &report)).await {
                return;
            }
            let _ = state.devices.send(device, &ServerMessage::Release { session }).await;
        }
    }
}

/// Records a resize: a mark in the session's recording (`r`, `COLSxROWS`) and the size in
/// its row, where viewers on other replicas learn it (`cluster::mirror`). A failure is
/// logged: the next resize puts it right.
async fn record_resize(store: &impl IngestStore, session: SessionId, t_micros: u64, cols: u16, rows: u16) {
    let mark = Mark { t_micros, kind: "r".into(), data: format!("{cols}x{rows}") };
    if let Err(e) = store.add_mark(session, &mark).await {
        tracing::warn!("recording resize: {e}");
    }
    if let Err(e) = store.set_size(session, cols, rows).await {
        tracing::warn!("recording the terminal's size: {e}");
    }
}

/// Tries at storing a session's end before waiting for the device to report it again.
const END_ATTEMPTS: u32 = 5;

/// The unit of the wait after a failed try at storing an end: 2, 4, 8, … times this.
const END_BACKOFF: Duration = Duration::from_millis(100);

/// Runs `attempt` until it succeeds, at most [`END_ATTEMPTS`] times, waiting 2, 4, 8, …
/// times `backoff` between tries; false if every try failed.
async fn retried<F, Fut>(session: SessionId, backoff: Duration, mut attempt: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<(), StoreError>>,
{
    let mut tries = 0;
    while let Err(e) = attempt().await {
        tries += 1;
        if tries == END_ATTEMPTS {
            tracing::error!(%session, "recording the end failed {tries} times, keeping the session until the device reconnects: {e}");
            return false;
        }
        tracing::warn!(%session, "recording the end failed (retrying): {e}");
        tokio::time::sleep(backoff * (1 << tries)).await;
    }
    true
}

/// How a session ended, as reported.
#[derive(Debug, Clone)]
pub struct EndReport {
    /// What its reporter saw happen: the evidence core decides the outcome from.
    pub end: RunEnd,
    /// When its program started, if known (kept if already recorded).
    pub started_at: Option<String>,
    /// When it ended (RFC 3339).
    pub ended_at: String,
    /// How much output it wrote in all, as its device counted.
    pub final_offset: u64,
}

impl EndReport {
    /// An end observed now by the server itself.
    pub fn now(end: RunEnd, final_offset: u64) -> EndReport {
        EndReport { end, started_at: None, ended_at: drover_store::now(), final_offset }
    }
}

/// Applies a reported end: stores it as core decides it, tells viewers, follows up its
/// task.
pub async fn end_session(
    state: &AppState,
    device: DeviceId,
    device_name: &str,
    session: SessionId,
    report: &EndReport,
) -> Result<(), StoreError> {
    let Some((row, ending)) = store_end(&state.store, device, device_name, session, report).await? else { return Ok(()) };
    state.metrics.session_ended(ending.outcome);
    if let Some(hub) = state.hubs.remove(session) {
        hub.end(ViewerEvent::Ended { outcome: ending.outcome, exit_code: ending.exit_code, reason: Some(ending.reason.clone()) });
    }
    crate::tasks::after_end(state, &row, &ending, report.end.fault()).await
}

/// Stores the end `report`ed by `device` (named `device_name`) of `session`: the store
/// decides its outcome (core's `decide_end`) under its write lock. Returns the session
/// as it was read before, with the ending stored; None when the session is not that
/// device's or had already ended.
async fn store_end(
    store: &impl IngestStore,
    device: DeviceId,
    device_name: &str,
    session: SessionId,
    report: &EndReport,
) -> Result<Option<(SessionRow, Ending)>, StoreError> {
    let Some(row) = store.session(session).await? else { return Ok(None) };
    if row.device != device {
        return Ok(None);
    }
    let normalise = |t: &str| drover_store::parse_time(t).map(drover_store::format_time);
    let ended_at = normalise(&report.ended_at).unwrap_or_else(drover_store::now);
    let started_at = report.started_at.as_deref().and_then(normalise);
    let times = drover_store::RunTimes { started_at: started_at.as_deref(), ended_at: &ended_at };
    let reporter = format!("device {device_name}");
    let ending = store.end_session(session, &report.end, times, report.final_offset, &reporter).await?;
    Ok(ending.map(|e| (row, e)))
}

//! Applies, in order, the events of a device's link that must follow its output (a
//! session's end, a resize): each waits until the output read before it is stored. An
//! end behind output that will not be stored on this link is left for the device to
//! report again; a resize is recorded even so (a mark carries its own time).
//! The output itself goes from the link straight to the writer (`crate::writer`).

use drover_core::outcome::on_end;
use drover_core::{DeviceId, RunEnd, SessionId};
use drover_protocol::device::ServerMessage;
use drover_protocol::viewer::ViewerEvent;
use drover_store::Mark;
use tokio::sync::mpsc;

use crate::writer::Link;
use crate::AppState;

/// Events queued before the device link waits.
pub const INGEST_QUEUE: usize = 1024;

/// An event of the device link that follows its output.
#[derive(Debug)]
pub enum Item {
    /// The terminal was resized.
    Resized {
        /// The session.
        session: SessionId,
        /// µs since start.
        t_micros: u64,
        /// Columns.
        cols: u16,
        /// Rows.
        rows: u16,
    },
    /// A session ended.
    Ended {
        /// The session.
        session: SessionId,
        /// How it ended.
        report: EndReport,
    },
}

/// Runs until the device link drops its sender.
pub(crate) async fn run(state: AppState, link: Link, device_name: String, mut rx: mpsc::Receiver<Item>) {
    while let Some(item) = rx.recv().await {
        let stored = state.output.stored(&state, link).await;
        apply(&state, link.device, &device_name, item, stored).await;
    }
}

/// Applies `item`; `stored` says whether the output before it is stored (when not, the
/// link was closed and the device reports its ends again when it reconnects).
async fn apply(state: &AppState, device: DeviceId, device_name: &str, item: Item, stored: bool) {
    match item {
        Item::Resized { session, t_micros, cols, rows } => {
            let mark = Mark { t_micros, kind: "r".into(), data: format!("{cols}x{rows}") };
            if let Err(e) = state.store.add_mark(session, &mark).await {
                tracing::warn!("recording resize: {e}");
            }
            // The row holds the size the program has now: viewers on other replicas
            // learn it from there (`cluster::mirror`), this replica's from its hub.
            if let Err(e) = state.store.set_size(session, cols, rows).await {
                tracing::warn!("recording the terminal's size: {e}");
            }
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
            let mut attempt = 0;
            while let Err(e) = end_session(state, device, device_name, session, &report).await {
                attempt += 1;
                if attempt == END_ATTEMPTS {
                    tracing::error!(%session, "recording the end failed {attempt} times, keeping the session until the device reconnects: {e}");
                    return;
                }
                tracing::warn!(%session, "recording the end failed (retrying): {e}");
                tokio::time::sleep(std::time::Duration::from_millis(100 << attempt)).await;
            }
            let _ = state.devices.send(device, &ServerMessage::Release { session }).await;
        }
    }
}

/// Tries at storing a session's end before waiting for the device to report it again.
const END_ATTEMPTS: u32 = 5;

/// How a session ended, as reported.
#[derive(Debug, Clone)]
pub struct EndReport {
    /// How.
    pub end: RunEnd,
    /// When its program started, if known.
    pub started_at: Option<String>,
    /// When it ended (RFC 3339).
    pub ended_at: String,
    /// Output length at the end.
    pub final_offset: u64,
}

impl EndReport {
    /// An end observed now by the server itself.
    pub fn now(end: RunEnd, final_offset: u64) -> EndReport {
        EndReport { end, started_at: None, ended_at: drover_store::now(), final_offset }
    }
}

/// Applies a reported end: decides the outcome, stores it with its event, tells viewers.
pub async fn end_session(
    state: &AppState,
    device: DeviceId,
    device_name: &str,
    session: SessionId,
    report: &EndReport,
) -> Result<(), drover_store::StoreError> {
    let Some(row) = state.store.session(session).await? else { return Ok(()) };
    if row.device != device {
        return Ok(());
    }
    let ending = match &row.handed_off {
        Some(why) => drover_core::outcome::on_completed_end(row.outcome, &report.end, why),
        None => on_end(row.outcome, &report.end),
    };
    let Ok(mut ending) = ending else {
        return Ok(());
    };
    // A stop asked for by a rule (a spend cap), not a person, ends with the rule's reason.
    if let (true, Some(reason)) = (ending.killed, &row.stop_reason) {
        ending.reason = reason.clone();
    }
    let actor = match (&ending.killed, &row.stop_requested_by) {
        (true, Some(by)) => by.clone(),
        _ => format!("device {device_name}"),
    };
    let normalise = |t: &str| drover_store::parse_time(t).map(drover_store::format_time);
    let ended_at = normalise(&report.ended_at).unwrap_or_else(drover_store::now);
    let started_at = report.started_at.as_deref().and_then(normalise);
    let times = drover_store::RunTimes { started_at: started_at.as_deref(), ended_at: &ended_at };
    let Some(ending) = state.store.end_session(session, &ending, times, report.final_offset, &actor).await? else {
        return Ok(());
    };
    if let Some(hub) = state.hubs.remove(session) {
        hub.end(ViewerEvent::Ended { outcome: ending.outcome, exit_code: ending.exit_code, reason: Some(ending.reason.clone()) });
    }
    crate::tasks::after_end(state, &row, &ending, report.end.fault()).await
}

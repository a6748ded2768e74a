//! Stores what a device sends, in order: output is batched into one transaction at a
//! time and acknowledged by offset only after the commit; events that must follow their
//! output (a session's end, a resize) are applied after the output before them is stored.

use std::time::Duration;

use drover_core::outcome::on_end;
use drover_core::{DeviceId, RunEnd, SessionId};
use drover_protocol::device::ServerMessage;
use drover_protocol::viewer::ViewerEvent;
use drover_store::{Mark, OutputChunk};
use tokio::sync::mpsc;

use crate::AppState;

/// Largest batch.
const BATCH_BYTES: usize = 4 * 1024 * 1024;
/// Items queued before the device link waits.
pub const INGEST_QUEUE: usize = 1024;

/// What the device link hands the ingest task.
#[derive(Debug)]
pub enum Item {
    /// Output to store.
    Output(OutputChunk),
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
pub async fn run(state: AppState, device: DeviceId, device_name: String, mut rx: mpsc::Receiver<Item>) {
    let mut pending: Option<Item> = None;
    loop {
        let first = match pending.take() {
            Some(i) => i,
            None => match rx.recv().await {
                Some(i) => i,
                None => return,
            },
        };
        let Item::Output(chunk) = first else {
            apply(&state, device, &device_name, first).await;
            continue;
        };
        // Whatever else is already queued joins the batch; nothing waits for more here
        // (the writer groups batches from every link, see `writer`).
        let mut batch = vec![chunk];
        let mut bytes = batch[0].data.len();
        while bytes < BATCH_BYTES {
            match rx.try_recv() {
                Ok(Item::Output(c)) => {
                    bytes += c.data.len();
                    batch.push(c);
                }
                Ok(other) => {
                    pending = Some(other);
                    break;
                }
                Err(_) => break,
            }
        }
        store_batch(&state, device, batch).await;
    }
}

async fn store_batch(state: &AppState, device: DeviceId, batch: Vec<OutputChunk>) {
    let mut delay = Duration::from_millis(50);
    loop {
        match state.output.append(&state.store, batch.clone()).await {
            Ok(held) => {
                crate::cluster::announce_output(state, held.keys().copied()).await;
                for (session, offset) in &held {
                    let _ = state.devices.send(device, &ServerMessage::Ack { session: *session, offset: *offset }).await;
                }
                // Output of a run that is no longer live (its lease is gone): refused, and
                // the device is told to stop the run.
                let fenced: std::collections::HashSet<_> = batch.iter().map(|c| c.session).filter(|s| !held.contains_key(s)).collect();
                for session in fenced {
                    tracing::warn!(%session, "refused output of a run that is no longer live: stopping it");
                    let _ = state.devices.send(device, &ServerMessage::Release { session }).await;
                }
                return;
            }
            Err(e) => {
                // Nothing is acknowledged, so nothing is lost: the device still holds it.
                tracing::error!("storing output failed, retrying: {e}");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(5));
            }
        }
    }
}

async fn apply(state: &AppState, device: DeviceId, device_name: &str, item: Item) {
    match item {
        Item::Output(_) => unreachable!("output is batched"),
        Item::Resized { session, t_micros, cols, rows } => {
            let mark = Mark { t_micros, kind: "r".into(), data: format!("{cols}x{rows}") };
            if let Err(e) = state.store.add_mark(session, &mark).await {
                tracing::warn!("recording resize: {e}");
            }
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
    crate::tasks::after_end(state, &row, &ending).await
}

//! Session routes: start, list, show, audited input, ask, stop, text, output, export.

use std::time::{Duration, Instant};

use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::IntoResponse;
use axum::Json;
use drover_api::{AskReply, InputReceipt, SendInput, SessionList, SessionText, SessionView};
use drover_core::activity::EventKind;
use drover_core::{Outcome, SessionId};
use drover_protocol::device::ServerMessage;
use drover_store::{Mark, NewEvent, SessionRow};
use serde::Deserialize;

use super::ApiJson;
use crate::auth::Caller;
use crate::devices::{Delivery, NoAnswer};
use crate::{render, ApiError, AppState};

/// Most output returned by one `output` call.
const OUTPUT_PAGE: usize = 1024 * 1024;

/// Loads a session the caller may see, with errors that say what to do.
pub async fn load_session(state: &AppState, caller: &Caller, id: &str) -> Result<SessionRow, ApiError> {
    // Agents never see sessions, not even their own (DESIGN.md's permission table).
    if matches!(caller.0, drover_store::Principal::Agent { .. }) {
        caller.member_name()?;
    }
    let sid: SessionId = id.trim().parse().map_err(|e: drover_core::IdError| ApiError::BadRequest(e.to_string()))?;
    match state.store.session(sid).await? {
        Some(row) if row.workspace == caller.0.workspace() => Ok(row),
        _ => Err(ApiError::NotFound(format!("no session {sid}: `drover session list --all` shows the sessions there are"))),
    }
}

/// Loads a session the caller may drop in to (terminal, scrollback, input, Stop);
/// returns it with the caller's name.
pub async fn load_for_drop_in(state: &AppState, caller: &Caller, id: &str) -> Result<(SessionRow, String), ApiError> {
    let row = load_session(state, caller, id).await?;
    let who = caller.require_drop_in(&row)?;
    Ok((row, who))
}

/// The API's view of a stored session.
pub fn view(state: &AppState, caller: &Caller, r: SessionRow) -> SessionView {
    let can_drop_in = caller.may_drop_in(&r);
    let duration_secs = match (r.outcome, &r.started_at, &r.ended_at) {
        (Outcome::Lost, _, _) => None,
        (_, Some(s), Some(e)) => {
            drover_store::parse_time(s).zip(drover_store::parse_time(e)).map(|(s, e)| (e - s).num_milliseconds() as f64 / 1000.0)
        }
        _ => None,
    };
    let hub = state.hubs.get(r.id);
    let (cols, rows) = hub.as_ref().map(|h| h.size()).unwrap_or((r.cols, r.rows));
    let last_output_at = hub
        .as_ref()
        .filter(|h| h.latest() > 0)
        .and_then(|h| chrono::Duration::from_std(h.since_output()).ok())
        .map(|ago| drover_store::format_time(chrono::Utc::now() - ago))
        .or(r.last_output_at);
    SessionView {
        id: r.id,
        sandbox: r.sandbox,
        sandbox_state: r.sandbox_state,
        title: match (r.title.is_empty(), can_drop_in) {
            (false, _) => r.title,
            (true, true) => r.command.join(" "),
            (true, false) => drover_core::activity::need_to_know::command(&r.command).join(" "),
        },
        device: r.device_name,
        command: if can_drop_in { r.command } else { drover_core::activity::need_to_know::command(&r.command) },
        cwd: r.cwd,
        outcome: r.outcome,
        live: r.outcome.is_live(),
        outcome_explanation: r.outcome.meaning().to_string(),
        exit_code: r.exit_code,
        reason: r.reason,
        created_at: r.created_at,
        started_at: r.started_at,
        ended_at: r.ended_at,
        duration_secs,
        cols,
        rows,
        output_bytes: r.output_bytes,
        attached: hub.map(|h| h.attached()).unwrap_or(0),
        started_by: r.created_by,
        task: r.task,
        stage: r.stage,
        agent: r.agent_name,
        repo: r.repo_name,
        last_output_at,
        last_progress: None,
        pruned_at: r.pruned_at,
        final_offset: r.final_offset,
        can_drop_in,
        spend: r.usage.as_deref().and_then(spend_view),
        skills: r.skills.as_deref().and_then(|s| serde_json::from_str(s).ok()),
    }
}

/// A run's spend from its stored usage report.
pub fn spend_view(usage: &str) -> Option<drover_api::SpendView> {
    let u: drover_protocol::device::UsageReport = serde_json::from_str(usage).ok()?;
    use drover_core::spend::{cache_hit_pct, usd};
    Some(drover_api::SpendView {
        total_usd: (u.unpriced_turns == 0).then(|| usd(u.cost.total())),
        generation_usd: usd(u.cost.generation),
        cache_read_usd: usd(u.cost.cache_read),
        total_nano: (u.unpriced_turns == 0).then(|| u.cost.total()),
        generation_nano: u.cost.generation,
        cache_read_nano: u.cost.cache_read,
        turns: u.turns,
        cache_hit_pct: cache_hit_pct(&u.tokens),
        tokens: u.tokens,
        model: u.model,
        models: u.models,
    })
}

/// Refuses reading a recording that retention pruned.
fn check_recording(row: &SessionRow) -> Result<(), ApiError> {
    match &row.pruned_at {
        Some(at) => Err(ApiError::Conflict(format!(
            "session {}'s recording was pruned at {at}, after the retention window; its summary is kept (`drover session show`)",
            row.id
        ))),
        None => Ok(()),
    }
}

/// Paging of the session list.
#[derive(Debug, Deserialize)]
pub struct ListParams {
    /// Include ended sessions.
    #[serde(default)]
    pub all: bool,
    /// At most this many (default 100, at most 1000).
    pub limit: Option<i64>,
}

/// `GET /api/v1/sessions`.
pub async fn list(State(state): State<AppState>, caller: Caller, Query(p): Query<ListParams>) -> Result<Json<SessionList>, ApiError> {
    caller.member_name()?;
    let limit = p.limit.unwrap_or(100).clamp(1, 1000);
    let rows = state.store.list_sessions(caller.0.workspace(), p.all, limit).await?;
    Ok(Json(SessionList { sessions: rows.into_iter().map(|r| view(&state, &caller, r)).collect() }))
}

/// `GET /api/v1/sessions/{id}`, with the run's latest evidence of progress.
pub async fn show(State(state): State<AppState>, caller: Caller, Path(id): Path<String>) -> Result<Json<SessionView>, ApiError> {
    let row = load_session(&state, &caller, &id).await?;
    let progress = state.store.last_progress(row.id).await?;
    let mut v = view(&state, &caller, row);
    // Viewers on every replica, not only this one's.
    v.attached = state.topology.attached(&state, v.id).await?;
    v.last_progress = progress
        .map(|(kind, at)| drover_api::Progress { label: EventKind::parse(&kind).map(|k| k.label().to_string()).unwrap_or(kind), at });
    Ok(Json(v))
}

/// Sends audited text; returns once the device confirms it was written.
async fn deliver(state: &AppState, caller: &Caller, id: &str, text: &str) -> Result<(SessionRow, InputReceipt), ApiError> {
    let (row, who) = load_for_drop_in(state, caller, id).await?;
    let receipt = deliver_to(state, &row, who, text).await?;
    Ok((row, receipt))
}

/// The audited path for `row` on behalf of `who`: text then Enter, confirmed by the
/// device, marked in the recording and recorded as "input sent (audited)".
pub async fn deliver_to(state: &AppState, row: &SessionRow, who: String, text: &str) -> Result<InputReceipt, ApiError> {
    drover_core::input::validate(text).map_err(|e| match e {
        drover_core::input::InputError::TooLong { .. } => ApiError::TooLarge(e.to_string()),
        _ => ApiError::BadRequest(e.to_string()),
    })?;
    if !row.outcome.is_live() {
        return Err(ApiError::Conflict(format!("session {} has ended ({}); input cannot be delivered", row.id, row.outcome)));
    }
    let delivery = state.devices.send_text(row.device, row.id, text.to_string(), state.config.input_timeout).await;
    let (bracketed_paste, offset, t_micros) = match delivery {
        Ok(Delivery::Delivered { bracketed_paste, offset, t_micros }) => (bracketed_paste, offset, t_micros),
        Ok(Delivery::Failed(reason)) => return Err(ApiError::Conflict(format!("the input was not delivered: {reason}"))),
        Err(NoAnswer::NotConnected) => {
            return Err(ApiError::Conflict(format!("device `{}` is not connected; the input was not sent", row.device_name)))
        }
        Err(NoAnswer::Disconnected) => {
            return Err(ApiError::Conflict(format!(
                "device `{}` disconnected before confirming delivery; the input may or may not have arrived",
                row.device_name
            )))
        }
        Err(NoAnswer::Timeout) => {
            return Err(ApiError::Timeout(format!(
                "device `{}` did not confirm delivery within {:?}; the input may or may not have arrived",
                row.device_name, state.config.input_timeout
            )))
        }
    };
    let label: String = text.chars().take(500).collect();
    let _ = state.store.add_mark(row.id, &Mark { t_micros, kind: "m".into(), data: format!("input ({who}): {label}") }).await;
    let event = NewEvent {
        workspace: row.workspace,
        session: Some(row.id),
        task: None,
        kind: EventKind::InputSent,
        actor: who,
        detail: serde_json::json!({ "text": text, "bracketed_paste": bracketed_paste, "offset": offset }),
    };
    let event = state.store.record_event(&event).await?;
    Ok(InputReceipt { session: row.id, event: event.to_string(), bracketed_paste, offset })
}

/// `POST /api/v1/sessions/{id}/input`: the audited Send path.
pub async fn input(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    ApiJson(req): ApiJson<SendInput>,
) -> Result<Json<InputReceipt>, ApiError> {
    let (_, receipt) = deliver(&state, &caller, &id, &req.text).await?;
    Ok(Json(receipt))
}

/// After the prompt is back, output quiet this long ends the reply (the prompt itself
/// follows the signal).
const PROMPT_QUIET: Duration = Duration::from_millis(200);

/// `POST /api/v1/sessions/{id}/ask`: input, then wait for the reply to settle and return
/// what the program printed. Settled means, in order of trust: the session ended; the
/// harness said its turn is over or it waits on a person (its hooks); the program
/// showed its prompt again (its own signal, see [`drover_render::prompt`]); or,
/// for a program that gives no such signal, the screen went still. A program busy with
/// the line it was sent (it accepted it and has not prompted again) is not settled
/// however still its screen is.
pub async fn ask(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    ApiJson(req): ApiJson<SendInput>,
) -> Result<Json<AskReply>, ApiError> {
    let timeout = match req.timeout_secs {
        Some(s) if s.is_finite() && s > 0.0 && s <= 3600.0 => Duration::from_secs_f64(s),
        Some(_) => return Err(ApiError::BadRequest("timeout must be between 0 and 3600 seconds".into())),
        None => state.config.ask_timeout,
    };
    let still = req.still_ms.map(Duration::from_millis).unwrap_or(state.config.ask_still).min(timeout);
    let asked_at = drover_store::now();
    let (row, receipt) = deliver(&state, &caller, &id, &req.text).await?;
    let hub = crate::topology::live_hub(&state, &row);
    let mut settled_by = None;
    let mut pending = "the session's output could not be followed".to_string();
    if let Some(hub) = &hub {
        let wait = Wait { from: receipt.offset, asked_at: &asked_at, still, timeout };
        (settled_by, pending) = await_reply(&state, hub, &row, wait).await;
    }
    // Let the store catch up with what the hub has seen.
    let want = hub.as_ref().map(|h| h.latest()).unwrap_or(0);
    let until = Instant::now() + Duration::from_secs(2);
    while Instant::now() < until {
        let stored = state.store.session(row.id).await?.map(|r| r.output_bytes).unwrap_or(0);
        if stored >= want {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let (mut lines, partial, _, _) = render::text(&state.store, row.id, receipt.offset).await?;
    if !partial.is_empty() {
        lines.push(partial);
    }
    strip_echo(&mut lines, &req.text);
    let outcome = state.store.session(row.id).await?.map(|r| r.outcome).unwrap_or(row.outcome);
    if settled_by.is_none() && !outcome.is_live() {
        settled_by = Some("ended");
    }
    let settled = settled_by.is_some();
    let pending = (!settled).then_some(pending);
    Ok(Json(AskReply { receipt, reply: lines.join("\n"), settled, outcome, settled_by: settled_by.map(str::to_string), pending }))
}

/// What an ask waits for.
struct Wait<'a> {
    /// The output offset the input was sent at.
    from: u64,
    /// When it was asked (stored time format): the harness's word counts from then.
    asked_at: &'a str,
    /// How long a still screen settles it, for a program with no prompt signal.
    still: Duration,
    /// How long to wait at most.
    timeout: Duration,
}

/// Whether the run's harness said, since `asked_at`, that its turn is over or that it
/// waits on a person.
async fn harness_waits(state: &AppState, session: drover_core::SessionId, asked_at: &str) -> bool {
    use drover_core::attention::AttentionKind;
    let items = state.store.session_attention(session).await.unwrap_or_default();
    items.iter().any(|i| i.raised_at.as_str() >= asked_at && matches!(i.kind, AttentionKind::Idle | AttentionKind::Permission))
}

/// Waits for the reply to input sent at `w.from`: what settled it (`ended`,
/// `harness`, `prompt`, `still`), or None at the timeout with what it was still
/// waiting for.
async fn await_reply(
    state: &AppState,
    hub: &std::sync::Arc<crate::hub::Hub>,
    row: &drover_store::SessionRow,
    w: Wait<'_>,
) -> (Option<&'static str>, String) {
    use drover_render::prompt::{PromptWatch, Turn};
    let (from, still, timeout) = (w.from, w.still, w.timeout);
    let deadline = Instant::now() + timeout;
    let (mut watch, mut read) = (PromptWatch::default(), from);
    hub.touch();
    let mut changed = hub.changed.subscribe();
    // The harness's hooks are looked at only when the store says this run changed.
    let mut stored = state.store.subscribe();
    let mut look = true;
    loop {
        if hub.ended().is_some() {
            return (Some("ended"), String::new());
        }
        if std::mem::take(&mut look) && harness_waits(state, row.id, w.asked_at).await {
            return (Some("harness"), String::new());
        }
        state.topology.follow(state, hub.clone(), row.id, row.device);
        match hub.since(read) {
            Ok(pieces) => pieces.iter().for_each(|p| {
                watch.feed(p);
                read += p.len() as u64;
            }),
            Err(_) => {
                watch.lost();
                read = hub.latest();
            }
        }
        let since = hub.since_output();
        let (quiet, settles_as) = match watch.turn() {
            Turn::Prompt => (Some(PROMPT_QUIET.min(still)), "prompt"),
            Turn::Busy => (None, ""),
            Turn::Unknown => (Some(still), "still"),
        };
        if quiet.is_some_and(|q| since >= q) {
            return (Some(settles_as), String::new());
        }
        let now = Instant::now();
        if now >= deadline {
            let pending = match watch.turn() {
                Turn::Busy => "the program is still busy with what was sent: it has not shown its prompt again",
                _ => "the program was still printing",
            };
            return (None, pending.to_string());
        }
        let wait = quiet.map(|q| q.saturating_sub(since)).unwrap_or(deadline - now).min(deadline - now);
        tokio::select! {
            _ = tokio::time::timeout(wait, changed.changed()) => {}
            c = stored.recv() => match c {
                Ok(c) => look = c.session == Some(row.id),
                Err(_) => (stored, look) = (state.store.subscribe(), true),
            },
        }
    }
}

/// Drops the program's echo of the sent text from the start of its reply.
fn strip_echo(lines: &mut Vec<String>, sent: &str) {
    let sent: Vec<&str> = sent.lines().map(str::trim_end).collect();
    let echoed = lines.iter().zip(&sent).take_while(|(l, s)| l.trim_end().ends_with(*s)).count();
    if echoed == sent.len() {
        lines.drain(..echoed);
    }
}

/// `POST /api/v1/sessions/{id}/stop`: SIGTERM the group, SIGKILL after the grace;
/// waits for the end and returns the session (outcome `released`).
pub async fn stop(State(state): State<AppState>, caller: Caller, Path(id): Path<String>) -> Result<Json<SessionView>, ApiError> {
    let (row, who) = load_for_drop_in(&state, &caller, &id).await?;
    if !row.outcome.is_live() {
        return Err(ApiError::Conflict(format!("session {} has already ended ({})", row.id, row.outcome)));
    }
    state.store.mark_stop_requested(row.id, &who).await?;
    let grace_ms = state.config.stop_grace.as_millis() as u64;
    if state.devices.send(row.device, &ServerMessage::Stop { session: row.id, grace_ms }).await.is_err() {
        // A deliberate stop (released, by this operator); the device stops the process
        // when it reconnects, since the run is not among those resumed then.
        let end = drover_core::RunEnd::StoppedOffline { reason: "the session was stopped while its device was offline".into() };
        crate::ingest::end_session(&state, row.device, &row.device_name, row.id, &crate::ingest::EndReport::now(end, row.output_bytes))
            .await?;
        let now = state.store.session(row.id).await?.expect("session exists");
        return Ok(Json(view(&state, &caller, now)));
    }
    let deadline = Instant::now() + state.config.stop_grace + Duration::from_secs(5);
    loop {
        let now = state.store.session(row.id).await?.expect("session exists");
        if !now.outcome.is_live() || Instant::now() >= deadline {
            return Ok(Json(view(&state, &caller, now)));
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// Parameters of `text`.
#[derive(Debug, Deserialize)]
pub struct TextParams {
    /// Only the last N lines.
    pub lines: Option<usize>,
    /// Only settled lines (for following): leave out the screen's rows from the
    /// cursor's down, which may still change.
    #[serde(default)]
    pub complete: bool,
}

/// `GET /api/v1/sessions/{id}/text`: what the run showed, as plain text: the lines that
/// scrolled off its screen, then the screen as it was left (rendered through a screen
/// model, so cursor moves and redraws read as they looked).
pub async fn text(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    Query(p): Query<TextParams>,
) -> Result<Json<SessionText>, ApiError> {
    let (row, _) = load_for_drop_in(&state, &caller, &id).await?;
    check_recording(&row)?;
    let (lines, offset) = match (p.lines, p.complete) {
        // The end of what it printed (`session tail`), live or not: from a checkpoint near
        // the end, never a replay of everything it printed.
        (Some(n), false) => render::last_lines(&state.store, &row, n).await?,
        (n, complete) => {
            let (mut lines, offset) = render::screen_text(&state.store, &row, complete).await?;
            lines.drain(..lines.len().saturating_sub(n.unwrap_or(usize::MAX)));
            (lines, offset)
        }
    };
    Ok(Json(SessionText { lines, offset, outcome: row.outcome }))
}

/// Parameters of `output`.
#[derive(Debug, Deserialize)]
pub struct OutputParams {
    /// First offset wanted.
    #[serde(default)]
    pub from: u64,
    /// Wait up to this many milliseconds for output when there is none yet (max 30000).
    #[serde(default)]
    pub wait_ms: u64,
}

/// `GET /api/v1/sessions/{id}/output`: raw stored output from an offset (long-poll).
/// Headers: `x-drover-offset` (offset after the bytes), `x-drover-outcome`, and
/// `x-drover-size` (`COLSxROWS`, the terminal's size when these bytes were written; a
/// page never spans a resize).
pub async fn output(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    Query(p): Query<OutputParams>,
) -> Result<impl IntoResponse, ApiError> {
    let (row, _) = load_for_drop_in(&state, &caller, &id).await?;
    check_recording(&row)?;
    let deadline = Instant::now() + Duration::from_millis(p.wait_ms.min(30_000));
    loop {
        let chunks = state.store.read_output(row.id, p.from, OUTPUT_PAGE).await?;
        let outcome = state.store.session(row.id).await?.map(|r| r.outcome).unwrap_or(row.outcome);
        if !chunks.is_empty() || !outcome.is_live() || Instant::now() >= deadline {
            let mut body = Vec::new();
            let mut end = p.from;
            // The bytes written at one terminal size: a page stops where a resize took
            // effect, and says the size (so a reader renders each part at its own).
            let size = match chunks.first() {
                Some(first) => {
                    let (size, next) = render::Sizes::of(&state.store, row.id, (row.cols, row.rows)).await?.at(first.t_micros);
                    let until = next.unwrap_or(u64::MAX);
                    for c in chunks.into_iter().take_while(|c| c.t_micros < until) {
                        end = c.offset + c.data.len() as u64;
                        body.extend_from_slice(&c.data);
                    }
                    Some(size)
                }
                None => None,
            };
            let mut headers = HeaderMap::new();
            headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/octet-stream"));
            headers.insert("x-drover-offset", HeaderValue::from(end));
            if let Some((cols, rows)) = size {
                headers.insert("x-drover-size", HeaderValue::from_str(&format!("{cols}x{rows}")).expect("ASCII"));
            }
            headers.insert("x-drover-outcome", HeaderValue::from_static(outcome.as_str()));
            return Ok((headers, body));
        }
        let mut changed = state.hubs.get(row.id).map(|h| h.changed.subscribe());
        let wait = deadline.saturating_duration_since(Instant::now()).min(Duration::from_millis(250));
        match changed.as_mut() {
            Some(rx) => {
                let _ = tokio::time::timeout(wait, rx.changed()).await;
                tokio::time::sleep(Duration::from_millis(15)).await;
            }
            None => tokio::time::sleep(wait).await,
        }
    }
}

/// `GET /api/v1/sessions/{id}/export`: the recording as asciicast v3.
pub async fn export(State(state): State<AppState>, caller: Caller, Path(id): Path<String>) -> Result<impl IntoResponse, ApiError> {
    let (row, _) = load_for_drop_in(&state, &caller, &id).await?;
    check_recording(&row)?;
    let cast = axum::body::Body::from_stream(render::asciicast(state.store.clone(), row.clone()).await?);
    let disposition = format!("attachment; filename=\"{}.cast\"", row.id);
    Ok((
        [
            (header::CONTENT_TYPE, HeaderValue::from_static("application/x-asciicast")),
            (header::CONTENT_DISPOSITION, HeaderValue::from_str(&disposition).expect("ascii")),
        ],
        cast,
    ))
}

/// Output bytes in one window of `recording`: a few seconds of a busy agent's redraws,
/// small enough that a player fetches one without a pause.
const WINDOW_BYTES: usize = 512 * 1024;

/// Parameters of `recording`.
#[derive(Debug, Deserialize)]
pub struct WindowParams {
    /// The output offset to start at: 0, a window's `next`, or a screen's
    /// `x-drover-offset` (what a player seeks to).
    pub from: Option<u64>,
}

/// `GET /api/v1/sessions/{id}/recording?from=`: the recording a window at a time, for a
/// player that fetches as it plays; the whole file is `export`.
pub async fn recording(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    Query(p): Query<WindowParams>,
) -> Result<Json<drover_api::RecordingWindow>, ApiError> {
    let (row, _) = load_for_drop_in(&state, &caller, &id).await?;
    check_recording(&row)?;
    Ok(Json(render::window(&state.store, &row, p.from.unwrap_or(0), WINDOW_BYTES).await?))
}

#[cfg(test)]
mod tests {
    use super::strip_echo;

    #[test]
    fn echo_of_the_sent_text_is_removed() {
        let mut lines = vec!["$ hello".to_string(), "world".to_string()];
        strip_echo(&mut lines, "hello");
        assert_eq!(lines, ["world"]);
        let mut lines = vec!["different".to_string()];
        strip_echo(&mut lines, "hello");
        assert_eq!(lines, ["different"]);
    }
}

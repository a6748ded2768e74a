//! Starting a task-free session: checking the command and the device, asking it to start.

use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::Json;
use drover_api::StartSession;
use drover_core::activity::EventKind;
use drover_core::{names, Outcome, SessionId};
use drover_protocol::device::ServerMessage;
use drover_protocol::shim::SessionSpec;
use drover_store::{Change, DeviceRow, NewSession, SessionRow};
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::broadcast::Receiver;

use super::sessions::view;
use super::ApiJson;
use crate::auth::Caller;
use crate::{ApiError, AppState};

/// Default terminal size for new sessions.
const DEFAULT_SIZE: (u32, u32) = (120, 40);

/// The title of a session started without one: its program's name (`claude` for
/// `/usr/local/bin/claude --resume`), so its sandbox row has something to link and the
/// list's search finds it. Only the program, as everyone may see it
/// ([`need_to_know::command`](drover_core::activity::need_to_know::command)); empty when
/// the name is no valid title.
fn default_title(command: &[String]) -> String {
    let program = command.first().map(|c| c.rsplit('/').next().unwrap_or(c)).unwrap_or_default();
    let name: String = program.chars().take(names::MAX_TITLE_CHARS).collect();
    if names::check_title(&name).is_ok() {
        name
    } else {
        String::new()
    }
}

/// `POST /api/v1/sessions`: starts a task-free session and waits briefly for it to start.
pub async fn start(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(req): ApiJson<StartSession>,
) -> Result<impl IntoResponse, ApiError> {
    let who = caller.member_name()?;
    check_command(&req.command)?;
    let title = req.title.clone().unwrap_or_default();
    names::check_title(&title).map_err(|e| ApiError::BadRequest(e.to_string()))?;
    let title = if title.is_empty() { default_title(&req.command) } else { title };
    let (cols, rows) = names::check_size(req.cols.unwrap_or(DEFAULT_SIZE.0), req.rows.unwrap_or(DEFAULT_SIZE.1))
        .map_err(|e| ApiError::BadRequest(e.to_string()))?;
    let ws = caller.0.workspace();
    let device = device_for_start(&state, &caller, &req.device, req.unconfined).await?;
    let cwd = req.cwd.clone().unwrap_or_default();
    let new = NewSession {
        workspace: ws,
        device: device.id,
        command: req.command.clone(),
        cwd: cwd.clone(),
        title,
        cols,
        rows,
        created_by: who,
        operator: Some(caller.member()?.id),
    };
    let id = state.store.create_session(&new).await?;
    if req.unconfined {
        let event = drover_store::NewEvent {
            workspace: ws,
            session: Some(id),
            task: None,
            kind: EventKind::UnconfinedStart,
            actor: new.created_by.clone(),
            detail: serde_json::json!({ "device": device.name }),
        };
        state.store.record_event(&event).await?;
    }
    let spec = SessionSpec {
        session: id,
        command: req.command,
        cwd,
        env: Vec::new(),
        cols,
        rows,
        harness: None,
        unconfined: req.unconfined,
        policy: None,
        link_secret: None,
    };
    // Listened for before the device is asked, so a quick Started is not missed.
    let mut changes = state.store.subscribe();
    send_start(&state, &device, spec).await?;
    let row = await_started(&state, id, &mut changes).await?;
    Ok((StatusCode::CREATED, Json(view(&state, &caller, row))))
}

/// Refuses an empty command or one with a NUL byte (no argv can carry it).
fn check_command(command: &[String]) -> Result<(), ApiError> {
    if command.is_empty() || command[0].is_empty() {
        return Err(ApiError::BadRequest(
            "no command given: put it after `--`, e.g. `drover session start --device NAME -- claude`".into(),
        ));
    }
    if command.iter().any(|a| a.contains('\0')) {
        return Err(ApiError::BadRequest("the command contains a NUL byte".into()));
    }
    Ok(())
}

/// The device named `name`, if it can take a session now: connected, with a free slot,
/// and able to sandbox it (or the caller may start it unconfined).
async fn device_for_start(state: &AppState, caller: &Caller, name: &str, unconfined: bool) -> Result<DeviceRow, ApiError> {
    let device = state
        .store
        .device_by_name(caller.0.workspace(), name)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("no device named `{name}`: `drover device list` shows the registered devices")))?;
    if !state.devices.is_connected(device.id) {
        return Err(ApiError::Conflict(format!(
            "device `{}` is not connected: start its daemon (`drover up` or `drover device`) or pick another device",
            device.name
        )));
    }
    if device.live_sessions >= device.slots {
        return Err(ApiError::Conflict(format!(
            "device `{}` has no free slot ({} of {} in use): stop a session or give the device more slots",
            device.name, device.live_sessions, device.slots
        )));
    }
    if unconfined {
        caller.require(drover_core::permissions::WorkspaceAction::StartUnconfined)?;
    } else if let Some(why) = device.sandbox.as_deref().and_then(refuses_runs) {
        return Err(ApiError::Conflict(format!(
            "device `{}` refuses runs: it cannot sandbox them ({why}); its owner can start it with --unsandboxed",
            device.name
        )));
    }
    Ok(device)
}

/// Asks the device to start the session; a device gone meanwhile ends it `failed`.
async fn send_start(state: &AppState, device: &DeviceRow, spec: SessionSpec) -> Result<(), ApiError> {
    let id = spec.session;
    if state.devices.send(device.id, &ServerMessage::Start { spec: Box::new(spec), worktree: None, skills: Vec::new() }).await.is_err() {
        let end = drover_core::RunEnd::StartFailed { reason: "the device disconnected before the session could be started".into() };
        crate::ingest::end_session(state, device.id, &device.name, id, &crate::ingest::EndReport::now(end, 0)).await?;
    }
    Ok(())
}

/// The session once it has left `starting`, or as it is when the start wait is over.
/// It is read again at each change to it the store hears of (`changes`: its start or
/// end, stored by this replica or, through PostgreSQL's notices, another), and every
/// [`START_LOOK`] should a notice be lost.
async fn await_started(state: &AppState, id: SessionId, changes: &mut Receiver<Change>) -> Result<SessionRow, ApiError> {
    let deadline = Instant::now() + state.config.start_wait;
    loop {
        let row = state.store.session(id).await?.expect("session just created");
        if row.outcome != Outcome::Starting || Instant::now() >= deadline {
            return Ok(row);
        }
        let changed = async {
            loop {
                match changes.recv().await {
                    Ok(c) if c.session == Some(id) => return,
                    Ok(_) => {}
                    Err(RecvError::Lagged(_)) => return,
                    Err(RecvError::Closed) => std::future::pending::<()>().await,
                }
            }
        };
        let _ = tokio::time::timeout(START_LOOK, changed).await;
    }
}

/// How often a start waiting on its device reads its session again without being told.
const START_LOOK: Duration = Duration::from_millis(20);

/// Why a device refuses runs, from its stored sandbox offer; None when it takes them.
fn refuses_runs(offer_json: &str) -> Option<String> {
    match serde_json::from_str::<drover_core::confinement::Offer>(offer_json).ok()? {
        drover_core::confinement::Offer::Unavailable { reason } => Some(reason),
        drover_core::confinement::Offer::Sandboxed { .. } | drover_core::confinement::Offer::Unsandboxed { .. } => None,
    }
}

#[cfg(test)]
mod tests {
    use super::default_title;

    #[test]
    fn an_untitled_session_is_named_after_its_program() {
        let cmd = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(default_title(&cmd(&["/usr/local/bin/claude", "--resume", "a long prompt"])), "claude");
        assert_eq!(default_title(&cmd(&["bash"])), "bash");
        assert_eq!(default_title(&cmd(&["bad\u{1b}name"])), "");
    }
}

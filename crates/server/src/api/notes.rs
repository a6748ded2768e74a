//! A task's notes: comments, blockers and questions, waiting on them and answering them.

use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::Json;
use drover_api::{NoteView, TextBody};
use drover_core::NoteId;
use drover_store::{NoteRow, TaskRow};
use serde::Deserialize;

use super::tasks::{actor_for, bad, check_text, load_task, MAX_TEXT};
use super::ApiJson;
use crate::auth::Caller;
use crate::{ApiError, AppState};

pub(super) fn note_view(n: NoteRow) -> NoteView {
    NoteView {
        id: n.id.to_string(),
        kind: n.kind,
        text: n.text,
        answer: n.answer,
        closed_by: n.closed_by,
        closed_at: n.closed_at,
        created_by: n.created_by,
    }
}

/// `POST /api/v1/tasks/{id}/comments`.
pub async fn comment(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    ApiJson(req): ApiJson<TextBody>,
) -> Result<StatusCode, ApiError> {
    let t = load_task(&state, &caller, &id).await?;
    let (actor, session) = actor_for(&caller, &t)?;
    check_text("comment", &req.text, MAX_TEXT)?;
    state.store.comment(&t, session, &req.text, &actor).await?;
    Ok(StatusCode::CREATED)
}

async fn add_note(state: &AppState, caller: &Caller, id: &str, kind: &str, text: &str) -> Result<(StatusCode, Json<NoteView>), ApiError> {
    let t = load_task(state, caller, id).await?;
    let (actor, session) = actor_for(caller, &t)?;
    check_text(kind, text, MAX_TEXT)?;
    let note = state.store.add_note(&t, session, kind, text, &actor).await?;
    Ok((StatusCode::CREATED, Json(note_view(state.store.note(note).await?.expect("just added")))))
}

/// `POST /api/v1/tasks/{id}/blockers`.
pub async fn block(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    ApiJson(req): ApiJson<TextBody>,
) -> Result<(StatusCode, Json<NoteView>), ApiError> {
    add_note(&state, &caller, &id, "blocker", &req.text).await
}

/// `POST /api/v1/tasks/{id}/questions`: an agent asks a human.
pub async fn ask(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    ApiJson(req): ApiJson<TextBody>,
) -> Result<(StatusCode, Json<NoteView>), ApiError> {
    add_note(&state, &caller, &id, "question", &req.text).await
}

async fn load_note(state: &AppState, caller: &Caller, id: &str) -> Result<(NoteRow, TaskRow), ApiError> {
    let nid: NoteId = id.trim().parse().map_err(bad)?;
    let note = state.store.note(nid).await?.ok_or_else(|| ApiError::NotFound(format!("no blocker or question {nid}")))?;
    let task = load_task(state, caller, &note.task.to_string()).await?;
    actor_for(caller, &task)?;
    Ok((note, task))
}

/// How long to wait for an answer.
#[derive(Debug, Deserialize)]
pub struct WaitParams {
    /// Seconds to wait for the note to close (at most 3600).
    pub wait: Option<f64>,
}

/// `GET /api/v1/notes/{id}`: a blocker or question; with `wait`, returns once it is
/// resolved or answered (or the wait is over).
pub async fn note(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    Query(p): Query<WaitParams>,
) -> Result<Json<NoteView>, ApiError> {
    let (mut note, _) = load_note(&state, &caller, &id).await?;
    let wait = match p.wait {
        Some(w) if (0.0..=3600.0).contains(&w) => Duration::from_secs_f64(w),
        Some(_) => return Err(bad("wait must be between 0 and 3600 seconds")),
        None => Duration::ZERO,
    };
    let deadline = tokio::time::Instant::now() + wait;
    let mut changes = state.store.subscribe();
    while note.closed_at.is_none() {
        tokio::select! {
            _ = tokio::time::sleep_until(deadline) => break,
            c = changes.recv() => if c.is_err() { changes = state.store.subscribe(); },
        }
        note = state.store.note(note.id).await?.expect("notes are not deleted");
    }
    Ok(Json(note_view(note)))
}

/// `POST /api/v1/notes/{id}/answer`: a person answers a question (or resolves a blocker).
pub async fn answer(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    ApiJson(req): ApiJson<TextBody>,
) -> Result<Json<NoteView>, ApiError> {
    let who = caller.member_name()?;
    let (note, task) = load_note(&state, &caller, &id).await?;
    if note.kind == "question" {
        check_text("answer", &req.text, MAX_TEXT)?;
    }
    let answer = (!req.text.trim().is_empty()).then_some(req.text.as_str());
    if !state.store.close_note(&task, note.id, answer, &who).await? {
        return Err(ApiError::Conflict(format!("{} {} was already closed", note.kind, note.id)));
    }
    Ok(Json(note_view(state.store.note(note.id).await?.expect("exists"))))
}

/// `POST /api/v1/notes/{id}/resolve`: resolves a blocker (the agent that filed it, or a person).
pub async fn resolve(State(state): State<AppState>, caller: Caller, Path(id): Path<String>) -> Result<Json<NoteView>, ApiError> {
    let (note, task) = load_note(&state, &caller, &id).await?;
    let (actor, _) = actor_for(&caller, &task)?;
    if note.kind != "blocker" {
        return Err(bad("only blockers are resolved; questions are answered"));
    }
    if !state.store.close_note(&task, note.id, None, &actor).await? {
        return Err(ApiError::Conflict(format!("blocker {} was already resolved", note.id)));
    }
    Ok(Json(note_view(state.store.note(note.id).await?.expect("exists"))))
}

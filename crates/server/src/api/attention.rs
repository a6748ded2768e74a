//! "Needs you": what runs wait on a person for. A run's own hook reports what its
//! harness does (`POST /hooks/claude`) and waits for the decision on a held call; people
//! list what waits (`GET /inbox`) and decide (`POST /attention/{id}/decide`). Only those
//! who may drop in to a run see what it would run, and decide; agents never.

use std::collections::HashMap;
use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::Json;
use drover_api::{DecideBody, HookDecision, HookEvent, HookReceipt, Inbox, InboxItem};
use drover_core::attention::{self, check_decision, claude_hook_output, read_claude_hook, AttentionKind, Decision, HookSignal, Waiting};
use drover_core::{AttentionId, SessionId};
use drover_store::{AttentionRow, NewAttention, NoteRow, Principal, SessionRow};

use super::notes::WaitParams;
use super::ApiJson;
use crate::auth::Caller;
use crate::{ApiError, AppState};

/// Most held calls one run may have open at once.
const MAX_HELD: i64 = 16;
/// Most items one run may raise in [`RAISE_WINDOW`].
const MAX_RAISED: i64 = 60;
/// The window [`MAX_RAISED`] counts in.
const RAISE_WINDOW: Duration = Duration::from_secs(60);
/// Longest a hook's wait for a decision lasts per request (it asks again).
const MAX_WAIT: Duration = Duration::from_secs(3600);

/// The calling run: an agent's credential for a live session.
async fn own_run(state: &AppState, caller: &Caller) -> Result<SessionRow, ApiError> {
    let Principal::Agent { session, .. } = &caller.0 else {
        return Err(ApiError::Forbidden("only a run's own credential reports its harness's hooks".into()));
    };
    let row = state.store.session(*session).await?.ok_or_else(|| ApiError::NotFound("this run's session is gone".into()))?;
    if !row.outcome.is_live() {
        return Err(ApiError::Conflict(format!("session {} has ended", row.id)));
    }
    Ok(row)
}

/// `POST /api/v1/hooks/claude`: a Claude Code hook event from inside a run, as the
/// hook read it. A held call is raised and its id returned for the hook to wait on.
pub async fn claude_hook(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(HookEvent(event)): ApiJson<HookEvent>,
) -> Result<Json<HookReceipt>, ApiError> {
    let run = own_run(&state, &caller).await?;
    let signal = read_claude_hook(&event).map_err(|e| ApiError::BadRequest(e.to_string()))?;
    report(&state, &run, signal).await.map(Json)
}

/// `POST /api/v1/hooks/codex`: what Codex handed its `notify` program, from inside a
/// run.
pub async fn codex_hook(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(HookEvent(event)): ApiJson<HookEvent>,
) -> Result<Json<HookReceipt>, ApiError> {
    let run = own_run(&state, &caller).await?;
    let signal = drover_core::attention::read_codex_notify(&event).map_err(|e| ApiError::BadRequest(e.to_string()))?;
    report(&state, &run, signal).await.map(Json)
}

/// Raises or clears what `run`'s harness signalled.
async fn report(state: &AppState, run: &SessionRow, signal: HookSignal) -> Result<HookReceipt, ApiError> {
    let actor = format!("agent {}", run.agent_name.as_deref().unwrap_or("agent"));
    let raise = |item: NewAttention| raise(state, run, item, actor.clone());
    let attention = match signal {
        HookSignal::Held(call) => raise(NewAttention::Held(call)).await?,
        HookSignal::Prompt(words) => raise(NewAttention::Prompt(words)).await.map(|_| None)?,
        // The turn is over: nothing it held waits any more.
        HookSignal::Idle => {
            state.store.clear_attention(run, true, "moved_on").await?;
            raise(NewAttention::Idle).await.map(|_| None)?
        }
        HookSignal::MovedOn => state.store.clear_attention(run, true, "moved_on").await.map(|_| None)?,
        HookSignal::Ignored => None,
    };
    Ok(HookReceipt { attention: attention.map(|a| a.to_string()) })
}

/// Raises `item` for `run`, within the bounds of what one run may raise.
async fn raise(state: &AppState, run: &SessionRow, item: NewAttention, actor: String) -> Result<Option<AttentionId>, ApiError> {
    let (recent, held) = state.store.attention_load(run.id, RAISE_WINDOW).await?;
    if recent >= MAX_RAISED || (matches!(item, NewAttention::Held(_)) && held >= MAX_HELD) {
        return Err(ApiError::TooManyRequests(RAISE_WINDOW.as_secs()));
    }
    Ok(state.store.raise_attention(run, &item, &actor).await?)
}

/// An item of the caller's own run.
async fn own_item(state: &AppState, caller: &Caller, id: &str) -> Result<AttentionRow, ApiError> {
    let run = own_run(state, caller).await?;
    let id: AttentionId = id.trim().parse().map_err(|e: drover_core::IdError| ApiError::BadRequest(e.to_string()))?;
    match state.store.attention(id).await? {
        Some(item) if item.session == run.id => Ok(item),
        _ => Err(ApiError::NotFound(format!("no held call {id} in this run"))),
    }
}

/// `GET /api/v1/attention/{id}/decision`: for the run's hook: the decision on its held
/// call, waiting up to `wait` seconds for one.
pub async fn decision(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    Query(p): Query<WaitParams>,
) -> Result<Json<HookDecision>, ApiError> {
    let mut item = own_item(&state, &caller, &id).await?;
    let wait = match p.wait {
        Some(w) if w.is_finite() && (0.0..=MAX_WAIT.as_secs_f64()).contains(&w) => Duration::from_secs_f64(w),
        Some(_) => return Err(ApiError::BadRequest(format!("wait must be between 0 and {} seconds", MAX_WAIT.as_secs()))),
        None => Duration::ZERO,
    };
    let deadline = tokio::time::Instant::now() + wait;
    let mut changes = state.store.subscribe();
    // Read again after subscribing: a decision taken in between is not missed.
    item = state.store.attention(item.id).await?.unwrap_or(item);
    while item.closed_at.is_none() {
        tokio::select! {
            _ = tokio::time::sleep_until(deadline) => break,
            c = changes.recv() => match c {
                Ok(c) if c.session != Some(item.session) => continue,
                Ok(_) => {}
                Err(_) => changes = state.store.subscribe(),
            },
        }
        item = state.store.attention(item.id).await?.unwrap_or(item);
    }
    let taken = item.decision.as_deref().and_then(|d| Decision::parse(d, item.message.as_deref()));
    Ok(Json(HookDecision {
        decided: taken.is_some(),
        output: taken.map(|d| claude_hook_output(&d, &item.always)),
        closed: item.closed_at.is_some(),
    }))
}

/// The decisions `caller` may take on `item` now.
fn decisions(item: &AttentionRow, may_drop_in: bool) -> Vec<String> {
    let waiting = waiting(item);
    let all = [Decision::Approve, Decision::ApproveAlways, Decision::Deny(String::new())];
    let ok = |d: &Decision| may_drop_in && check_decision(&waiting, d).is_ok();
    all.iter().filter(|d| ok(d)).map(|d| d.as_str().to_string()).collect()
}

fn waiting(item: &AttentionRow) -> Waiting<'_> {
    Waiting {
        kind: item.kind,
        held: item.held,
        closed: item.closed_reason.as_deref(),
        clipped: item.clipped,
        has_rules: !item.always.is_empty(),
    }
}

/// The inbox's view of `item` for `caller`: what it would run only for those who may drop
/// in to its run.
fn item_view(caller: &Caller, item: AttentionRow, run: Option<&SessionRow>) -> InboxItem {
    let can_drop_in = run.is_some_and(|r| caller.may_drop_in(r));
    let words = attention::waiting_words(item.kind, item.tool.as_deref());
    let decisions = decisions(&item, can_drop_in);
    let private = |v: Option<String>| v.filter(|_| can_drop_in);
    InboxItem {
        id: item.id.to_string(),
        kind: item.kind.as_str().into(),
        words,
        guess: item.kind == AttentionKind::ProbablyWaiting,
        session: Some(item.session.to_string()),
        title: run.map(|r| r.title.clone()).unwrap_or_default(),
        task: item.task.map(|t| t.to_string()),
        tool: item.tool,
        subject: private(Some(item.subject).filter(|s| !s.is_empty())),
        diff: private(item.diff),
        always_rules: if can_drop_in { item.always } else { Vec::new() },
        clipped: item.clipped,
        decisions,
        can_drop_in,
        raised_at: item.raised_at,
        decision: item.decision,
        decided_by: item.decided_by,
        closed: item.closed_reason,
    }
}

/// An open question, as the inbox shows it (any member may answer).
fn question_view(note: NoteRow, title: String, run: Option<&SessionRow>, caller: &Caller) -> InboxItem {
    InboxItem {
        id: note.id.to_string(),
        kind: "question".into(),
        words: format!("waiting for an answer: {}", note.text),
        guess: false,
        session: run.map(|r| r.id.to_string()),
        title,
        task: Some(note.task.to_string()),
        tool: None,
        subject: Some(note.text),
        diff: None,
        always_rules: Vec::new(),
        clipped: false,
        decisions: vec!["answer".into()],
        can_drop_in: run.is_some_and(|r| caller.may_drop_in(r)),
        raised_at: note.created_at,
        decision: None,
        decided_by: None,
        closed: None,
    }
}

/// Runs by id, each read once.
async fn runs(state: &AppState, ids: impl Iterator<Item = SessionId>) -> Result<HashMap<SessionId, SessionRow>, ApiError> {
    let mut out = HashMap::new();
    for id in ids {
        if let std::collections::hash_map::Entry::Vacant(e) = out.entry(id) {
            if let Some(row) = state.store.session(id).await? {
                e.insert(row);
            }
        }
    }
    Ok(out)
}

/// `GET /api/v1/inbox`: what waits on a person in the workspace, newest first.
pub async fn inbox(State(state): State<AppState>, caller: Caller) -> Result<Json<Inbox>, ApiError> {
    caller.member_name()?;
    let workspace = caller.0.workspace();
    let items = state.store.open_attention(workspace).await?;
    let questions = state.store.open_questions(workspace).await?;
    let ids = items.iter().map(|i| i.session).chain(questions.iter().filter_map(|(n, _)| n.session));
    let runs = runs(&state, ids).await?;
    let mut out: Vec<InboxItem> = items
        .into_iter()
        .map(|i| {
            let run = runs.get(&i.session);
            item_view(&caller, i, run)
        })
        .collect();
    for (note, title) in questions {
        let run = note.session.and_then(|s| runs.get(&s));
        out.push(question_view(note, title, run, &caller));
    }
    out.sort_by(|a, b| b.raised_at.cmp(&a.raised_at));
    Ok(Json(Inbox { items: out }))
}

/// An item of the caller's workspace, with its run.
async fn load(state: &AppState, caller: &Caller, id: &str) -> Result<(AttentionRow, Option<SessionRow>), ApiError> {
    caller.member_name()?;
    let id: AttentionId = id.trim().parse().map_err(|e: drover_core::IdError| ApiError::BadRequest(e.to_string()))?;
    let item = state.store.attention(id).await?.filter(|i| i.workspace == caller.0.workspace());
    let item = item.ok_or_else(|| ApiError::NotFound(format!("nothing waits as {id}")))?;
    let run = state.store.session(item.session).await?;
    Ok((item, run))
}

/// `GET /api/v1/attention/{id}`: one item, open or closed.
pub async fn show(State(state): State<AppState>, caller: Caller, Path(id): Path<String>) -> Result<Json<InboxItem>, ApiError> {
    let (item, run) = load(&state, &caller, &id).await?;
    Ok(Json(item_view(&caller, item, run.as_ref())))
}

/// `POST /api/v1/attention/{id}/decide`: a person approves or denies a held call; the
/// run's hook hears it at once. Only those who may drop in to the run may decide.
pub async fn decide(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    ApiJson(req): ApiJson<DecideBody>,
) -> Result<Json<InboxItem>, ApiError> {
    let (item, run) = load(&state, &caller, &id).await?;
    let run = run.ok_or_else(|| ApiError::NotFound("its session is gone".into()))?;
    let who = caller.require_drop_in(&run)?;
    let message = req.message.as_deref().unwrap_or_default();
    if !message.trim().is_empty() {
        super::tasks::check_text("message", message, super::tasks::MAX_TEXT)?;
    }
    let decision = Decision::parse(&req.decision, Some(message))
        .ok_or_else(|| ApiError::BadRequest(format!("unknown decision {:?}: use approve, approve_always or deny", req.decision)))?;
    check_decision(&waiting(&item), &decision).map_err(|e| ApiError::Conflict(e.to_string()))?;
    if !state.store.decide_attention(&item, &decision, &who).await? {
        return Err(ApiError::Conflict("it closed meanwhile: nothing is waiting for a decision".into()));
    }
    let (item, run) = load(&state, &caller, &id).await?;
    Ok(Json(item_view(&caller, item, run.as_ref())))
}

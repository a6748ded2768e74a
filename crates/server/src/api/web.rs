//! Routes the web app reads: who is signed in, sign-in links, the sandbox list and the
//! page header's counts, a device's sessions, and a session's screen.

use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::IntoResponse;
use axum::Json;
use drover_api::{AttentionRow, LastRunView, LoginLink, MeView, Overview, SandboxList, SandboxView, SessionList};
use drover_store::{Principal, SandboxCursor, SandboxFilter, SandboxItem};
use serde::Deserialize;

use super::sessions::view as session_view;
use crate::auth::{self, Caller};
use crate::screens::{self, ScreenError, ScreenPoint};
use crate::{ApiError, AppState};

/// `GET /api/v1/me`.
pub async fn me(caller: Caller) -> Result<Json<MeView>, ApiError> {
    match caller.0 {
        Principal::Member { name, role, .. } => Ok(Json(MeView { name, role: role.as_str().to_string() })),
        Principal::Device { .. } | Principal::Agent { .. } => Err(ApiError::Forbidden("only members have a profile".into())),
    }
}

/// Issues a one-time sign-in link for `member`.
pub async fn issue_login_link(state: &AppState, member: drover_core::MemberId) -> Result<LoginLink, ApiError> {
    let code = auth::new_token(auth::LOGIN_CODE_PREFIX);
    let ttl = chrono::Duration::from_std(state.config.login_link_ttl).unwrap_or(chrono::Duration::minutes(15));
    state.store.add_login_link(member, &auth::digest(&code), ttl).await?;
    // The code rides in the fragment, which browsers never send: it stays out of proxy
    // and server logs; the page posts it (`POST /api/v1/login/link`).
    Ok(LoginLink { path: format!("/login#{code}"), expires_at: drover_store::format_time(chrono::Utc::now() + ttl) })
}

/// `POST /api/v1/login-links`: a one-time sign-in link for the caller (`drover ui`).
pub async fn login_link(State(state): State<AppState>, caller: Caller) -> Result<(StatusCode, Json<LoginLink>), ApiError> {
    let Principal::Member { id, .. } = caller.0 else {
        return Err(ApiError::Forbidden("only members can sign in to the web app".into()));
    };
    Ok((StatusCode::CREATED, Json(issue_login_link(&state, id).await?)))
}

/// `POST /api/v1/logout`: ends the browser session and clears its cookie.
pub async fn logout(State(state): State<AppState>, caller: Caller, headers: HeaderMap) -> Result<impl IntoResponse, ApiError> {
    caller.member_name()?;
    if let Some(cookie) = auth::session_cookie(&headers) {
        state.store.revoke_web_session(&auth::digest(&cookie)).await?;
    }
    let clear = format!("{}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0", auth::COOKIE);
    Ok((StatusCode::NO_CONTENT, [(header::SET_COOKIE, HeaderValue::from_str(&clear).expect("ASCII"))]))
}

/// `GET /api/v1/overview`: the running count, the Sessions page's header badges and
/// the sessions the stale monitor flagged ("Sessions needing attention").
pub async fn overview(State(state): State<AppState>, caller: Caller) -> Result<Json<Overview>, ApiError> {
    caller.member_name()?;
    let ws = caller.0.workspace();
    let running = state.store.count_live_sessions(ws).await?;
    let (queued, on_finished_tasks) = state.store.task_counts(ws).await?;
    let attention: Vec<AttentionRow> = state
        .store
        .stale_sessions(ws)
        .await?
        .into_iter()
        .filter_map(|c| {
            let flag = c.session.stale_flag?;
            Some(AttentionRow {
                session: c.session.id,
                title: c.session.title,
                outcome: c.session.outcome,
                flag: flag.label().into(),
                explanation: flag.explanation().into(),
                agent: c.session.agent_name,
                device: c.session.device_name,
                last_contact_at: c.last_contact_at,
            })
        })
        .collect();
    let tasks_needing_a_person = state.store.tasks_needing_a_person(ws).await?;
    let needs_you = state.store.needs_you(ws).await?;
    Ok(Json(Overview { running, queued, on_finished_tasks, stale: attention.len() as u32, tasks_needing_a_person, needs_you, attention }))
}

/// Query of the sandbox list.
#[derive(Debug, Deserialize)]
pub struct SandboxParams {
    /// `live` (default), `open` or `all`.
    pub filter: Option<String>,
    /// Search text (title, device, sandbox or session id).
    pub q: Option<String>,
    /// From a previous batch's `next_cursor`.
    pub cursor: Option<String>,
    /// Batch size (default 50, at most 200).
    pub limit: Option<i64>,
}

/// A keyset cursor `created_at|id`, as a batch's last row gives it.
fn parse_keyset<T: std::str::FromStr>(c: &str) -> Result<(String, T), ApiError> {
    let bad = || ApiError::BadRequest("invalid cursor: pass the `next_cursor` of the previous batch".into());
    let (at, id) = c.split_once('|').ok_or_else(bad)?;
    drover_store::parse_time(at).ok_or_else(bad)?;
    Ok((at.to_string(), id.parse().map_err(|_| bad())?))
}

fn parse_cursor(c: &str) -> Result<SandboxCursor, ApiError> {
    let (created_at, id) = parse_keyset(c)?;
    Ok(SandboxCursor { created_at, id })
}

/// Per run, the words of the newest thing it waits on a person for.
type Waiting = std::collections::HashMap<drover_core::SessionId, String>;

fn sandbox_view(caller: &Caller, b: SandboxItem, waiting: &Waiting) -> SandboxView {
    let waits = b.last_run.as_ref().filter(|_| b.live).and_then(|r| waiting.get(&r.id).cloned());
    let working_on = match &b.task {
        Some(t) => match &t.stage {
            Some(stage) => format!("{} - {}", drover_core::task::stage_label(stage), t.title),
            None => t.title.clone(),
        },
        None => b.title.clone(),
    };
    // A session still open on a finished task is a leftover (seed 001).
    let warning = b.task.as_ref().filter(|t| t.status != "open" && b.live).map(|t| format!("task {}", t.status));
    SandboxView {
        id: b.id,
        kind: b.kind,
        task: b.task.as_ref().map(|t| t.id),
        task_type: b.task.as_ref().map(|t| t.kind.clone()),
        state: b.state,
        live: b.live,
        last_run: b.last_run.map(|r| LastRunView {
            id: r.id,
            outcome: r.outcome,
            exit_code: r.exit_code,
            started_at: r.started_at,
            ended_at: r.ended_at,
            can_drop_in: caller.may_drop_in_run(r.operator),
        }),
        runs: b.runs,
        agent: b.agent,
        working_on,
        device: b.device_name,
        repo: b.repo,
        cost_usd: b.cost.flatten().map(drover_core::spend::usd),
        cost_unknown: matches!(b.cost, Some(None)),
        task_cost_usd: b.task_cost.flatten().map(drover_core::spend::usd),
        task_cost_unknown: matches!(b.task_cost, Some(None)),
        warning,
        waiting: waits,
        created_at: b.created_at,
    }
}

/// `GET /api/v1/sandboxes`: a batch of the sandbox list.
pub async fn sandboxes(
    State(state): State<AppState>,
    caller: Caller,
    Query(p): Query<SandboxParams>,
) -> Result<Json<SandboxList>, ApiError> {
    caller.member_name()?;
    let filter = match p.filter.as_deref().unwrap_or("live") {
        "live" => SandboxFilter::Live,
        "open" => SandboxFilter::Open,
        "all" => SandboxFilter::All,
        other => return Err(ApiError::BadRequest(format!("unknown filter `{other}`: use live, open or all"))),
    };
    if p.q.as_ref().is_some_and(|q| q.len() > 200) {
        return Err(ApiError::BadRequest("the search is over 200 characters".into()));
    }
    let cursor = p.cursor.as_deref().map(parse_cursor).transpose()?;
    let limit = p.limit.unwrap_or(50).clamp(1, 200);
    let batch = state.store.list_sandboxes(caller.0.workspace(), filter, p.q.as_deref(), cursor.as_ref(), limit).await?;
    let next_cursor = batch.next.map(|c| format!("{}|{}", c.created_at, c.id));
    // Newest first: the first item seen for a run is the one its row shows.
    let mut waiting = Waiting::new();
    for item in state.store.open_attention(caller.0.workspace()).await? {
        waiting.entry(item.session).or_insert_with(|| drover_core::attention::waiting_words(item.kind, item.tool.as_deref()));
    }
    let sandboxes = batch.items.into_iter().map(|b| sandbox_view(&caller, b, &waiting)).collect();
    Ok(Json(SandboxList { sandboxes, next_cursor }))
}

/// Paging of a device's sessions.
#[derive(Debug, Deserialize)]
pub struct DeviceSessionParams {
    /// `created_at|id` of the last session of the previous batch.
    pub cursor: Option<String>,
    /// Batch size (default 50, at most 200).
    pub limit: Option<i64>,
}

/// `GET /api/v1/devices/{name}/sessions`: the device's sessions, newest first.
pub async fn device_sessions(
    State(state): State<AppState>,
    caller: Caller,
    Path(name): Path<String>,
    Query(p): Query<DeviceSessionParams>,
) -> Result<Json<SessionList>, ApiError> {
    caller.member_name()?;
    let device = state
        .store
        .device_by_name(caller.0.workspace(), &name)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("no device named `{name}`")))?;
    let before: Option<(String, drover_core::SessionId)> = p.cursor.as_deref().map(parse_keyset).transpose()?;
    let limit = p.limit.unwrap_or(50).clamp(1, 200);
    let rows = state.store.list_device_sessions(device.id, before.as_ref().map(|(a, i)| (a.as_str(), *i)), limit).await?;
    Ok(Json(SessionList { sessions: rows.into_iter().map(|r| session_view(&state, &caller, r)).collect() }))
}

/// Parameters of `screen`.
#[derive(Debug, Deserialize)]
pub struct ScreenParams {
    /// The screen as a player shows it at this time (µs since the start): after the
    /// output and resizes at or before it. Without it, after everything stored.
    pub t: Option<u64>,
}

/// `GET /api/v1/sessions/{id}/screen`: the session's screen after everything stored (the
/// Final screen of a finished session), or at a time of its recording (`?t=µs`, the
/// player's seek), as escape sequences that draw it on a blank terminal; its size is in
/// `x-drover-cols` / `x-drover-rows`, the stream offset and time it stands for in
/// `x-drover-offset` / `x-drover-t`. It comes from the nearest screen checkpoint and the
/// output after it: bounded work however long the session ran (503 while the
/// checkpoints of an old session are still being built).
pub async fn screen(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    Query(p): Query<ScreenParams>,
) -> Result<impl IntoResponse, ApiError> {
    let (row, _) = super::sessions::load_for_drop_in(&state, &caller, &id).await?;
    let point = p.t.map_or(ScreenPoint::End, ScreenPoint::Time);
    let screen = screens::screen_at(&state.store, row.id, point, (row.cols, row.rows)).await.map_err(|e| match e {
        ScreenError::NotReady => ApiError::Unavailable(e.to_string()),
        ScreenError::Store(e) => e.into(),
    })?;
    let mut headers = HeaderMap::new();
    headers.insert("x-drover-cols", HeaderValue::from(screen.size.0));
    headers.insert("x-drover-rows", HeaderValue::from(screen.size.1));
    headers.insert("x-drover-offset", HeaderValue::from(screen.offset));
    headers.insert("x-drover-t", HeaderValue::from(screen.t_micros));
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/octet-stream"));
    Ok((headers, screen.dump.into_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_bad_ones_are_refused() {
        let id = drover_core::SandboxId::new();
        let c = parse_cursor(&format!("2026-11-30T07:00:00.000000Z|{id}")).unwrap();
        assert_eq!(c.id, id);
        assert!(parse_cursor("nonsense").is_err());
        assert!(parse_cursor("2026-11-30T07:00:00Z|sbx_nope").is_err());
        assert!(parse_cursor(&format!("yesterday|{id}")).is_err());
    }
}

//! The HTTP API under `/api/v1`: routes, and a JSON extractor whose rejections are
//! [`ApiError`]s (so a malformed body gets a JSON error that says what was wrong).

pub mod attention;
pub mod devices;
pub mod events;
pub mod handoff;
pub mod members;
pub mod notes;
pub mod openapi;
pub mod pages;
pub mod prices;
pub mod push;
pub mod session_start;
pub mod sessions;
pub mod skills;
pub mod spend;
pub mod stream;
pub mod task_controls;
pub mod tasks;
pub mod web;
pub mod webhooks;
mod why;
pub mod workflow;

use axum::extract::rejection::JsonRejection;
use axum::extract::{DefaultBodyLimit, FromRequest, Request};
use axum::routing::{delete, get, post, put};
use axum::Router;
use serde::de::DeserializeOwned;

use crate::{device_link, viewer, ApiError, AppState};

/// Unknown paths: a JSON error under `/api`, the web app anywhere else.
async fn fallback(uri: axum::http::Uri) -> axum::response::Response {
    use axum::response::IntoResponse;
    if uri.path() == "/api" || uri.path().starts_with("/api/") {
        ApiError::NotFound("no such API route; see /api/v1".into()).into_response()
    } else {
        crate::web::page(uri).await
    }
}

/// `GET /api/v1/health`: `ok`, with the server's version in the
/// [`drover_api::VERSION_HEADER`] header.
async fn health() -> impl axum::response::IntoResponse {
    ([(drover_api::VERSION_HEADER, env!("CARGO_PKG_VERSION"))], "ok")
}

/// Largest request body accepted.
pub const MAX_BODY: usize = 1024 * 1024;

/// The API's router.
pub fn router(state: AppState) -> Router {
    routes()
        .fallback(fallback)
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .layer(axum::middleware::from_fn(json_errors))
        .layer(axum::middleware::from_fn_with_state(state.clone(), crate::metrics::track_http))
        .with_state(state)
}

/// Every route.
fn routes() -> Router<AppState> {
    Router::new()
        .route("/metrics", get(crate::metrics::scrape))
        .route("/api/v1/health", get(health))
        .route("/api/v1/openapi.json", get(openapi::serve))
        .route("/api/v1/outcomes", get(openapi::outcomes))
        .route("/api/v1/me", get(web::me))
        .route("/api/v1/login-links", post(web::login_link))
        .route("/api/v1/logout", post(web::logout))
        .route("/api/v1/login", post(members::login))
        .route("/api/v1/login/token", post(members::login_token))
        .route("/api/v1/me/password", put(members::set_password))
        .route("/api/v1/tokens", get(members::tokens).post(members::create_token))
        .route("/api/v1/tokens/{id}/revoke", post(members::revoke_token))
        .route("/api/v1/members", get(members::list))
        .route("/api/v1/members/{name}", delete(members::remove))
        .route("/api/v1/members/{name}/tokens", get(members::member_tokens))
        .route("/api/v1/members/{name}/role", put(members::set_role))
        .route("/api/v1/invites", get(members::invites).post(members::invite))
        .route("/api/v1/invites/{id}/revoke", post(members::revoke_invite))
        .route("/api/v1/invites/lookup", post(members::invite_info))
        .route("/api/v1/invites/accept", post(members::accept))
        .route("/api/v1/overview", get(web::overview))
        .route("/api/v1/sandboxes", get(web::sandboxes))
        .route("/api/v1/stream", get(stream::stream))
        .route("/api/v1/devices/{name}/sessions", get(web::device_sessions))
        .route("/api/v1/sessions/{id}/screen", get(web::screen))
        .route("/login/{code}", get(crate::web::retired_login))
        .route("/api/v1/login/link", post(crate::web::redeem_login))
        .route("/api/v1/repos", get(workflow::repos).post(workflow::add_repo))
        .route("/api/v1/repos/{name}", get(pages::repo))
        .route("/api/v1/workflow", get(workflow::workflow).put(workflow::set_workflow))
        .route("/api/v1/webhooks", get(webhooks::list).post(webhooks::create))
        .route("/api/v1/webhooks/{id}", delete(webhooks::remove))
        .route("/api/v1/webhooks/{id}/rotate", post(webhooks::rotate))
        .route("/api/v1/webhooks/{id}/enable", post(webhooks::enable))
        .route("/api/v1/webhooks/{id}/deliveries", get(webhooks::deliveries))
        .route("/api/v1/webhooks/{id}/deliveries/{msg}/redeliver", post(webhooks::redeliver))
        .route("/api/v1/agents", get(workflow::agents).post(workflow::create_agent))
        .route("/api/v1/agents/{name}", get(pages::agent))
        .route("/api/v1/tasks", get(tasks::list).post(tasks::create))
        .route("/api/v1/tasks/{id}", get(tasks::show).patch(tasks::update))
        .route("/api/v1/tasks/{id}/advance", post(handoff::advance))
        .route("/api/v1/tasks/{id}/comments", post(notes::comment))
        .route("/api/v1/tasks/{id}/blockers", post(notes::block))
        .route("/api/v1/tasks/{id}/questions", post(notes::ask))
        .route("/api/v1/tasks/{id}/launch", post(task_controls::launch))
        .route("/api/v1/tasks/{id}/activate", post(task_controls::activate))
        .route("/api/v1/tasks/{id}/finish", post(task_controls::finish))
        .route("/api/v1/tasks/{id}/mark-done", post(task_controls::mark_done))
        .route("/api/v1/tasks/{id}/abandon", post(task_controls::abandon))
        .route("/api/v1/tasks/{id}/cancel", post(task_controls::cancel))
        .route("/api/v1/tasks/{id}/spend-cap", put(spend::set_task_cap))
        .route("/api/v1/spend", get(spend::report))
        .route("/api/v1/spend/cap", put(spend::set_cap))
        .route("/api/v1/prices", get(prices::get).put(prices::set))
        .route("/api/v1/skills", get(skills::list))
        .route("/api/v1/skills/{name}", put(skills::put).delete(skills::remove))
        .route("/api/v1/notes/{id}", get(notes::note))
        .route("/api/v1/notes/{id}/answer", post(notes::answer))
        .route("/api/v1/notes/{id}/resolve", post(notes::resolve))
        .route("/api/v1/devices", get(devices::list).post(devices::add))
        .route("/api/v1/devices/{name}/revoke", post(devices::revoke))
        .route("/api/v1/devices/enroll", post(devices::enroll))
        .route("/api/v1/device/connect", get(device_link::connect))
        .route("/api/v1/sessions", get(sessions::list).post(session_start::start))
        .route("/api/v1/sessions/{id}", get(sessions::show))
        .route("/api/v1/sessions/{id}/input", post(sessions::input))
        .route("/api/v1/sessions/{id}/ask", post(sessions::ask))
        .route("/api/v1/sessions/{id}/stop", post(sessions::stop))
        .route("/api/v1/sessions/{id}/text", get(sessions::text))
        .route("/api/v1/sessions/{id}/output", get(sessions::output))
        .route("/api/v1/sessions/{id}/export", get(sessions::export))
        .route("/api/v1/sessions/{id}/recording", get(sessions::recording))
        .route("/api/v1/sessions/{id}/events", get(events::for_session))
        .route("/api/v1/sessions/{id}/terminal", get(viewer::terminal))
        .route("/api/v1/events", get(events::list))
        .route("/api/v1/audit/export", get(events::export))
        .merge(needs_you().merge(get_told()))
}

/// The routes of "Getting told": each member's browsers and notification choices.
fn get_told() -> Router<AppState> {
    Router::new()
        .route("/api/v1/me/notifications", get(push::choices).put(push::set_choices))
        .route("/api/v1/push/key", get(push::key))
        .route("/api/v1/push/subscriptions", get(push::list).post(push::subscribe).delete(push::unsubscribe))
        .route("/api/v1/push/test", post(push::test))
}

/// The routes of "Needs you": the inbox, decisions, and what a run's hook reports.
fn needs_you() -> Router<AppState> {
    Router::new()
        .route("/api/v1/inbox", get(attention::inbox))
        .route("/api/v1/attention/{id}", get(attention::show))
        .route("/api/v1/attention/{id}/decide", post(attention::decide))
        .route("/api/v1/attention/{id}/decision", get(attention::decision))
        .route("/api/v1/hooks/claude", post(attention::claude_hook))
        .route("/api/v1/hooks/codex", post(attention::codex_hook))
}

/// Longest error text kept when a plain-text rejection is turned into JSON.
const MAX_ERROR_TEXT: usize = 4096;

/// Every error under `/api` is JSON `{error, code}`: rejections raised before a handler
/// runs (an undecodable path segment, a malformed query string, a wrong method) are plain
/// text from axum, so they are rewrapped here.
async fn json_errors(req: Request, next: axum::middleware::Next) -> axum::response::Response {
    use axum::http::{header, StatusCode};
    use axum::response::IntoResponse;
    let api = req.uri().path().starts_with("/api/");
    let resp = next.run(req).await;
    let status = resp.status();
    let is_json = resp.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(|v| v.starts_with("application/json"));
    if !api || is_json || !(status.is_client_error() || status.is_server_error()) {
        return resp;
    }
    let (parts, body) = resp.into_parts();
    let text = axum::body::to_bytes(body, MAX_ERROR_TEXT).await.map(|b| String::from_utf8_lossy(&b).trim().to_string()).unwrap_or_default();
    let error = match (status, text.is_empty()) {
        (StatusCode::METHOD_NOT_ALLOWED, _) => "this route does not take that method; see /api/v1".to_string(),
        (_, true) => status.canonical_reason().unwrap_or("error").to_lowercase(),
        (_, false) => text,
    };
    let code = match status {
        StatusCode::BAD_REQUEST => "bad_request",
        StatusCode::NOT_FOUND => "not_found",
        StatusCode::METHOD_NOT_ALLOWED => "method_not_allowed",
        StatusCode::PAYLOAD_TOO_LARGE => "too_large",
        StatusCode::UNSUPPORTED_MEDIA_TYPE => "unsupported_media_type",
        s if s.is_server_error() => "internal",
        _ => "bad_request",
    };
    let mut out = (status, axum::Json(drover_api::ErrorBody { error, code: code.into() })).into_response();
    for (name, value) in parts.headers.iter().filter(|(n, _)| *n == header::ALLOW || *n == header::RETRY_AFTER) {
        out.headers_mut().insert(name.clone(), value.clone());
    }
    out
}

/// A JSON body; malformed or oversized bodies become JSON errors.
pub struct ApiJson<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        match axum::Json::<T>::from_request(req, state).await {
            Ok(axum::Json(v)) => Ok(ApiJson(v)),
            Err(JsonRejection::BytesRejection(e)) if e.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE => {
                Err(ApiError::TooLarge(format!("the request body is over {} bytes", MAX_BODY)))
            }
            Err(e) => Err(ApiError::BadRequest(format!("invalid request body: {}", e.body_text()))),
        }
    }
}

//! Webhook endpoints (owners and admins): register, list, remove, rotate the secret,
//! re-enable, and read or redeliver an endpoint's deliveries. Every change is an event.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use drover_api::{CreateWebhook, DeliveryView, WebhookSecretView, WebhookView};
use drover_core::activity::EventKind;
use drover_core::permissions::{workspace_allowed, WorkspaceAction};
use drover_core::webhook::WebhookEvent;
use drover_core::{MessageId, WebhookId};
use drover_store::{DeliveryRow, NewEvent, WebhookRow};

use super::ApiJson;
use crate::auth::Caller;
use crate::webhooks::new_secret;
use crate::{ApiError, AppState};

/// How long a rotated-out secret keeps signing, so receivers can switch over.
const ROTATION_OVERLAP: chrono::Duration = chrono::Duration::hours(24);
/// Deliveries shown per endpoint.
const LOG_LIMIT: i64 = 200;

fn bad(e: impl std::fmt::Display) -> ApiError {
    ApiError::BadRequest(e.to_string())
}

fn admin(caller: &Caller) -> Result<String, ApiError> {
    let name = caller.member_name()?;
    match &caller.0 {
        drover_store::Principal::Member { role, .. } if workspace_allowed(*role, WorkspaceAction::Administer) => Ok(name),
        _ => Err(ApiError::Forbidden("only a workspace owner or admin can manage webhooks".into())),
    }
}

fn view(w: &WebhookRow) -> WebhookView {
    let now = drover_store::now();
    WebhookView {
        id: w.id,
        url: w.url.clone(),
        events: w.events.clone(),
        disabled_reason: w.disabled_reason.clone(),
        signing_secrets: w.secrets.iter().filter(|s| s.expires_at.as_deref().is_none_or(|e| e > now.as_str())).count() as u32,
        created_by: w.created_by.clone(),
        created_at: w.created_at.clone(),
    }
}

fn delivery_view(d: DeliveryRow) -> DeliveryView {
    DeliveryView {
        id: d.id,
        event_type: d.event_type,
        state: d.state,
        attempts: d.attempts,
        next_attempt_at: d.next_attempt_at,
        last_status: d.last_status,
        last_error: d.last_error,
        created_at: d.created_at,
        delivered_at: d.delivered_at,
        payload: serde_json::from_str(&d.payload).unwrap_or(serde_json::Value::Null),
    }
}

async fn load(state: &AppState, caller: &Caller, id: &str) -> Result<WebhookRow, ApiError> {
    let wid: WebhookId = id.trim().parse().map_err(bad)?;
    match state.store.webhook(wid).await? {
        Some(w) if w.workspace == caller.0.workspace() => Ok(w),
        _ => Err(ApiError::NotFound(format!("no webhook {wid}: `drover webhook list` shows them"))),
    }
}

async fn audit(state: &AppState, caller: &Caller, who: &str, what: &str, w: &WebhookRow) -> Result<(), ApiError> {
    let e = NewEvent {
        workspace: caller.0.workspace(),
        session: None,
        task: None,
        kind: EventKind::WebhookChanged,
        actor: who.into(),
        // The host only: a webhook URL often carries a token, and every member reads the feed.
        detail: serde_json::json!({ "change": what, "webhook": w.id.to_string(), "host": host(&w.url) }),
    };
    state.store.record_event(&e).await?;
    Ok(())
}

fn host(url: &str) -> String {
    reqwest::Url::parse(url).ok().and_then(|u| u.host_str().map(str::to_string)).unwrap_or_default()
}

/// Checks an endpoint URL: absolute http(s) with a host and no user name or password,
/// at most 2,048 bytes.
fn check_url(url: &str) -> Result<(), ApiError> {
    if url.len() > 2048 {
        return Err(bad("the URL is over 2048 bytes"));
    }
    let parsed = reqwest::Url::parse(url).map_err(|e| bad(format!("`{}` is not a URL: {e}", url.chars().take(80).collect::<String>())))?;
    if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
        return Err(bad("a webhook URL is http:// or https:// with a host"));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(bad("a webhook URL carries no user name or password: deliveries are authenticated by their signature"));
    }
    Ok(())
}

/// Checks event types: known ones, at least one; returns them without repeats.
fn check_events(events: &[String]) -> Result<Vec<String>, ApiError> {
    if events.is_empty() {
        let all: Vec<&str> = WebhookEvent::ALL.iter().map(|e| e.as_str()).collect();
        return Err(bad(format!("name at least one event type: {}", all.join(", "))));
    }
    let mut out: Vec<String> = Vec::new();
    for e in events {
        let Some(kind) = WebhookEvent::parse(e) else {
            let all: Vec<&str> = WebhookEvent::ALL.iter().map(|e| e.as_str()).collect();
            return Err(bad(format!("unknown event type `{}`: use {}", e.chars().take(60).collect::<String>(), all.join(", "))));
        };
        if !out.iter().any(|o| o == kind.as_str()) {
            out.push(kind.as_str().into());
        }
    }
    Ok(out)
}

/// `POST /api/v1/webhooks`: registers an endpoint; the answer carries its secret.
pub async fn create(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(req): ApiJson<CreateWebhook>,
) -> Result<(StatusCode, Json<WebhookSecretView>), ApiError> {
    let who = admin(&caller)?;
    check_url(&req.url)?;
    let parsed = reqwest::Url::parse(&req.url).map_err(|e| bad(e.to_string()))?;
    crate::egress::check_url(&state.config.egress, &parsed).await.map_err(bad)?;
    let events = check_events(&req.events)?;
    let secret = new_secret();
    let id = state.store.create_webhook(caller.0.workspace(), &req.url, &events, &secret, &who).await?;
    let w = state.store.webhook(id).await?.expect("just made");
    audit(&state, &caller, &who, "added", &w).await?;
    Ok((StatusCode::CREATED, Json(WebhookSecretView { webhook: view(&w), secret })))
}

/// `GET /api/v1/webhooks`.
pub async fn list(State(state): State<AppState>, caller: Caller) -> Result<Json<Vec<WebhookView>>, ApiError> {
    admin(&caller)?;
    Ok(Json(state.store.list_webhooks(caller.0.workspace()).await?.iter().map(view).collect()))
}

/// `DELETE /api/v1/webhooks/{id}`: removes the endpoint and its delivery log.
pub async fn remove(State(state): State<AppState>, caller: Caller, Path(id): Path<String>) -> Result<StatusCode, ApiError> {
    let who = admin(&caller)?;
    let w = load(&state, &caller, &id).await?;
    state.store.delete_webhook(w.id).await?;
    audit(&state, &caller, &who, "removed", &w).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `POST /api/v1/webhooks/{id}/rotate`: a new secret; the old one signs too for a day.
pub async fn rotate(State(state): State<AppState>, caller: Caller, Path(id): Path<String>) -> Result<Json<WebhookSecretView>, ApiError> {
    let who = admin(&caller)?;
    let w = load(&state, &caller, &id).await?;
    let secret = new_secret();
    let until = drover_store::format_time(chrono::Utc::now() + ROTATION_OVERLAP);
    state.store.rotate_webhook_secret(w.id, &secret, &until).await?;
    audit(&state, &caller, &who, "secret rotated", &w).await?;
    let w = state.store.webhook(w.id).await?.expect("exists");
    Ok(Json(WebhookSecretView { webhook: view(&w), secret }))
}

/// `POST /api/v1/webhooks/{id}/enable`: sends to a disabled endpoint again.
pub async fn enable(State(state): State<AppState>, caller: Caller, Path(id): Path<String>) -> Result<Json<WebhookView>, ApiError> {
    let who = admin(&caller)?;
    let w = load(&state, &caller, &id).await?;
    state.store.set_webhook_disabled(w.id, None).await?;
    audit(&state, &caller, &who, "enabled", &w).await?;
    Ok(Json(view(&state.store.webhook(w.id).await?.expect("exists"))))
}

/// `GET /api/v1/webhooks/{id}/deliveries`: the endpoint's delivery log, newest first.
pub async fn deliveries(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<Vec<DeliveryView>>, ApiError> {
    admin(&caller)?;
    let w = load(&state, &caller, &id).await?;
    Ok(Json(state.store.deliveries(w.id, LOG_LIMIT).await?.into_iter().map(delivery_view).collect()))
}

/// `POST /api/v1/webhooks/{id}/deliveries/{msg}/redeliver`: sends it again now, with
/// the same message id.
pub async fn redeliver(
    State(state): State<AppState>,
    caller: Caller,
    Path((id, msg)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    admin(&caller)?;
    let w = load(&state, &caller, &id).await?;
    let msg: MessageId = msg.trim().parse().map_err(bad)?;
    if let Some(why) = &w.disabled_reason {
        return Err(ApiError::Conflict(format!("webhook {} is disabled ({why}): `drover webhook enable` it first", w.id)));
    }
    if !state.store.redeliver(w.id, msg).await? {
        return Err(ApiError::NotFound(format!("no delivery {msg} for webhook {}", w.id)));
    }
    Ok(StatusCode::ACCEPTED)
}

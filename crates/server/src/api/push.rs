//! Getting told: the VAPID key browsers subscribe with, each member's browser
//! subscriptions and notification choices, and a test push. Members only, each to
//! their own; agents and devices never.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use drover_api::{NewPushSubscription, NotificationChoices, PushKey, PushSubscriptionView, PushTestResult, RemovePushSubscription};
use drover_core::notify::{self, Choices, Window, MAX_COOLDOWN};
use drover_core::MemberId;
use drover_store::{NotifyChoices, Principal, PushSubscriptionRow};
use std::time::Duration;

use super::ApiJson;
use crate::auth::Caller;
use crate::{ApiError, AppState};

/// Most browsers one member may register.
const MAX_SUBSCRIPTIONS: usize = 20;

/// The calling member's id; a 403 for agents and devices.
fn member(caller: &Caller) -> Result<MemberId, ApiError> {
    caller.member_name()?;
    match &caller.0 {
        Principal::Member { id, .. } => Ok(*id),
        _ => Err(ApiError::Forbidden("only members get notifications".into())),
    }
}

fn bad(why: impl std::fmt::Display) -> ApiError {
    ApiError::BadRequest(why.to_string())
}

fn view(s: PushSubscriptionRow) -> PushSubscriptionView {
    PushSubscriptionView { id: s.id.to_string(), endpoint: s.endpoint, created_at: s.created_at }
}

/// `GET /api/v1/push/key`: the VAPID public key (made the first time it is asked for).
pub async fn key(State(state): State<AppState>, caller: Caller) -> Result<Json<PushKey>, ApiError> {
    member(&caller)?;
    let (_, public_key) = state.store.vapid_key(crate::push::crypto::new_vapid_key).await?;
    Ok(Json(PushKey { public_key }))
}

/// `GET /api/v1/push/subscriptions`: the caller's browsers.
pub async fn list(State(state): State<AppState>, caller: Caller) -> Result<Json<Vec<PushSubscriptionView>>, ApiError> {
    let me = member(&caller)?;
    Ok(Json(state.store.push_subscriptions(me).await?.into_iter().map(view).collect()))
}

/// Checks an endpoint: an absolute http(s) URL the egress rules let pushes reach.
fn check_endpoint(state: &AppState, endpoint: &str) -> Result<(), ApiError> {
    if endpoint.len() > 2048 {
        return Err(bad("the endpoint is over 2048 bytes"));
    }
    let url = reqwest::Url::parse(endpoint).map_err(|e| bad(format!("the endpoint is not a URL: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() || !url.username().is_empty() || url.password().is_some() {
        return Err(bad("a push endpoint is an http:// or https:// URL with a host and no user name or password"));
    }
    if let Some(refused) = crate::egress::literal_refusal(&state.config.egress, endpoint) {
        return Err(bad(format!("{refused}: pushes obey the webhooks' egress rules (--allow-webhook-host, --allow-local-webhooks)")));
    }
    Ok(())
}

/// `POST /api/v1/push/subscriptions`: registers the caller's browser.
pub async fn subscribe(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(req): ApiJson<NewPushSubscription>,
) -> Result<(StatusCode, Json<PushSubscriptionView>), ApiError> {
    let me = member(&caller)?;
    check_endpoint(&state, &req.endpoint)?;
    crate::push::crypto::check_keys(&req.p256dh, &req.auth).map_err(bad)?;
    let mine = state.store.push_subscriptions(me).await?;
    if mine.len() >= MAX_SUBSCRIPTIONS && !mine.iter().any(|s| s.endpoint == req.endpoint) {
        return Err(bad(format!("you have {MAX_SUBSCRIPTIONS} browsers registered: remove one first (`drover notify show` lists them)")));
    }
    let row = state.store.add_push_subscription(caller.0.workspace(), me, &req.endpoint, &req.p256dh, &req.auth).await?;
    Ok((StatusCode::CREATED, Json(view(row))))
}

/// `DELETE /api/v1/push/subscriptions`: forgets one of the caller's browsers.
pub async fn unsubscribe(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(req): ApiJson<RemovePushSubscription>,
) -> Result<StatusCode, ApiError> {
    let me = member(&caller)?;
    if state.store.remove_push_subscription(me, req.subscription.trim()).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::NotFound("you have no such browser registered: `drover notify show` lists yours".into()))
    }
}

fn choices_view(c: NotifyChoices) -> NotificationChoices {
    NotificationChoices {
        events: c.choices.events.iter().map(|k| k.as_str().to_string()).collect(),
        quiet: c.choices.quiet.map(|w| w.to_string()),
        zone: c.zone,
        cooldown_secs: c.choices.cooldown.as_secs(),
    }
}

/// `GET /api/v1/me/notifications`: the caller's choices.
pub async fn choices(State(state): State<AppState>, caller: Caller) -> Result<Json<NotificationChoices>, ApiError> {
    let me = member(&caller)?;
    Ok(Json(choices_view(state.store.notify_choices(me).await?)))
}

/// Checks choices as sent.
fn check_choices(req: &NotificationChoices) -> Result<NotifyChoices, ApiError> {
    let events = notify::parse_events(&req.events.join(",")).map_err(bad)?;
    let quiet = req.quiet.as_deref().filter(|q| !q.trim().is_empty()).map(Window::parse).transpose().map_err(bad)?;
    let zone = req.zone.trim();
    if zone.len() > 64 || !drover_store::valid_zone(zone) {
        return Err(bad(notify::ChoiceError::Zone(zone.chars().take(64).collect())));
    }
    let cooldown = Duration::from_secs(req.cooldown_secs);
    if cooldown > MAX_COOLDOWN {
        return Err(bad(notify::ChoiceError::Cooldown(format!("{}s", req.cooldown_secs))));
    }
    Ok(NotifyChoices { choices: Choices { events, quiet, cooldown }, zone: zone.to_string() })
}

/// `PUT /api/v1/me/notifications`: sets the caller's choices.
pub async fn set_choices(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(req): ApiJson<NotificationChoices>,
) -> Result<Json<NotificationChoices>, ApiError> {
    let me = member(&caller)?;
    let choices = check_choices(&req)?;
    state.store.set_notify_choices(me, &choices).await?;
    Ok(Json(choices_view(choices)))
}

/// `POST /api/v1/push/test`: a test push to each of the caller's browsers (whatever
/// their choices and quiet hours say).
pub async fn test(State(state): State<AppState>, caller: Caller) -> Result<Json<PushTestResult>, ApiError> {
    let me = member(&caller)?;
    let payload = notify::Payload {
        title: "Drover".into(),
        body: "Test notification: this browser will be told.".into(),
        url: "/inbox".into(),
        tag: "drover-test".into(),
        runs: 0,
        attention: None,
    };
    let queued = state.store.queue_push(me, &serde_json::to_string(&payload).expect("serialises")).await?;
    if queued == 0 {
        return Err(ApiError::Conflict("no browser is registered for you: enable notifications in the web app's Settings first".into()));
    }
    Ok(Json(PushTestResult { queued }))
}

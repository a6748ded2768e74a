//! `GET /api/v1/devices`.

use axum::extract::State;
use axum::Json;
use drover_api::DeviceView;
use drover_core::permissions::{workspace_allowed, WorkspaceAction};

use crate::auth::Caller;
use crate::{ApiError, AppState};

fn view(state: &AppState, d: drover_store::DeviceRow) -> DeviceView {
    DeviceView {
        connected: state.devices.is_connected(d.id),
        id: d.id,
        name: d.name,
        slots: d.slots,
        live_sessions: d.live_sessions,
        last_contact_at: d.last_contact_at,
        revoked_at: d.revoked_at,
        sandbox: d.sandbox.as_deref().and_then(|j| serde_json::from_str(j).ok()),
    }
}

/// Lists the workspace's devices with slots, live sessions, connection and last contact.
pub async fn list(State(state): State<AppState>, caller: Caller) -> Result<Json<Vec<DeviceView>>, ApiError> {
    caller.member_name()?;
    let rows = state.store.list_devices(caller.0.workspace()).await?;
    Ok(Json(rows.into_iter().map(|d| view(&state, d)).collect()))
}

/// `POST /api/v1/devices/{name}/revoke` (owners and admins): revokes the device's
/// credential and drops its link; it is refused from now on, and its live sessions are
/// flagged and then marked lost. `drover device add` registers it again.
pub async fn revoke(
    State(state): State<AppState>,
    caller: Caller,
    axum::extract::Path(name): axum::extract::Path<String>,
) -> Result<Json<DeviceView>, ApiError> {
    let who = match &caller.0 {
        drover_store::Principal::Member { role, name, .. } if workspace_allowed(*role, WorkspaceAction::Administer) => name.clone(),
        drover_store::Principal::Member { .. } => return Err(ApiError::Forbidden("only an owner or admin can revoke a device".into())),
        _ => return Err(caller.member_name().expect_err("not a member")),
    };
    let ws = caller.0.workspace();
    let d = state.store.device_by_name(ws, &name).await?.ok_or_else(|| ApiError::NotFound(format!("no device named `{name}`")))?;
    if state.store.revoke_device(d.id).await? {
        state.devices.kick(d.id).await;
        let e = drover_store::NewEvent {
            workspace: ws,
            session: None,
            task: None,
            kind: drover_core::activity::EventKind::DeviceRevoked,
            actor: who,
            detail: serde_json::json!({ "device": d.name, "live_sessions": d.live_sessions }),
        };
        state.store.record_event(&e).await?;
    }
    Ok(Json(view(&state, state.store.device(d.id).await?.expect("exists"))))
}

/// How long an enrollment token works.
const ENROLLMENT_TTL_HOURS: i64 = 24;

/// `POST /api/v1/devices`: registers a device (owners and admins) and issues a one-time
/// enrollment token, which the device's daemon trades for its own credential.
pub async fn add(
    State(state): State<AppState>,
    caller: Caller,
    super::ApiJson(req): super::ApiJson<drover_api::AddDevice>,
) -> Result<(axum::http::StatusCode, Json<drover_api::DeviceEnrollment>), ApiError> {
    let who = caller.require(drover_core::permissions::WorkspaceAction::Administer)?;
    drover_core::names::check_device_name(&req.name).map_err(|e| ApiError::BadRequest(e.to_string()))?;
    let slots = req.slots.unwrap_or(4);
    if !(1..=1000).contains(&slots) {
        return Err(ApiError::BadRequest("slots must be between 1 and 1000".into()));
    }
    let ws = caller.0.workspace();
    let d = state.store.upsert_device(ws, &req.name, slots).await?;
    state.store.unrevoke_device(d.id).await?;
    let token = crate::auth::new_token(crate::auth::ENROLLMENT_TOKEN_PREFIX);
    let ttl = chrono::Duration::hours(ENROLLMENT_TTL_HOURS);
    let expires_at = state.store.create_enrollment(d.id, &crate::auth::digest(&token), &who, ttl).await?;
    let device = view(&state, state.store.device(d.id).await?.expect("just added"));
    Ok((axum::http::StatusCode::CREATED, Json(drover_api::DeviceEnrollment { device, enrollment_token: token, expires_at })))
}

/// `POST /api/v1/devices/enroll` (no credential: the enrollment token is one): the
/// device's daemon trades its one-time enrollment token for its own credential, which
/// replaces any earlier one. Failures count against the client's sign-in rate limit.
pub async fn enroll(
    State(state): State<AppState>,
    crate::forwarded::ClientAddr(addr): crate::forwarded::ClientAddr,
    super::ApiJson(req): super::ApiJson<drover_api::Enroll>,
) -> Result<(axum::http::StatusCode, Json<drover_api::DeviceCredential>), ApiError> {
    let attempt = crate::limits::count_attempt(&state, addr, None).await?;
    let well_formed = req.token.len() <= 128 && req.token.starts_with(crate::auth::ENROLLMENT_TOKEN_PREFIX) && req.name.len() <= 63;
    let credential = crate::auth::new_token(crate::auth::DEVICE_TOKEN_PREFIX);
    let enrolled = if well_formed {
        state.store.enroll_device(&crate::auth::digest(&req.token), &req.name, &crate::auth::digest(&credential)).await?
    } else {
        None
    };
    if let Some(device) = enrolled {
        crate::limits::forgive(&state, attempt).await;
        // The credential it replaced stops working now, on a live link too.
        state.devices.kick(device).await;
    } else {
        return Err(ApiError::Unauthorized(format!(
            "this enrollment token is not valid for device `{}`: it works once, for the device it was issued to, within {ENROLLMENT_TTL_HOURS} hours — run `drover device add NAME` for a new one",
            req.name.chars().take(63).collect::<String>()
        )));
    }
    Ok((axum::http::StatusCode::CREATED, Json(drover_api::DeviceCredential { name: req.name, token: credential })))
}

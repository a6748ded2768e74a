//! `GET /api/v1/devices`.

use axum::extract::State;
use axum::Json;
use drover_protocol::api::DeviceView;

use crate::auth::Caller;
use crate::{ApiError, AppState};

/// Lists the workspace's devices with slots, live sessions, connection and last contact.
pub async fn list(State(state): State<AppState>, caller: Caller) -> Result<Json<Vec<DeviceView>>, ApiError> {
    caller.member_name()?;
    let rows = state.store.list_devices(caller.0.workspace()).await?;
    Ok(Json(
        rows.into_iter()
            .map(|d| DeviceView {
                connected: state.devices.is_connected(d.id),
                id: d.id,
                name: d.name,
                slots: d.slots,
                live_sessions: d.live_sessions,
                last_contact_at: d.last_contact_at,
            })
            .collect(),
    ))
}

/// `POST /api/v1/devices`: registers a device and issues its credential (owners and admins).
pub async fn add(
    State(state): State<AppState>,
    caller: Caller,
    super::ApiJson(req): super::ApiJson<drover_protocol::api::AddDevice>,
) -> Result<(axum::http::StatusCode, Json<drover_protocol::api::DeviceCredential>), ApiError> {
    let drover_store::Principal::Member { role, .. } = &caller.0 else {
        return Err(ApiError::Forbidden("only members can register devices".into()));
    };
    if *role == drover_core::permissions::Role::Member {
        return Err(ApiError::Forbidden("only an owner or admin can register a device".into()));
    }
    drover_core::names::check_device_name(&req.name).map_err(|e| ApiError::BadRequest(e.to_string()))?;
    let slots = req.slots.unwrap_or(4);
    if !(1..=1000).contains(&slots) {
        return Err(ApiError::BadRequest("slots must be between 1 and 1000".into()));
    }
    let ws = caller.0.workspace();
    let d = state.store.upsert_device(ws, &req.name, slots).await?;
    let token = crate::auth::issue_device_token(&state.store, ws, d.id, &format!("added by {}", caller.0.display())).await?;
    let device = DeviceView {
        connected: state.devices.is_connected(d.id),
        id: d.id,
        name: d.name,
        slots: d.slots,
        live_sessions: d.live_sessions,
        last_contact_at: d.last_contact_at,
    };
    Ok((axum::http::StatusCode::CREATED, Json(drover_protocol::api::DeviceCredential { device, token })))
}

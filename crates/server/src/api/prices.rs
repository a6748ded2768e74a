//! The price table: the shipped one and the workspace's own prices, in USD per million
//! tokens (stored exactly, as nano-dollars per token). Changing them re-prices the usage
//! of every running session on every connected device.

use axum::extract::State;
use axum::Json;
use drover_api::{PriceView, Prices};
use drover_core::permissions::WorkspaceAction;
use drover_core::spend::{Price, Rates, SHIPPED};
use drover_protocol::device::ServerMessage;

use super::ApiJson;
use crate::auth::Caller;
use crate::{ApiError, AppState};

/// USD per million tokens → nano-dollars per token (exact to 1/1000 of a dollar per million).
fn rate(usd_per_m: f64, what: &str, model: &str) -> Result<u64, ApiError> {
    if usd_per_m.is_finite() && (0.0..=1_000_000.0).contains(&usd_per_m) {
        Ok((usd_per_m * 1000.0).round() as u64)
    } else {
        Err(ApiError::BadRequest(format!("the {what} price of `{model}` must be 0–1,000,000 USD per million tokens")))
    }
}

fn opt(v: Option<f64>, what: &str, model: &str) -> Result<Option<u64>, ApiError> {
    v.map(|u| rate(u, what, model)).transpose()
}

fn to_price(p: &PriceView) -> Result<(String, Price), ApiError> {
    let m = p.model.trim();
    if m.is_empty() || m.len() > 200 || m.chars().any(char::is_control) {
        return Err(ApiError::BadRequest("a price needs a model id (at most 200 characters)".into()));
    }
    let base = Rates {
        input: rate(p.input, "input", m)?,
        output: rate(p.output, "output", m)?,
        cache_write_5m: opt(p.cache_write_5m, "cache write", m)?,
        cache_write_1h: opt(p.cache_write_1h, "1-hour cache write", m)?,
        cache_read: opt(p.cache_read, "cache read", m)?,
    };
    let long_context = match (p.long_context_above, p.long) {
        (Some(above), Some(l)) => Some((
            above,
            Rates {
                input: rate(l[0], "long input", m)?,
                output: rate(l[1], "long output", m)?,
                cache_write_5m: Some(rate(l[2], "long cache write", m)?),
                cache_write_1h: Some(rate(l[3], "long 1-hour cache write", m)?),
                cache_read: Some(rate(l[4], "long cache read", m)?),
            },
        )),
        (None, None) => None,
        _ => return Err(ApiError::BadRequest(format!("`{m}`: give both long_context_above and long, or neither"))),
    };
    Ok((m.to_string(), Price { base, long_context }))
}

fn view(model: &str, p: &Price) -> PriceView {
    let usd = |n: u64| n as f64 / 1000.0;
    PriceView {
        model: model.to_string(),
        input: usd(p.base.input),
        output: usd(p.base.output),
        cache_write_5m: p.base.cache_write_5m.map(usd),
        cache_write_1h: p.base.cache_write_1h.map(usd),
        cache_read: p.base.cache_read.map(usd),
        long_context_above: p.long_context.map(|(a, _)| a),
        long: p.long_context.map(|(_, l)| {
            [
                usd(l.input),
                usd(l.output),
                usd(l.cache_write_5m.unwrap_or(l.input)),
                usd(l.cache_write_1h.unwrap_or(l.input)),
                usd(l.cache_read.unwrap_or(l.input)),
            ]
        }),
    }
}

async fn current(state: &AppState, ws: drover_core::WorkspaceId) -> Result<Prices, ApiError> {
    let own = state.store.workspace_prices(ws).await?;
    Ok(Prices { overrides: own.iter().map(|(m, p)| view(m, p)).collect(), shipped: SHIPPED.iter().map(|(m, p)| view(m, p)).collect() })
}

/// `GET /api/v1/prices`.
pub async fn get(State(state): State<AppState>, caller: Caller) -> Result<Json<Prices>, ApiError> {
    caller.require(WorkspaceAction::Work)?;
    Ok(Json(current(&state, caller.0.workspace()).await?))
}

/// `PUT /api/v1/prices` (owners and admins): replaces the workspace's own prices and
/// sends them to every connected device.
pub async fn set(State(state): State<AppState>, caller: Caller, ApiJson(req): ApiJson<Prices>) -> Result<Json<Prices>, ApiError> {
    caller.require(WorkspaceAction::Administer)?;
    if req.overrides.len() > 500 {
        return Err(ApiError::BadRequest("at most 500 prices".into()));
    }
    let own = req.overrides.iter().map(to_price).collect::<Result<Vec<_>, _>>()?;
    let ws = caller.0.workspace();
    state.store.set_workspace_prices(ws, &own).await?;
    push(&state, ws).await?;
    Ok(Json(current(&state, ws).await?))
}

/// Sends the workspace's prices to its connected devices.
pub async fn push(state: &AppState, ws: drover_core::WorkspaceId) -> Result<(), ApiError> {
    let overrides = state.store.workspace_prices(ws).await?;
    for d in state.store.list_devices(ws).await? {
        let _ = state.devices.send(d.id, &ServerMessage::Prices { overrides: overrides.clone() }).await;
    }
    Ok(())
}

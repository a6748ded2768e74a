//! The Web Push sender: closes each member's batch of notices once its coalescing window
//! has passed (one push per batch, see `drover_core::notify`), then sends the pushes
//! due, encrypted for each browser (RFC 8291) and signed with the server's VAPID key
//! (RFC 8292). Pushes are stored before they are sent; a failure is retried with the
//! webhooks' backoff, and a push service answering 404 or 410 (the browser
//! unsubscribed) removes the subscription. Endpoints obey the webhooks' egress rules.

pub mod crypto;

use drover_core::webhook::{retry, Retry};
use drover_store::{DuePush, StoreError};
use rand::Rng;

use crate::leases::Monitor;
use crate::AppState;
use crypto::Vapid;

/// Pushes taken per pass.
const BATCH: i64 = 200;
/// How long a push service keeps a message for a browser that is offline.
const TTL_SECS: u32 = 24 * 3600;

/// The server's VAPID key pair, made and stored the first time any replica needs it.
pub async fn vapid(state: &AppState) -> Result<Vapid, crate::ApiError> {
    let (private, public) = state.store.vapid_key(crypto::new_vapid_key).await?;
    Vapid::load(&private, &public).map_err(|e| crate::ApiError::Internal(e.to_string()))
}

/// The `sub` of the VAPID token: the server's https URL, else a placeholder contact.
fn subject(state: &AppState) -> String {
    let url = &state.config.public_url;
    if url.starts_with("https://") {
        url.clone()
    } else {
        "mailto:push@drover.invalid".into()
    }
}

/// Runs the sender until the process ends (while this server holds its lease).
pub fn spawn(state: AppState) {
    tokio::spawn(async move {
        let client = crate::egress::outbound_client(state.config.egress.clone());
        loop {
            if state.leases.holds(Monitor::Push) {
                if let Err(e) = pass(&state, &client).await {
                    tracing::warn!("push: {e}");
                }
            }
            tokio::time::sleep(state.config.webhook_poll).await;
        }
    });
}

/// One pass: close the batches due, then send what is due, one at a time.
async fn pass(state: &AppState, client: &reqwest::Client) -> Result<(), StoreError> {
    state.store.close_push_batches(state.config.push_coalesce).await?;
    let due = state.store.due_pushes(&drover_store::now(), BATCH).await?;
    if due.is_empty() {
        return Ok(());
    }
    let vapid = match vapid(state).await {
        Ok(v) => v,
        Err(e) => {
            tracing::warn!("push: {e}");
            return Ok(());
        }
    };
    for d in due {
        if !state.leases.holds(Monitor::Push) {
            break;
        }
        attempt(state, client, &vapid, d).await?;
    }
    Ok(())
}

/// The push service's answer to one attempt: its status, or why there was none.
async fn send(state: &AppState, client: &reqwest::Client, vapid: &Vapid, d: &DuePush) -> Result<reqwest::Response, String> {
    let sub = &d.subscription;
    if let Some(refused) = crate::egress::literal_refusal(&state.config.egress, &sub.endpoint) {
        return Err(refused);
    }
    let body = crypto::encrypt(&sub.p256dh, &sub.auth, d.payload.as_bytes()).map_err(|e| e.to_string())?;
    let auth = vapid.authorization(&sub.endpoint, &subject(state), chrono::Utc::now().timestamp()).map_err(|e| e.to_string())?;
    client
        .post(&sub.endpoint)
        .header("content-encoding", "aes128gcm")
        .header("content-type", "application/octet-stream")
        .header("ttl", TTL_SECS.to_string())
        .header("urgency", "high")
        .header("authorization", auth)
        .body(body)
        .send()
        .await
        .map_err(|e| crate::webhooks::causes(&e))
}

/// One attempt at a push.
async fn attempt(state: &AppState, client: &reqwest::Client, vapid: &Vapid, d: DuePush) -> Result<(), StoreError> {
    let (status, error, after) = match send(state, client, vapid, &d).await {
        Ok(resp) => {
            let s = resp.status().as_u16();
            (
                Some(s),
                (!resp.status().is_success()).then(|| format!("the push service answered {s}")),
                crate::webhooks::retry_after(resp.headers()),
            )
        }
        Err(e) => (None, Some(format!("could not push: {e}")), None),
    };
    let store = &state.store;
    match status {
        Some(200..=299) => store.push_attempted(d.id, true, status, None, None).await,
        Some(404 | 410) => {
            tracing::info!(subscription = %d.subscription.id, "the push service says a browser unsubscribed: removed");
            store.drop_push_subscription(d.subscription.id).await.map(|_| ())
        }
        _ => {
            let jitter: f64 = rand::thread_rng().gen();
            let next = match retry(&state.config.webhook_retry, d.attempts + 1, jitter, after) {
                Retry::After(wait) => {
                    Some(drover_store::format_time(chrono::Utc::now() + chrono::Duration::from_std(wait).unwrap_or_default()))
                }
                Retry::GiveUp => None,
            };
            store.push_attempted(d.id, false, status, error.as_deref(), next.as_deref()).await
        }
    }
}

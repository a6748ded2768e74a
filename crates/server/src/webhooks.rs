//! The webhook sender: takes due deliveries from the store and POSTs them, signed the
//! Standard Webhooks way; retries with backoff and jitter (honouring Retry-After),
//! disables an endpoint that answers 410, and records every attempt. A delivery is
//! only marked delivered after a 2xx, so a crash means it is sent again with the same
//! id (at least once; receivers deduplicate on `webhook-id`).

use std::time::Duration;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use drover_core::webhook::{answer, retry, Answer, Retry};
use drover_store::{DueDelivery, StoreError};
use hmac::{Hmac, Mac};
use rand::Rng;
use sha2::Sha256;

use crate::leases::Monitor;
use crate::metrics::WebhookResult;
use crate::AppState;

/// The prefix of a signing secret.
pub const SECRET_PREFIX: &str = "whsec_";
/// Deliveries taken per pass.
const BATCH: i64 = 200;
/// Endpoints sent to at once.
const PARALLEL_ENDPOINTS: usize = 16;

/// A new signing secret: `whsec_` and 24 random bytes in base64.
pub fn new_secret() -> String {
    let mut key = [0u8; 24];
    rand::thread_rng().fill(&mut key);
    format!("{SECRET_PREFIX}{}", B64.encode(key))
}

/// The `webhook-signature` value: `v1,<base64 HMAC-SHA256>` over `id.timestamp.body`
/// for each secret, space-separated (several during a rotation).
pub fn signature(secrets: &[String], id: &str, timestamp: i64, body: &str) -> String {
    let content = format!("{id}.{timestamp}.{body}");
    secrets
        .iter()
        .filter_map(|s| B64.decode(s.strip_prefix(SECRET_PREFIX).unwrap_or(s)).ok())
        .map(|key| {
            let mut mac = Hmac::<Sha256>::new_from_slice(&key).expect("HMAC takes any key length");
            mac.update(content.as_bytes());
            format!("v1,{}", B64.encode(mac.finalize().into_bytes()))
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Runs the sender until the process ends (while this server holds its lease).
pub fn spawn(state: AppState) {
    tokio::spawn(async move {
        let client = crate::egress::outbound_client(state.config.egress.clone());
        loop {
            if state.leases.holds(Monitor::Webhooks) {
                if let Err(e) = send_due(&state, &client).await {
                    tracing::warn!("webhooks: {e}");
                }
            }
            tokio::time::sleep(state.config.webhook_poll).await;
        }
    });
}

/// One pass over the deliveries due now: each endpoint's in order, endpoints side by
/// side (a slow receiver holds up only its own); an endpoint that fails is left for
/// its next retry.
async fn send_due(state: &AppState, client: &reqwest::Client) -> Result<(), StoreError> {
    let due = state.store.due_deliveries(&drover_store::now(), BATCH).await?;
    let mut by_endpoint: Vec<Vec<DueDelivery>> = Vec::new();
    for d in due {
        match by_endpoint.iter_mut().find(|l| l[0].delivery.endpoint == d.delivery.endpoint) {
            Some(list) => list.push(d),
            None => by_endpoint.push(vec![d]),
        }
    }
    let limit = std::sync::Arc::new(tokio::sync::Semaphore::new(PARALLEL_ENDPOINTS));
    let mut tasks = tokio::task::JoinSet::new();
    for list in by_endpoint {
        let (state, client, limit) = (state.clone(), client.clone(), limit.clone());
        tasks.spawn(async move {
            let _permit = limit.acquire_owned().await;
            for d in list {
                // The lease may have moved on during a long pass: the new holder sends
                // the rest, never both.
                if !state.leases.holds(Monitor::Webhooks) || !attempt(&state, &client, d).await? {
                    break;
                }
            }
            Ok::<(), StoreError>(())
        });
    }
    while let Some(r) = tasks.join_next().await {
        if let Ok(Err(e)) = r {
            tracing::warn!("webhooks: {e}");
        }
    }
    Ok(())
}

/// Seconds in a Retry-After header (the HTTP-date form counts from now).
pub(crate) fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let v = headers.get(reqwest::header::RETRY_AFTER)?.to_str().ok()?.trim();
    if let Ok(secs) = v.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let at = chrono::DateTime::parse_from_rfc2822(v).ok()?;
    Some((at.with_timezone(&chrono::Utc) - chrono::Utc::now()).to_std().unwrap_or_default())
}

/// An error and its causes, on one line (the refusal of a target is a cause).
pub(crate) fn causes(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts = vec![e.to_string()];
    let mut at = e.source();
    while let Some(c) = at {
        let s = c.to_string();
        if !parts.iter().any(|p| p.contains(&s)) {
            parts.push(s);
        }
        at = c.source();
    }
    parts.join(": ")
}

/// One attempt at a delivery; true if it was delivered.
async fn attempt(state: &AppState, client: &reqwest::Client, d: DueDelivery) -> Result<bool, StoreError> {
    let id = d.delivery.id.to_string();
    let timestamp = chrono::Utc::now().timestamp();
    let sent = match crate::egress::literal_refusal(&state.config.egress, &d.url) {
        Some(refused) => Err(refused),
        None => client
            .post(&d.url)
            .header("content-type", "application/json")
            .header("user-agent", concat!("drover-webhooks/", env!("CARGO_PKG_VERSION")))
            .header("webhook-id", &id)
            .header("webhook-timestamp", timestamp.to_string())
            .header("webhook-signature", signature(&d.secrets, &id, timestamp, &d.delivery.payload))
            .body(d.delivery.payload.clone())
            .send()
            .await
            .map_err(|e| causes(&e)),
    };
    let (status, error, after) = match sent {
        Ok(resp) => {
            let status = resp.status().as_u16();
            (Some(status), (!resp.status().is_success()).then(|| format!("the receiver answered {status}")), retry_after(resp.headers()))
        }
        Err(e) => (None, Some(format!("could not deliver: {e}")), None),
    };
    let store = &state.store;
    let (id, attempts) = (d.delivery.id, d.delivery.attempts);
    match status.map(answer).unwrap_or(Answer::Failed) {
        Answer::Delivered => {
            store.delivery_attempted(id, attempts, true, status, None, None).await?;
            state.metrics.webhook(WebhookResult::Delivered);
            Ok(true)
        }
        Answer::Gone => {
            tracing::warn!(endpoint = %d.delivery.endpoint, "a webhook endpoint answered 410 Gone: disabled");
            store.set_webhook_disabled(d.delivery.endpoint, Some("the endpoint answered 410 Gone")).await?;
            store.delivery_attempted(id, attempts, false, status, error.as_deref(), None).await?;
            state.metrics.webhook(WebhookResult::Gone);
            Ok(false)
        }
        Answer::Failed => {
            let jitter: f64 = rand::thread_rng().gen();
            let next = match retry(&state.config.webhook_retry, attempts + 1, jitter, after) {
                Retry::After(wait) => {
                    Some(drover_store::format_time(chrono::Utc::now() + chrono::Duration::from_std(wait).unwrap_or_default()))
                }
                Retry::GiveUp => None,
            };
            store.delivery_attempted(id, attempts, false, status, error.as_deref(), next.as_deref()).await?;
            state.metrics.webhook(if next.is_some() { WebhookResult::Retrying } else { WebhookResult::Failed });
            Ok(false)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signs_like_the_standard_webhooks_reference() {
        // The example in the Standard Webhooks specification.
        let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".to_string();
        let sig = signature(&[secret], "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, r#"{"test": 2432232314}"#);
        assert_eq!(sig, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
    }

    #[test]
    fn every_signing_secret_signs() {
        let (a, b) = (new_secret(), new_secret());
        assert!(a.starts_with(SECRET_PREFIX) && a != b);
        let both = signature(&[a.clone(), b], "msg_x", 1, "{}");
        assert_eq!(both.split(' ').count(), 2);
        assert!(both.starts_with(&signature(&[a], "msg_x", 1, "{}")));
    }
}

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

use crate::AppState;

/// The prefix of a signing secret.
pub const SECRET_PREFIX: &str = "whsec_";
/// Deliveries sent per pass.
const BATCH: i64 = 50;
/// How long one attempt may take.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);

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

/// Runs the sender until the process ends.
pub fn spawn(state: AppState) {
    tokio::spawn(async move {
        let client = reqwest::Client::builder().timeout(ATTEMPT_TIMEOUT).build().expect("an HTTP client");
        loop {
            match send_due(&state, &client).await {
                Ok(n) if n as i64 == BATCH => continue,
                Ok(_) => {}
                Err(e) => tracing::warn!("webhooks: {e}"),
            }
            tokio::time::sleep(state.config.webhook_poll).await;
        }
    });
}

/// One pass: every delivery due now; returns how many were attempted.
async fn send_due(state: &AppState, client: &reqwest::Client) -> Result<usize, StoreError> {
    let due = state.store.due_deliveries(&drover_store::now(), BATCH).await?;
    let n = due.len();
    for d in due {
        attempt(state, client, d).await?;
    }
    Ok(n)
}

/// Seconds in a Retry-After header (the HTTP-date form counts from now).
fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let v = headers.get(reqwest::header::RETRY_AFTER)?.to_str().ok()?.trim();
    if let Ok(secs) = v.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let at = chrono::DateTime::parse_from_rfc2822(v).ok()?;
    Some((at.with_timezone(&chrono::Utc) - chrono::Utc::now()).to_std().unwrap_or_default())
}

async fn attempt(state: &AppState, client: &reqwest::Client, d: DueDelivery) -> Result<(), StoreError> {
    let id = d.delivery.id.to_string();
    let timestamp = chrono::Utc::now().timestamp();
    let sent = client
        .post(&d.url)
        .header("content-type", "application/json")
        .header("user-agent", concat!("drover-webhooks/", env!("CARGO_PKG_VERSION")))
        .header("webhook-id", &id)
        .header("webhook-timestamp", timestamp.to_string())
        .header("webhook-signature", signature(&d.secrets, &id, timestamp, &d.delivery.payload))
        .body(d.delivery.payload.clone())
        .send()
        .await;
    let (status, error, after) = match sent {
        Ok(resp) => {
            let status = resp.status().as_u16();
            (Some(status), (!resp.status().is_success()).then(|| format!("the receiver answered {status}")), retry_after(resp.headers()))
        }
        Err(e) => (None, Some(format!("could not deliver: {e}")), None),
    };
    let store = &state.store;
    match status.map(answer).unwrap_or(Answer::Failed) {
        Answer::Delivered => store.delivery_attempted(d.delivery.id, true, status, None, None).await,
        Answer::Gone => {
            tracing::warn!(endpoint = %d.delivery.endpoint, "a webhook endpoint answered 410 Gone: disabled");
            store.set_webhook_disabled(d.delivery.endpoint, Some("the endpoint answered 410 Gone")).await?;
            store.delivery_attempted(d.delivery.id, false, status, error.as_deref(), None).await
        }
        Answer::Failed => {
            let jitter: f64 = rand::thread_rng().gen();
            let next = match retry(&state.config.webhook_retry, d.delivery.attempts + 1, jitter, after) {
                Retry::After(wait) => {
                    Some(drover_store::format_time(chrono::Utc::now() + chrono::Duration::from_std(wait).unwrap_or_default()))
                }
                Retry::GiveUp => None,
            };
            store.delivery_attempted(d.delivery.id, false, status, error.as_deref(), next.as_deref()).await
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

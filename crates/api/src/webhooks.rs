//! Outgoing webhooks and their deliveries.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// `POST /api/v1/webhooks`: register an endpoint.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct CreateWebhook {
    /// Where deliveries go (http or https).
    pub url: String,
    /// The event types it receives (`session.started`, `session.ended`, `session.lost`,
    /// `task.stage_advanced`, `task.input_requested`, `task.finished`).
    pub events: Vec<String>,
}

/// A webhook endpoint as listed (its secrets are shown only when made).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct WebhookView {
    /// The endpoint's id, to remove, rotate or read its deliveries.
    #[schema(value_type = crate::schema::WebhookId)]
    pub id: drover_core::WebhookId,
    /// Where deliveries go.
    pub url: String,
    /// The event types it receives.
    pub events: Vec<String>,
    /// Why it is disabled, if it is (a 410 answer).
    pub disabled_reason: Option<String>,
    /// Secrets signing now (more than one during a rotation).
    pub signing_secrets: u32,
    /// Who registered it.
    pub created_by: String,
    /// When it was registered (RFC 3339).
    pub created_at: String,
}

/// An endpoint with a secret just made (on creation or rotation): the only time the
/// secret is shown.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct WebhookSecretView {
    /// The endpoint as it is now listed.
    pub webhook: WebhookView,
    /// The new secret (`whsec_…`), for the receiver's verification.
    pub secret: String,
}

/// One delivery in an endpoint's log.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct DeliveryView {
    /// The message id (`webhook-id`, the receiver's idempotency key).
    #[schema(value_type = crate::schema::MessageId)]
    pub id: drover_core::MessageId,
    /// Which event type this delivery carries (`session.ended`, …).
    pub event_type: String,
    /// `pending`, `delivered` or `failed`.
    pub state: String,
    /// Attempts so far.
    pub attempts: u32,
    /// When the next attempt is due.
    pub next_attempt_at: Option<String>,
    /// The receiver's last HTTP status.
    pub last_status: Option<u16>,
    /// The last failure.
    pub last_error: Option<String>,
    /// When it was queued.
    pub created_at: String,
    /// When it was delivered.
    pub delivered_at: Option<String>,
    /// The JSON body sent (or to be sent) to the receiver.
    pub payload: serde_json::Value,
}

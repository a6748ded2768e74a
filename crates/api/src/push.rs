//! Getting told: Web Push subscriptions and each member's notification choices.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// `GET /api/v1/push/key`: the server's VAPID public key, for `pushManager.subscribe`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct PushKey {
    /// The uncompressed P-256 point, base64url without padding (`applicationServerKey`).
    pub public_key: String,
}

/// `POST /api/v1/push/subscriptions`: a browser's push subscription (as
/// `PushSubscription.toJSON()` gives it, flattened).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct NewPushSubscription {
    /// The push service's URL for this browser.
    pub endpoint: String,
    /// The browser's P-256 public key, base64url.
    pub p256dh: String,
    /// The browser's 16-byte authentication secret, base64url.
    pub auth: String,
}

/// A registered browser (its keys are not shown back).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct PushSubscriptionView {
    /// Its id, to remove it.
    pub id: String,
    /// The push service's URL for this browser.
    pub endpoint: String,
    /// When it was registered.
    pub created_at: String,
}

/// `DELETE /api/v1/push/subscriptions`: which of the caller's browsers to forget.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct RemovePushSubscription {
    /// The subscription's id or its endpoint.
    pub subscription: String,
}

/// A member's notification choices (`GET`/`PUT /api/v1/me/notifications`).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct NotificationChoices {
    /// What they are told of: `permission`, `question`, `idle`, `finished`, `failed`,
    /// `lost`, `spend_cap`.
    pub events: Vec<String>,
    /// A daily window when nothing is pushed (`22:00-07:00`), or none.
    pub quiet: Option<String>,
    /// The zone the window is in: a name (`Europe/Paris`), `UTC` or an offset (`+02:00`).
    pub zone: String,
    /// Seconds after a notice about a run before another about it is pushed.
    pub cooldown_secs: u64,
}

/// `POST /api/v1/push/test`: what a test push reached.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct PushTestResult {
    /// Browsers it was queued for.
    pub queued: u64,
}

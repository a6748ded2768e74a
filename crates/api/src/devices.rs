//! Devices: listing, enrolling, credentials.

use drover_core::DeviceId;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// A device as listed.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct DeviceView {
    /// Its stable id (its name may be reused after a removal).
    #[schema(value_type = crate::schema::DeviceId)]
    pub id: DeviceId,
    /// The name sessions and repositories refer to it by.
    pub name: String,
    /// Sessions it may run at once.
    pub slots: u32,
    /// Sessions live on it now.
    pub live_sessions: u32,
    /// Whether its daemon is connected now.
    pub connected: bool,
    /// When it last reported in (RFC 3339).
    pub last_contact_at: Option<String>,
    /// When an admin revoked its credential (it is refused until added again).
    #[serde(default)]
    pub revoked_at: Option<String>,
    /// What it does with its runs, as its daemon last said (None: it never said).
    #[serde(default)]
    #[schema(value_type = Option<crate::schema::SandboxOffer>)]
    pub sandbox: Option<drover_core::confinement::Offer>,
}

/// `POST /api/v1/devices`: register a device.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AddDevice {
    /// The name sessions and repositories will refer to it by.
    pub name: String,
    /// Sessions it may run at once (default 4).
    pub slots: Option<u32>,
}

/// A registered device and its one-time enrollment token (shown once).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct DeviceEnrollment {
    /// The device as it is now listed (not yet connected).
    pub device: DeviceView,
    /// The one-time enrollment token, for `drover device --token` on the device: the
    /// daemon trades it for its own credential on first connect.
    pub enrollment_token: String,
    /// When the enrollment token stops working (RFC 3339).
    pub expires_at: String,
}

/// `POST /api/v1/devices/enroll`: a device trades its enrollment token for a credential.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Enroll {
    /// The enrollment token (`dre_…`).
    pub token: String,
    /// The device's name, as registered.
    pub name: String,
}

/// The device's own credential (kept by the daemon; never shown to a person).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct DeviceCredential {
    /// The device's name.
    pub name: String,
    /// The secret the daemon presents on every connect from now on.
    pub token: String,
}

//! Credentials: generation, hashing, and the extractor that turns a bearer token into
//! the calling principal. Only SHA-256 digests of tokens are stored; tokens carry 190
//! bits of randomness, so a fast hash is the right tool (passwords, later, use argon2).

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use drover_core::{DeviceId, MemberId, WorkspaceId};
use drover_store::{Principal, Store, TokenKind};
use rand::distributions::Alphanumeric;
use rand::Rng;
use sha2::{Digest, Sha256};

use crate::{ApiError, AppState};

/// Prefix of member API tokens.
pub const MEMBER_TOKEN_PREFIX: &str = "drv_";
/// Prefix of device credentials.
pub const DEVICE_TOKEN_PREFIX: &str = "drd_";

/// A new random token with `prefix`.
pub fn new_token(prefix: &str) -> String {
    let body: String = rand::thread_rng().sample_iter(&Alphanumeric).take(32).map(char::from).collect();
    format!("{prefix}{body}")
}

/// The stored digest of a token.
pub fn digest(token: &str) -> String {
    let d = Sha256::digest(token.as_bytes());
    d.iter().map(|b| format!("{b:02x}")).collect()
}

/// Issues and stores a member API token; returns the token (shown once).
pub async fn issue_member_token(store: &Store, ws: WorkspaceId, member: MemberId, label: &str) -> Result<String, drover_store::StoreError> {
    let token = new_token(MEMBER_TOKEN_PREFIX);
    store.add_token(ws, TokenKind::Member, &member.to_string(), &digest(&token), label).await?;
    Ok(token)
}

/// Issues and stores a device credential; returns the token (shown once).
pub async fn issue_device_token(store: &Store, ws: WorkspaceId, device: DeviceId, label: &str) -> Result<String, drover_store::StoreError> {
    let token = new_token(DEVICE_TOKEN_PREFIX);
    store.add_token(ws, TokenKind::Device, &device.to_string(), &digest(&token), label).await?;
    Ok(token)
}

/// Whether `token` is currently valid.
pub async fn token_valid(store: &Store, token: &str) -> bool {
    matches!(store.principal_for(&digest(token)).await, Ok(Some(_)))
}

/// The authenticated caller of a request.
#[derive(Debug, Clone)]
pub struct Caller(pub Principal);

impl Caller {
    /// The member's name, or an error if the caller is not a member.
    pub fn member_name(&self) -> Result<String, ApiError> {
        match &self.0 {
            Principal::Member { name, .. } => Ok(name.clone()),
            Principal::Device { .. } => Err(ApiError::Forbidden("device credentials can only open the device link".into())),
        }
    }
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let header = parts.headers.get(axum::http::header::AUTHORIZATION).and_then(|v| v.to_str().ok());
        let token = header.and_then(|h| h.strip_prefix("Bearer ")).map(str::trim).filter(|t| !t.is_empty());
        let Some(token) = token else {
            return Err(ApiError::Unauthorized(
                "no credentials: send `Authorization: Bearer <token>` (the CLI reads it from $DROVER_HOME or DROVER_TOKEN)".into(),
            ));
        };
        if token.len() > 256 {
            return Err(ApiError::Unauthorized("the token is not valid".into()));
        }
        match state.store.principal_for(&digest(token)).await? {
            Some(p) => Ok(Caller(p)),
            None => Err(ApiError::Unauthorized(
                "the token is not valid or was revoked: get a new one (`drover up` writes one to $DROVER_HOME)".into(),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_random_and_prefixed_and_digests_stable() {
        let a = new_token(MEMBER_TOKEN_PREFIX);
        let b = new_token(MEMBER_TOKEN_PREFIX);
        assert_ne!(a, b);
        assert!(a.starts_with("drv_") && a.len() == 36);
        assert_eq!(digest(&a), digest(&a));
        assert_eq!(digest(&a).len(), 64);
        assert_ne!(digest(&a), digest(&b));
    }
}

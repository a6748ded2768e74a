//! Password hashing with argon2id (the crate's default parameters: 19 MiB, 2 passes),
//! off the async runtime and at most [`CONCURRENT`] at a time (each costs 19 MiB and a
//! core for tens of milliseconds; a flood queues briefly, then gets 503). A failed lookup
//! still costs one verification, so a response's timing does not tell whether a name
//! exists.

use argon2::password_hash::rand_core::OsRng;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::Argon2;

use crate::ApiError;

/// A hash that no password matches, verified when there is no member to check against.
const DECOY: &str = "$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHRzb21lc2FsdA$J1Tq0rH5YVwJFx0m3mbr0o5iO8OZ4eKZPRB8r6QJf4A";

/// Most hashings or verifications running at once.
pub const CONCURRENT: usize = 2;
/// How long a request waits for a turn before the server says it is busy.
const QUEUE_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

static TURNS: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(CONCURRENT);

async fn turn() -> Result<tokio::sync::SemaphorePermit<'static>, ApiError> {
    match tokio::time::timeout(QUEUE_WAIT, TURNS.acquire()).await {
        Ok(Ok(permit)) => Ok(permit),
        _ => Err(ApiError::Unavailable("the server is busy checking passwords: try again in a few seconds".into())),
    }
}

/// Hashes `password` into a PHC string.
pub async fn hash(password: String) -> Result<String, ApiError> {
    let _turn = turn().await?;
    tokio::task::spawn_blocking(move || {
        let salt = SaltString::generate(&mut OsRng);
        Argon2::default().hash_password(password.as_bytes(), &salt).map(|h| h.to_string())
    })
    .await
    .map_err(|e| ApiError::Internal(format!("password hashing stopped: {e}")))?
    .map_err(|e| ApiError::Internal(format!("password hashing failed: {e}")))
}

/// Whether `password` matches the stored `hash` (always spends one verification).
pub async fn verify(password: String, hash: Option<String>) -> Result<bool, ApiError> {
    let _turn = turn().await?;
    let known = hash.is_some();
    let stored = hash.unwrap_or_else(|| DECOY.to_string());
    let ok = tokio::task::spawn_blocking(move || match PasswordHash::new(&stored) {
        Ok(parsed) => Argon2::default().verify_password(password.as_bytes(), &parsed).is_ok(),
        Err(_) => false,
    })
    .await
    .unwrap_or(false);
    Ok(known && ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn hashes_verify_and_are_salted() {
        let a = hash("correct horse battery".into()).await.unwrap();
        let b = hash("correct horse battery".into()).await.unwrap();
        assert_ne!(a, b, "salted");
        assert!(a.starts_with("$argon2id$"));
        assert!(verify("correct horse battery".into(), Some(a.clone())).await.unwrap());
        assert!(!verify("wrong horse battery".into(), Some(a)).await.unwrap());
        assert!(!verify("anything".into(), None).await.unwrap());
        assert!(!verify("anything".into(), Some("not a hash".into())).await.unwrap());
        assert!(PasswordHash::new(DECOY).is_ok(), "the decoy parses, so it costs a real verification");
    }
}

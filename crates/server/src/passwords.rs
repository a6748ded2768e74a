//! Password hashing with argon2id (the crate's default parameters: 19 MiB, 2 passes),
//! off the async runtime. A failed lookup still costs one verification, so a response's
//! timing does not tell whether a name exists.

use argon2::password_hash::rand_core::OsRng;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::Argon2;

use crate::ApiError;

/// A hash that no password matches, verified when there is no member to check against.
const DECOY: &str = "$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHRzb21lc2FsdA$J1Tq0rH5YVwJFx0m3mbr0o5iO8OZ4eKZPRB8r6QJf4A";

/// Hashes `password` into a PHC string.
pub async fn hash(password: String) -> Result<String, ApiError> {
    tokio::task::spawn_blocking(move || {
        let salt = SaltString::generate(&mut OsRng);
        Argon2::default().hash_password(password.as_bytes(), &salt).map(|h| h.to_string())
    })
    .await
    .map_err(|e| ApiError::Internal(format!("password hashing stopped: {e}")))?
    .map_err(|e| ApiError::Internal(format!("password hashing failed: {e}")))
}

/// Whether `password` matches the stored `hash` (always spends one verification).
pub async fn verify(password: String, hash: Option<String>) -> bool {
    let known = hash.is_some();
    let stored = hash.unwrap_or_else(|| DECOY.to_string());
    let ok = tokio::task::spawn_blocking(move || match PasswordHash::new(&stored) {
        Ok(parsed) => Argon2::default().verify_password(password.as_bytes(), &parsed).is_ok(),
        Err(_) => false,
    })
    .await
    .unwrap_or(false);
    known && ok
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
        assert!(verify("correct horse battery".into(), Some(a.clone())).await);
        assert!(!verify("wrong horse battery".into(), Some(a)).await);
        assert!(!verify("anything".into(), None).await);
        assert!(!verify("anything".into(), Some("not a hash".into())).await);
        assert!(PasswordHash::new(DECOY).is_ok(), "the decoy parses, so it costs a real verification");
    }
}

//! Session-scoped credentials: a token a run holds, good while the run is live.

use drover_core::SessionId;

use crate::sessions::{session_row, SESSION_SELECT};
use crate::{now, Result, SessionRow, Store, LIVE};

impl Store {
    /// Stores a session-scoped credential.
    pub async fn add_session_token(&self, session: SessionId, digest: &str) -> Result<()> {
        sqlx::query("INSERT INTO session_tokens (hash, session_id, created_at) VALUES ($1, $2, $3)")
            .bind(digest)
            .bind(session.to_string())
            .bind(now())
            .execute(&self.writes)
            .await?;
        Ok(())
    }

    /// The session a session-scoped credential belongs to, while that session is live.
    pub async fn session_for_token(&self, digest: &str) -> Result<Option<SessionRow>> {
        let r = sqlx::query(&format!(
            "{SESSION_SELECT} JOIN session_tokens k ON k.session_id = s.id
             WHERE k.hash = $1 AND k.revoked_at IS NULL AND s.outcome IN {LIVE}"
        ))
        .bind(digest)
        .fetch_optional(&self.pool)
        .await?;
        r.as_ref().map(session_row).transpose()
    }
}

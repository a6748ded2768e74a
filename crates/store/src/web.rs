//! Browser sign-in: one-time login links and the sessions behind the web cookie. Only
//! SHA-256 digests of codes and cookies are stored.

use drover_core::permissions::Role;
use drover_core::{MemberId, WorkspaceId};
use sqlx::Row;

use crate::{format_time, now, parse_id, Principal, Result, Store, StoreError};

/// Why a cookie does not sign anyone in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WebSessionState {
    /// No such session (never issued, or revoked).
    Unknown,
    /// It was valid and has expired: sign in again.
    Expired,
}

impl Store {
    /// Stores a one-time login link for `member`, valid for `ttl`.
    pub async fn add_login_link(&self, member: MemberId, digest: &str, ttl: chrono::Duration) -> Result<()> {
        let at = chrono::Utc::now();
        sqlx::query("INSERT INTO login_links (hash, member_id, created_at, expires_at) VALUES ($1, $2, $3, $4)")
            .bind(digest)
            .bind(member.to_string())
            .bind(format_time(at))
            .bind(format_time(at + ttl))
            .execute(&self.writes)
            .await?;
        Ok(())
    }

    /// Uses a login link: if it is unused and unexpired, marks it used and opens a web
    /// session with `session_digest` for `session_ttl`. Returns the member, or None.
    pub async fn redeem_login_link(&self, digest: &str, session_digest: &str, session_ttl: chrono::Duration) -> Result<Option<MemberId>> {
        let mut tx = self.write().await?;
        let at = now();
        let used =
            sqlx::query("UPDATE login_links SET used_at = $1 WHERE hash = $2 AND used_at IS NULL AND expires_at > $3 RETURNING member_id")
                .bind(&at)
                .bind(digest)
                .bind(&at)
                .fetch_optional(&mut *tx)
                .await?;
        let Some(row) = used else { return Ok(None) };
        let member: MemberId = parse_id(row.get("member_id"))?;
        sqlx::query("INSERT INTO web_sessions (hash, member_id, created_at, expires_at) VALUES ($1, $2, $3, $4)")
            .bind(session_digest)
            .bind(member.to_string())
            .bind(&at)
            .bind(format_time(chrono::Utc::now() + session_ttl))
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(Some(member))
    }

    /// Opens a web session with `session_digest` for `member` (signed in by password).
    pub async fn open_web_session(&self, member: MemberId, session_digest: &str, session_ttl: chrono::Duration) -> Result<()> {
        sqlx::query("INSERT INTO web_sessions (hash, member_id, created_at, expires_at) VALUES ($1, $2, $3, $4)")
            .bind(session_digest)
            .bind(member.to_string())
            .bind(now())
            .bind(format_time(chrono::Utc::now() + session_ttl))
            .execute(&self.writes)
            .await?;
        Ok(())
    }

    /// Who a web session cookie signs in, or why it does not.
    pub async fn web_principal(&self, session_digest: &str) -> Result<std::result::Result<Principal, WebSessionState>> {
        let row = sqlx::query(
            "SELECT w.expires_at, w.revoked_at, m.id, m.workspace_id, m.name, m.role
             FROM web_sessions w JOIN members m ON m.id = w.member_id WHERE w.hash = $1 AND m.removed_at IS NULL",
        )
        .bind(session_digest)
        .fetch_optional(&self.pool)
        .await?;
        let Some(row) = row else { return Ok(Err(WebSessionState::Unknown)) };
        if row.get::<Option<String>, _>("revoked_at").is_some() {
            return Ok(Err(WebSessionState::Unknown));
        }
        if row.get::<String, _>("expires_at") <= now() {
            return Ok(Err(WebSessionState::Expired));
        }
        let role: String = row.get("role");
        let workspace: WorkspaceId = parse_id(row.get("workspace_id"))?;
        Ok(Ok(Principal::Member {
            workspace,
            id: parse_id(row.get("id"))?,
            name: row.get("name"),
            role: Role::parse(&role).ok_or_else(|| StoreError::Corrupt(format!("role {role}")))?,
        }))
    }

    /// Ends a web session (sign out).
    pub async fn revoke_web_session(&self, session_digest: &str) -> Result<()> {
        sqlx::query("UPDATE web_sessions SET revoked_at = $1 WHERE hash = $2 AND revoked_at IS NULL")
            .bind(now())
            .bind(session_digest)
            .execute(&self.writes)
            .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::store;

    #[tokio::test]
    async fn a_login_link_works_once_and_sessions_expire() {
        let (s, _d) = store().await;
        let (_, owner) = s.bootstrap("w", "alice").await.unwrap();
        s.add_login_link(owner, "link", chrono::Duration::minutes(5)).await.unwrap();
        assert_eq!(s.redeem_login_link("link", "cookie", chrono::Duration::hours(1)).await.unwrap(), Some(owner));
        assert_eq!(s.redeem_login_link("link", "cookie2", chrono::Duration::hours(1)).await.unwrap(), None);
        assert!(matches!(s.web_principal("cookie").await.unwrap(), Ok(Principal::Member { name, .. }) if name == "alice"));
        assert_eq!(s.web_principal("nope").await.unwrap(), Err(WebSessionState::Unknown));
        // An expired link signs nobody in; an expired session says so.
        s.add_login_link(owner, "old", chrono::Duration::seconds(-1)).await.unwrap();
        assert_eq!(s.redeem_login_link("old", "c3", chrono::Duration::hours(1)).await.unwrap(), None);
        s.add_login_link(owner, "short", chrono::Duration::minutes(5)).await.unwrap();
        s.redeem_login_link("short", "brief", chrono::Duration::seconds(-1)).await.unwrap();
        assert_eq!(s.web_principal("brief").await.unwrap(), Err(WebSessionState::Expired));
        s.revoke_web_session("cookie").await.unwrap();
        assert_eq!(s.web_principal("cookie").await.unwrap(), Err(WebSessionState::Unknown));
    }
}

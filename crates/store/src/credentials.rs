//! Workspaces, members and credentials. Tokens are stored as SHA-256 digests only.

use drover_core::permissions::Role;
use drover_core::{DeviceId, MemberId, TokenId, WorkspaceId};
use sqlx::Row;

use crate::{now, parse_id, Result, Store, StoreError};

/// What a credential belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenKind {
    /// A member's API token (CLI).
    Member,
    /// A device daemon's credential.
    Device,
}

/// Who a valid token identifies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Principal {
    /// A human member.
    Member {
        /// The workspace the credential is good for.
        workspace: WorkspaceId,
        /// The member the credential belongs to.
        id: MemberId,
        /// Their name: the actor of what they do.
        name: String,
        /// Their role: what they may do.
        role: Role,
    },
    /// A device daemon.
    Device {
        /// The workspace the device belongs to.
        workspace: WorkspaceId,
        /// The device the credential belongs to.
        id: DeviceId,
        /// Its name: the actor of what it reports.
        name: String,
    },
    /// An agent, with the credential of the session it runs in.
    Agent {
        /// The workspace the agent's run is in.
        workspace: WorkspaceId,
        /// The session the credential belongs to.
        session: drover_core::SessionId,
        /// The task the run works, if any: what its hand-offs and notes are for.
        task: Option<drover_core::TaskId>,
        /// The agent's name: the actor of what it does.
        name: String,
    },
}

impl Principal {
    /// The workspace the principal acts in.
    pub fn workspace(&self) -> WorkspaceId {
        match self {
            Principal::Member { workspace, .. } | Principal::Device { workspace, .. } | Principal::Agent { workspace, .. } => *workspace,
        }
    }

    /// How the activity feed names the principal.
    pub fn display(&self) -> String {
        match self {
            Principal::Member { name, .. } => name.clone(),
            Principal::Device { name, .. } => format!("device {name}"),
            Principal::Agent { name, .. } => format!("agent {name}"),
        }
    }
}

impl Store {
    /// The first workspace and its first owner, created if the database is empty.
    pub async fn bootstrap(&self, workspace_name: &str, owner_name: &str) -> Result<(WorkspaceId, MemberId)> {
        let mut tx = self.write().await?;
        let existing = sqlx::query("SELECT w.id AS w, m.id AS m FROM workspaces w JOIN members m ON m.workspace_id = w.id AND m.role = 'owner' AND m.removed_at IS NULL ORDER BY w.created_at, m.created_at LIMIT 1")
            .fetch_optional(&mut *tx)
            .await?;
        if let Some(row) = existing {
            return Ok((parse_id(row.get("w"))?, parse_id(row.get("m"))?));
        }
        let (ws, member, at) = (WorkspaceId::new(), MemberId::new(), now());
        sqlx::query("INSERT INTO workspaces (id, name, created_at) VALUES ($1, $2, $3)")
            .bind(ws.to_string())
            .bind(workspace_name)
            .bind(&at)
            .execute(&mut *tx)
            .await?;
        sqlx::query("INSERT INTO members (id, workspace_id, name, role, created_at) VALUES ($1, $2, $3, 'owner', $4)")
            .bind(member.to_string())
            .bind(ws.to_string())
            .bind(owner_name)
            .bind(&at)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok((ws, member))
    }

    /// Stores a credential by its digest.
    pub async fn add_token(&self, workspace: WorkspaceId, kind: TokenKind, owner: &str, digest: &str, label: &str) -> Result<TokenId> {
        let id = TokenId::new();
        let (kind_s, member, device) = match kind {
            TokenKind::Member => ("member", Some(owner), None),
            TokenKind::Device => ("device", None, Some(owner)),
        };
        sqlx::query(
            "INSERT INTO tokens (id, workspace_id, kind, member_id, device_id, hash, label, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        )
        .bind(id.to_string())
        .bind(workspace.to_string())
        .bind(kind_s)
        .bind(member)
        .bind(device)
        .bind(digest)
        .bind(label)
        .bind(now())
        .execute(&self.writes)
        .await?;
        Ok(id)
    }

    /// Who the token with `digest` identifies; None when unknown or revoked.
    pub async fn principal_for(&self, digest: &str) -> Result<Option<Principal>> {
        let row = sqlx::query(
            "SELECT t.workspace_id, t.kind, m.id AS mid, m.name AS mname, m.role, d.id AS did, d.name AS dname
             FROM tokens t LEFT JOIN members m ON m.id = t.member_id LEFT JOIN devices d ON d.id = t.device_id
             WHERE t.hash = $1 AND t.revoked_at IS NULL AND m.removed_at IS NULL",
        )
        .bind(digest)
        .fetch_optional(&self.pool)
        .await?;
        let Some(row) = row else { return Ok(None) };
        let workspace = parse_id(row.get("workspace_id"))?;
        let kind: String = row.get("kind");
        Ok(Some(match kind.as_str() {
            "member" => {
                let role: String = row.get("role");
                Principal::Member {
                    workspace,
                    id: parse_id(row.get("mid"))?,
                    name: row.get("mname"),
                    role: Role::parse(&role).ok_or_else(|| StoreError::Corrupt(format!("role {role}")))?,
                }
            }
            _ => Principal::Device { workspace, id: parse_id(row.get("did"))?, name: row.get("dname") },
        }))
    }

    /// Revokes every credential of a device (used when `up` re-issues the local one).
    pub async fn revoke_device_tokens(&self, device: DeviceId) -> Result<()> {
        sqlx::query("UPDATE tokens SET revoked_at = $1 WHERE device_id = $2 AND revoked_at IS NULL")
            .bind(now())
            .bind(device.to_string())
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
    async fn bootstrap_is_idempotent_and_tokens_resolve() {
        let (s, _d) = store().await;
        let (ws, owner) = s.bootstrap("default", "alice").await.unwrap();
        assert_eq!(s.bootstrap("other", "bob").await.unwrap(), (ws, owner));
        s.add_token(ws, TokenKind::Member, &owner.to_string(), "digest1", "cli").await.unwrap();
        let p = s.principal_for("digest1").await.unwrap().unwrap();
        assert!(matches!(p, Principal::Member { role: Role::Owner, ref name, .. } if name == "alice"));
        assert!(s.principal_for("nope").await.unwrap().is_none());
    }

    #[tokio::test]
    async fn revoked_device_tokens_stop_resolving() {
        let (s, _d) = store().await;
        let (ws, _) = s.bootstrap("default", "alice").await.unwrap();
        let dev = s.upsert_device(ws, "box", 4).await.unwrap();
        s.add_token(ws, TokenKind::Device, &dev.id.to_string(), "d1", "local").await.unwrap();
        assert!(matches!(s.principal_for("d1").await.unwrap(), Some(Principal::Device { .. })));
        s.revoke_device_tokens(dev.id).await.unwrap();
        assert!(s.principal_for("d1").await.unwrap().is_none());
    }
}

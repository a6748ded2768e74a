//! Members, invitations, passwords and personal API tokens. Every change here is an
//! audited event written in the same transaction.

use drover_core::activity::EventKind;
use drover_core::permissions::{role_change, Role, RoleChangeRefused};
use drover_core::{InviteId, MemberId, TokenId, WorkspaceId};
use sqlx::Row;

use crate::events::insert;
use crate::{format_time, now, parse_id, NewEvent, Result, Store, StoreError};

/// A member of a workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberRow {
    /// Their id: what sessions, agents and tokens name.
    pub id: MemberId,
    /// The workspace they belong to.
    pub workspace: WorkspaceId,
    /// The name they sign in with.
    pub name: String,
    /// Their role: what they may do (`core::permissions`).
    pub role: Role,
    /// When they joined.
    pub created_at: String,
    /// Their argon2id password hash (PHC string), once they set one.
    pub password_hash: Option<String>,
    /// When they were removed from the workspace, if they were.
    pub removed_at: Option<String>,
}

/// An invitation that was issued.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InviteRow {
    /// Its id: what revoking it names.
    pub id: InviteId,
    /// The role the new member gets.
    pub role: Role,
    /// Until when it can be used.
    pub expires_at: String,
}

/// An invitation not yet used, as listed (never its code).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingInvite {
    /// Its id: what revoking it names.
    pub id: InviteId,
    /// The role it gives.
    pub role: Role,
    /// Who sent it.
    pub created_by: String,
    /// When it was sent (stored format).
    pub created_at: String,
    /// Until when it works.
    pub expires_at: String,
}

/// A personal API token, as listed (never the token itself).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenRow {
    /// Its id: what revoking it names.
    pub id: TokenId,
    /// The member it belongs to.
    pub member: MemberId,
    /// What it was issued for.
    pub label: String,
    /// When it was issued.
    pub created_at: String,
    /// When it was last used, if ever.
    pub last_used_at: Option<String>,
    /// When it was revoked, if it was.
    pub revoked_at: Option<String>,
}

/// Why a member change was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MemberRefused {
    /// No member by that name.
    #[error("no member named `{0}`: `drover member list` shows who there is")]
    NoSuchMember(String),
    /// The name is in use.
    #[error("the name `{0}` is taken in this workspace: pick another")]
    NameTaken(String),
    /// The invitation was used, expired or never existed.
    #[error("this invitation was already used or has expired: ask an owner for a new one")]
    InviteInvalid,
    /// The role change is not allowed.
    #[error("{0}")]
    Role(RoleChangeRefused),
    /// No such token (or not the caller's).
    #[error("no token `{0}` of yours: `drover token list` shows them")]
    NoSuchToken(String),
    /// The last owner cannot be removed.
    #[error("`{0}` is the workspace's last owner: make someone else an owner first")]
    LastOwner(String),
}

fn member_row(r: &sqlx::any::AnyRow) -> Result<MemberRow> {
    let role: String = r.get("role");
    Ok(MemberRow {
        id: parse_id(r.get("id"))?,
        workspace: parse_id(r.get("workspace_id"))?,
        name: r.get("name"),
        role: Role::parse(&role).ok_or_else(|| StoreError::Corrupt(format!("role {role}")))?,
        created_at: r.get("created_at"),
        password_hash: r.get("password_hash"),
        removed_at: r.get("removed_at"),
    })
}

fn token_row(r: &sqlx::any::AnyRow) -> Result<TokenRow> {
    Ok(TokenRow {
        id: parse_id(r.get("id"))?,
        member: parse_id(r.get("member_id"))?,
        label: r.get("label"),
        created_at: r.get("created_at"),
        last_used_at: r.get("last_used_at"),
        revoked_at: r.get("revoked_at"),
    })
}

fn event(workspace: WorkspaceId, kind: EventKind, actor: &str, detail: serde_json::Value) -> NewEvent {
    NewEvent { workspace, session: None, task: None, kind, actor: actor.to_string(), detail }
}

/// The member named `name` (not removed) and how many owners the workspace has, read in
/// the transaction that changes them.
async fn member_and_owners(
    tx: &mut sqlx::Transaction<'static, sqlx::Any>,
    workspace: WorkspaceId,
    name: &str,
) -> Result<std::result::Result<(MemberRow, usize), MemberRefused>> {
    let row = sqlx::query("SELECT * FROM members WHERE workspace_id = $1 AND name = $2 AND removed_at IS NULL")
        .bind(workspace.to_string())
        .bind(name)
        .fetch_optional(&mut **tx)
        .await?;
    let Some(member) = row.as_ref().map(member_row).transpose()? else {
        return Ok(Err(MemberRefused::NoSuchMember(name.to_string())));
    };
    let owners: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM members WHERE workspace_id = $1 AND role = 'owner' AND removed_at IS NULL")
        .bind(workspace.to_string())
        .fetch_one(&mut **tx)
        .await?;
    Ok(Ok((member, owners.max(0) as usize)))
}

impl Store {
    /// The workspace's members, oldest first.
    pub async fn members(&self, workspace: WorkspaceId) -> Result<Vec<MemberRow>> {
        let rows = sqlx::query("SELECT * FROM members WHERE workspace_id = $1 AND removed_at IS NULL ORDER BY created_at, id")
            .bind(workspace.to_string())
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(member_row).collect()
    }

    /// The member named `name`.
    pub async fn member_by_name(&self, workspace: WorkspaceId, name: &str) -> Result<Option<MemberRow>> {
        let row = sqlx::query("SELECT * FROM members WHERE workspace_id = $1 AND name = $2 AND removed_at IS NULL")
            .bind(workspace.to_string())
            .bind(name)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(member_row).transpose()
    }

    /// The member with `id`.
    pub async fn member(&self, id: MemberId) -> Result<Option<MemberRow>> {
        let row = sqlx::query("SELECT * FROM members WHERE id = $1").bind(id.to_string()).fetch_optional(&self.pool).await?;
        row.as_ref().map(member_row).transpose()
    }

    /// Stores a member's new password hash ("password changed").
    /// Every other browser sign-in of the member ends with it (all but the one whose
    /// cookie digest is `keep`, the browser that made the change).
    /// With `revoke_tokens`, every personal API token of theirs is revoked too (all but the
    /// one whose digest is `keep`, when the change was made with it).
    pub async fn set_password(&self, member: MemberId, hash: &str, keep: Option<&str>, revoke_tokens: bool) -> Result<()> {
        let mut tx = self.write().await?;
        let row = sqlx::query("UPDATE members SET password_hash = $1 WHERE id = $2 RETURNING workspace_id, name")
            .bind(hash)
            .bind(member.to_string())
            .fetch_one(&mut *tx)
            .await?;
        sqlx::query("UPDATE web_sessions SET revoked_at = $1 WHERE member_id = $2 AND revoked_at IS NULL AND hash IS DISTINCT FROM $3")
            .bind(now())
            .bind(member.to_string())
            .bind(keep)
            .execute(&mut *tx)
            .await?;
        if revoke_tokens {
            sqlx::query("UPDATE tokens SET revoked_at = $1 WHERE member_id = $2 AND revoked_at IS NULL AND hash IS DISTINCT FROM $3")
                .bind(now())
                .bind(member.to_string())
                .bind(keep)
                .execute(&mut *tx)
                .await?;
        }
        let (ws, name): (String, String) = (row.get("workspace_id"), row.get("name"));
        let detail = serde_json::json!({ "member": name, "tokens_revoked": revoke_tokens });
        insert(&mut tx, &event(parse_id(&ws)?, EventKind::PasswordChanged, &name, detail)).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Changes the role of the member named `name`, as the member `by` (their role read
    /// in the same transaction), refusing what core's rules refuse (only owners; never
    /// the last owner).
    pub async fn set_role(
        &self,
        workspace: WorkspaceId,
        name: &str,
        role: Role,
        by: MemberId,
    ) -> Result<std::result::Result<MemberRow, MemberRefused>> {
        let mut tx = self.write().await?;
        let caller = sqlx::query("SELECT * FROM members WHERE id = $1 AND workspace_id = $2")
            .bind(by.to_string())
            .bind(workspace.to_string())
            .fetch_optional(&mut *tx)
            .await?;
        let Some(caller) = caller.as_ref().map(member_row).transpose()? else {
            return Ok(Err(MemberRefused::Role(RoleChangeRefused::NotOwner)));
        };
        let (caller_role, actor) = (caller.role, caller.name.as_str());
        let (member, owners) = match member_and_owners(&mut tx, workspace, name).await? {
            Ok(found) => found,
            Err(e) => return Ok(Err(e)),
        };
        if let Err(e) = role_change(caller_role, member.role, role, owners) {
            return Ok(Err(MemberRefused::Role(e)));
        }
        if member.role != role {
            sqlx::query("UPDATE members SET role = $1 WHERE id = $2")
                .bind(role.as_str())
                .bind(member.id.to_string())
                .execute(&mut *tx)
                .await?;
            let detail = serde_json::json!({ "member": member.name, "from": member.role.as_str(), "to": role.as_str() });
            insert(&mut tx, &event(workspace, EventKind::RoleChanged, actor, detail)).await?;
        }
        tx.commit().await?;
        self.changed(workspace, None);
        Ok(Ok(MemberRow { role, ..member }))
    }

    /// Removes the member named `name` ("member removed", by `actor`, an owner): every
    /// API token and browser sign-in of theirs is revoked in the same transaction; their
    /// sessions, events and audit trail stay, attributed to them. Never the last owner.
    pub async fn remove_member(
        &self,
        workspace: WorkspaceId,
        name: &str,
        actor: &str,
    ) -> Result<std::result::Result<MemberRow, MemberRefused>> {
        let mut tx = self.write().await?;
        let (member, owners) = match member_and_owners(&mut tx, workspace, name).await? {
            Ok(found) => found,
            Err(e) => return Ok(Err(e)),
        };
        if member.role == Role::Owner && owners <= 1 {
            return Ok(Err(MemberRefused::LastOwner(member.name)));
        }
        let at = now();
        let id = member.id.to_string();
        sqlx::query("UPDATE members SET removed_at = $1 WHERE id = $2").bind(&at).bind(&id).execute(&mut *tx).await?;
        let tokens = sqlx::query("UPDATE tokens SET revoked_at = $1 WHERE member_id = $2 AND revoked_at IS NULL")
            .bind(&at)
            .bind(&id)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        sqlx::query("UPDATE web_sessions SET revoked_at = $1 WHERE member_id = $2 AND revoked_at IS NULL")
            .bind(&at)
            .bind(&id)
            .execute(&mut *tx)
            .await?;
        let detail = serde_json::json!({ "member": member.name, "role": member.role.as_str(), "tokens_revoked": tokens });
        insert(&mut tx, &event(workspace, EventKind::MemberRemoved, actor, detail)).await?;
        tx.commit().await?;
        self.changed(workspace, None);
        Ok(Ok(MemberRow { removed_at: Some(at), ..member }))
    }

    /// Stores an invitation (by the SHA-256 of its code) that gives `role` ("member invited").
    pub async fn create_invite(
        &self,
        workspace: WorkspaceId,
        role: Role,
        by: MemberId,
        actor: &str,
        digest: &str,
        ttl: chrono::Duration,
    ) -> Result<InviteRow> {
        let (id, at) = (InviteId::new(), chrono::Utc::now());
        let expires_at = format_time(at + ttl);
        let mut tx = self.write().await?;
        sqlx::query(
            "INSERT INTO invites (hash, id, workspace_id, role, created_by, created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(digest)
        .bind(id.to_string())
        .bind(workspace.to_string())
        .bind(role.as_str())
        .bind(by.to_string())
        .bind(format_time(at))
        .bind(&expires_at)
        .execute(&mut *tx)
        .await?;
        let detail = serde_json::json!({ "invite": id.to_string(), "role": role.as_str(), "expires_at": expires_at });
        insert(&mut tx, &event(workspace, EventKind::MemberInvited, actor, detail)).await?;
        tx.commit().await?;
        Ok(InviteRow { id, role, expires_at })
    }

    /// The workspace's unused, unexpired invitations, newest first.
    pub async fn pending_invites(&self, workspace: WorkspaceId) -> Result<Vec<PendingInvite>> {
        let rows = sqlx::query(
            "SELECT i.id, i.role, m.name AS created_by, i.created_at, i.expires_at FROM invites i JOIN members m ON m.id = i.created_by
             WHERE i.workspace_id = $1 AND i.used_at IS NULL AND i.expires_at > $2 ORDER BY i.created_at DESC",
        )
        .bind(workspace.to_string())
        .bind(now())
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                let role: String = r.get("role");
                Ok(PendingInvite {
                    id: parse_id(r.get("id"))?,
                    role: Role::parse(&role).ok_or_else(|| StoreError::Corrupt(format!("role {role}")))?,
                    created_by: r.get("created_by"),
                    created_at: r.get("created_at"),
                    expires_at: r.get("expires_at"),
                })
            })
            .collect()
    }

    /// Withdraws an unused invitation ("invitation withdrawn"); false if there is none.
    pub async fn revoke_invite(&self, workspace: WorkspaceId, id: InviteId, actor: &str) -> Result<bool> {
        let mut tx = self.write().await?;
        let at = now();
        let n = sqlx::query("UPDATE invites SET used_at = $1 WHERE id = $2 AND workspace_id = $3 AND used_at IS NULL")
            .bind(&at)
            .bind(id.to_string())
            .bind(workspace.to_string())
            .execute(&mut *tx)
            .await?
            .rows_affected();
        if n == 1 {
            insert(&mut tx, &event(workspace, EventKind::InviteRevoked, actor, serde_json::json!({ "invite": id.to_string() }))).await?;
        }
        tx.commit().await?;
        Ok(n == 1)
    }

    /// The role an unused, unexpired invitation gives, if it is one.
    pub async fn invite_role(&self, digest: &str) -> Result<Option<Role>> {
        let row = sqlx::query("SELECT role FROM invites WHERE hash = $1 AND used_at IS NULL AND expires_at > $2")
            .bind(digest)
            .bind(now())
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.and_then(|r| Role::parse(r.get::<&str, _>("role"))))
    }

    /// Uses an invitation: creates the member `name` with `password_hash` and the
    /// invitation's role ("member joined"), all or nothing.
    pub async fn accept_invite(
        &self,
        digest: &str,
        name: &str,
        password_hash: &str,
    ) -> Result<std::result::Result<MemberRow, MemberRefused>> {
        let mut tx = self.write().await?;
        let at = now();
        let invite = sqlx::query("SELECT id, workspace_id, role FROM invites WHERE hash = $1 AND used_at IS NULL AND expires_at > $2")
            .bind(digest)
            .bind(&at)
            .fetch_optional(&mut *tx)
            .await?;
        let Some(invite) = invite else { return Ok(Err(MemberRefused::InviteInvalid)) };
        let workspace: WorkspaceId = parse_id(invite.get("workspace_id"))?;
        let role: String = invite.get("role");
        let taken = sqlx::query("SELECT 1 FROM members WHERE workspace_id = $1 AND lower(name) = lower($2)")
            .bind(workspace.to_string())
            .bind(name)
            .fetch_optional(&mut *tx)
            .await?;
        if taken.is_some() {
            return Ok(Err(MemberRefused::NameTaken(name.to_string())));
        }
        let id = MemberId::new();
        sqlx::query("INSERT INTO members (id, workspace_id, name, role, created_at, password_hash) VALUES ($1, $2, $3, $4, $5, $6)")
            .bind(id.to_string())
            .bind(workspace.to_string())
            .bind(name)
            .bind(&role)
            .bind(&at)
            .bind(password_hash)
            .execute(&mut *tx)
            .await?;
        sqlx::query("UPDATE invites SET used_at = $1, used_by = $2 WHERE hash = $3")
            .bind(&at)
            .bind(id.to_string())
            .bind(digest)
            .execute(&mut *tx)
            .await?;
        let detail = serde_json::json!({ "member": name, "role": role, "invite": invite.get::<String, _>("id") });
        insert(&mut tx, &event(workspace, EventKind::MemberJoined, name, detail)).await?;
        let row = sqlx::query("SELECT * FROM members WHERE id = $1").bind(id.to_string()).fetch_one(&mut *tx).await?;
        let member = member_row(&row)?;
        tx.commit().await?;
        self.changed(workspace, None);
        Ok(Ok(member))
    }

    /// Stores a personal API token for `member` by its digest ("API token issued").
    pub async fn issue_member_token(&self, member: &MemberRow, digest: &str, label: &str) -> Result<TokenId> {
        let (id, at) = (TokenId::new(), now());
        let mut tx = self.write().await?;
        sqlx::query(
            "INSERT INTO tokens (id, workspace_id, kind, member_id, hash, label, created_at) VALUES ($1, $2, 'member', $3, $4, $5, $6)",
        )
        .bind(id.to_string())
        .bind(member.workspace.to_string())
        .bind(member.id.to_string())
        .bind(digest)
        .bind(label)
        .bind(&at)
        .execute(&mut *tx)
        .await?;
        let detail = serde_json::json!({ "token": id.to_string(), "member": member.name, "label": label });
        insert(&mut tx, &event(member.workspace, EventKind::TokenIssued, &member.name, detail)).await?;
        tx.commit().await?;
        Ok(id)
    }

    /// A member's personal API tokens, newest first (revoked ones included).
    pub async fn member_tokens(&self, member: MemberId) -> Result<Vec<TokenRow>> {
        let rows = sqlx::query("SELECT * FROM tokens WHERE member_id = $1 AND kind = 'member' ORDER BY created_at DESC, id DESC")
            .bind(member.to_string())
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(token_row).collect()
    }

    /// Revokes the personal token `id` ("API token revoked", by `by`): one of `by`'s
    /// own, or, when `any_member` (an owner), any member's of the workspace. Revoking a
    /// revoked token changes nothing.
    pub async fn revoke_member_token(
        &self,
        by: &MemberRow,
        id: TokenId,
        any_member: bool,
    ) -> Result<std::result::Result<TokenRow, MemberRefused>> {
        let member = by;
        let mut tx = self.write().await?;
        let row = sqlx::query("SELECT * FROM tokens WHERE id = $1 AND kind = 'member' AND workspace_id = $2 AND (member_id = $3 OR $4)")
            .bind(id.to_string())
            .bind(member.workspace.to_string())
            .bind(member.id.to_string())
            .bind(any_member)
            .fetch_optional(&mut *tx)
            .await?;
        let Some(token) = row.as_ref().map(token_row).transpose()? else {
            return Ok(Err(MemberRefused::NoSuchToken(id.to_string())));
        };
        if token.revoked_at.is_some() {
            return Ok(Ok(token));
        }
        let at = now();
        sqlx::query("UPDATE tokens SET revoked_at = $1 WHERE id = $2").bind(&at).bind(id.to_string()).execute(&mut *tx).await?;
        let owner: Option<String> =
            sqlx::query_scalar("SELECT name FROM members WHERE id = $1").bind(token.member.to_string()).fetch_optional(&mut *tx).await?;
        let detail = serde_json::json!({ "token": id.to_string(), "member": owner.unwrap_or_default(), "label": token.label });
        insert(&mut tx, &event(member.workspace, EventKind::TokenRevoked, &member.name, detail)).await?;
        tx.commit().await?;
        Ok(Ok(TokenRow { revoked_at: Some(at), ..token }))
    }

    /// Notes that a token was used now (at most once a minute per token is written).
    pub async fn touch_token(&self, digest: &str) -> Result<()> {
        let at = chrono::Utc::now();
        sqlx::query("UPDATE tokens SET last_used_at = $1 WHERE hash = $2 AND (last_used_at IS NULL OR last_used_at < $3)")
            .bind(format_time(at))
            .bind(digest)
            .bind(format_time(at - chrono::Duration::minutes(1)))
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
    async fn invites_make_members_once_and_names_stay_unique() {
        let (s, _d) = store().await;
        let (ws, owner) = s.bootstrap("default", "alice").await.unwrap();
        let inv = s.create_invite(ws, Role::Admin, owner, "alice", "code1", chrono::Duration::hours(1)).await.unwrap();
        assert_eq!(inv.role, Role::Admin);
        assert_eq!(s.invite_role("code1").await.unwrap(), Some(Role::Admin));
        assert_eq!(s.accept_invite("code1", "alice", "h").await.unwrap(), Err(MemberRefused::NameTaken("alice".into())));
        assert_eq!(
            s.accept_invite("code1", "ALICE", "h").await.unwrap(),
            Err(MemberRefused::NameTaken("ALICE".into())),
            "regardless of case"
        );
        let bob = s.accept_invite("code1", "bob", "h").await.unwrap().unwrap();
        assert_eq!((bob.name.as_str(), bob.role), ("bob", Role::Admin));
        assert_eq!(s.accept_invite("code1", "carol", "h").await.unwrap(), Err(MemberRefused::InviteInvalid), "used once");
        s.create_invite(ws, Role::Member, owner, "alice", "old", chrono::Duration::seconds(-1)).await.unwrap();
        assert_eq!(s.accept_invite("old", "carol", "h").await.unwrap(), Err(MemberRefused::InviteInvalid), "expired");
        assert_eq!(s.members(ws).await.unwrap().len(), 2);
        let pending = s.create_invite(ws, Role::Member, owner, "alice", "code2", chrono::Duration::hours(1)).await.unwrap();
        assert_eq!(
            s.pending_invites(ws).await.unwrap().iter().map(|i| i.id).collect::<Vec<_>>(),
            [pending.id],
            "used and expired ones are not listed"
        );
        assert!(s.revoke_invite(ws, pending.id, "alice").await.unwrap());
        assert!(!s.revoke_invite(ws, pending.id, "alice").await.unwrap());
        assert_eq!(s.accept_invite("code2", "dave", "h").await.unwrap(), Err(MemberRefused::InviteInvalid), "withdrawn");
        let kinds: Vec<String> = s.list_events(ws, None, 0, 100).await.unwrap().into_iter().map(|e| e.kind).collect();
        assert!(kinds.contains(&"member_invited".into()) && kinds.contains(&"member_joined".into()), "{kinds:?}");
    }

    #[tokio::test]
    async fn roles_change_by_owners_and_never_leave_no_owner() {
        let (s, _d) = store().await;
        let (ws, alice) = s.bootstrap("default", "alice").await.unwrap();
        s.create_invite(ws, Role::Member, alice, "alice", "c", chrono::Duration::hours(1)).await.unwrap();
        let bob = s.accept_invite("c", "bob", "h").await.unwrap().unwrap().id;
        let not_owner = Err(MemberRefused::Role(RoleChangeRefused::NotOwner));
        assert_eq!(s.set_role(ws, "bob", Role::Owner, bob).await.unwrap(), not_owner);
        assert_eq!(s.set_role(ws, "alice", Role::Member, alice).await.unwrap(), Err(MemberRefused::Role(RoleChangeRefused::LastOwner)));
        assert_eq!(s.set_role(ws, "bob", Role::Owner, alice).await.unwrap().unwrap().role, Role::Owner);
        assert_eq!(s.set_role(ws, "alice", Role::Member, bob).await.unwrap().unwrap().role, Role::Member);
        // Alice is no longer an owner: her role is read when she asks, not when she signed in.
        assert_eq!(s.set_role(ws, "bob", Role::Member, alice).await.unwrap(), not_owner);
        assert_eq!(s.set_role(ws, "zed", Role::Member, bob).await.unwrap(), Err(MemberRefused::NoSuchMember("zed".into())));
    }

    #[tokio::test]
    async fn personal_tokens_are_listed_and_revoked_by_their_owner_only() {
        let (s, _d) = store().await;
        let (ws, owner) = s.bootstrap("default", "alice").await.unwrap();
        let alice = s.member(owner).await.unwrap().unwrap();
        // A new password ends the member's other browser sign-ins, not the one changing it.
        s.open_web_session(owner, "here", chrono::Duration::hours(1)).await.unwrap();
        s.open_web_session(owner, "elsewhere", chrono::Duration::hours(1)).await.unwrap();
        s.set_password(owner, "$argon2id$x", Some("here"), false).await.unwrap();
        assert!(s.web_principal("here").await.unwrap().is_ok());
        assert!(s.web_principal("elsewhere").await.unwrap().is_err());
        let id = s.issue_member_token(&alice, "d1", "laptop").await.unwrap();
        assert!(s.principal_for("d1").await.unwrap().is_some());
        s.create_invite(ws, Role::Admin, owner, "alice", "c", chrono::Duration::hours(1)).await.unwrap();
        let bob = s.accept_invite("c", "bob", "h").await.unwrap().unwrap();
        assert_eq!(s.revoke_member_token(&bob, id, false).await.unwrap(), Err(MemberRefused::NoSuchToken(id.to_string())));
        let revoked = s.revoke_member_token(&alice, id, false).await.unwrap().unwrap();
        assert!(revoked.revoked_at.is_some());
        assert!(s.principal_for("d1").await.unwrap().is_none());
        assert_eq!(s.member_tokens(owner).await.unwrap().len(), 1);
    }
}

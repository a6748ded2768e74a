//! Credentials: generation, hashing, and the extractor that turns a bearer token (CLI,
//! devices) or the browser's session cookie into the calling principal. Only SHA-256
//! digests of tokens are stored; tokens carry 190 bits of randomness, so a fast hash is
//! the right tool (passwords, later, use argon2).
//!
//! The cookie is HttpOnly and SameSite=Strict; on top of that, a request authenticated
//! by the cookie that could change something (any method but GET/HEAD, and WebSocket
//! upgrades) must come from the server's own origin (`Origin` header), so no other site
//! can act with a signed-in browser.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use drover_core::permissions::{allowed, workspace_allowed, Action, Caller as PermCaller, Role, WorkspaceAction};
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
/// Prefix of one-time device enrollment tokens.
pub const ENROLLMENT_TOKEN_PREFIX: &str = "dre_";
/// Prefix of session-scoped agent credentials.
pub const SESSION_TOKEN_PREFIX: &str = "drs_";
/// Prefix of one-time login codes.
pub const LOGIN_CODE_PREFIX: &str = "drl_";
/// Prefix of browser session cookies.
pub const WEB_SESSION_PREFIX: &str = "drw_";
/// The one route a device credential may call: the device link.
pub const DEVICE_LINK_PATH: &str = "/api/v1/device/connect";
/// The browser session cookie's name.
pub const COOKIE: &str = "drover_session";

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

/// Issues and stores a session-scoped credential for the agent in `session`.
pub async fn issue_session_token(store: &Store, session: drover_core::SessionId) -> Result<String, drover_store::StoreError> {
    let token = new_token(SESSION_TOKEN_PREFIX);
    store.add_session_token(session, &digest(&token)).await?;
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

/// The authenticated caller of a request, and the credential it came with.
#[derive(Debug, Clone)]
pub struct Caller(pub Principal, pub Credential);

/// How a caller proved who they are (digests only), so a long-lived connection can
/// check later that it still holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credential {
    /// A bearer token (member, device or session token), by digest.
    Token(String),
    /// A browser session cookie, by digest.
    Cookie(String),
}

/// Who `credential` identifies now; None once it was revoked, expired or its session ended.
pub async fn current_principal(store: &Store, credential: &Credential) -> Result<Option<Principal>, drover_store::StoreError> {
    match credential {
        Credential::Cookie(d) => Ok(store.web_principal(d).await?.ok()),
        Credential::Token(d) => match store.principal_for(d).await? {
            Some(p) => Ok(Some(p)),
            None => Ok(store.session_for_token(d).await?.map(|s| Principal::Agent {
                workspace: s.workspace,
                session: s.id,
                task: s.task,
                name: s.agent_name.unwrap_or_else(|| "agent".into()),
            })),
        },
    }
}

/// A calling member, as the permission checks need them.
#[derive(Debug, Clone, Copy)]
pub struct Member<'a> {
    /// Their id.
    pub id: MemberId,
    /// Their name.
    pub name: &'a str,
    /// Their role.
    pub role: Role,
}

impl Caller {
    /// The calling member, or an error if the caller is not a member.
    pub fn member(&self) -> Result<Member<'_>, ApiError> {
        match &self.0 {
            Principal::Member { id, name, role, .. } => Ok(Member { id: *id, name, role: *role }),
            _ => Err(self.member_name().expect_err("not a member")),
        }
    }

    /// The calling member's name if their role allows `action` on the workspace.
    pub fn require(&self, action: WorkspaceAction) -> Result<String, ApiError> {
        let m = self.member()?;
        if workspace_allowed(m.role, action) {
            return Ok(m.name.to_string());
        }
        Err(ApiError::Forbidden(match action {
            WorkspaceAction::ManageMembers => "only a workspace owner can invite people or change roles".into(),
            WorkspaceAction::Administer => format!("only a workspace owner or admin can do this (you are {})", m.role.as_str()),
            WorkspaceAction::Work => "members only".into(),
            WorkspaceAction::StartUnconfined => format!(
                "only a workspace owner or admin can start a session outside the sandbox (you are {}); start it without --unconfined",
                m.role.as_str()
            ),
        }))
    }

    /// How the permission rules see this caller acting on `session`.
    pub fn on_session(&self, session: &drover_store::SessionRow, pinned_assignee: bool) -> PermCaller {
        match &self.0 {
            Principal::Member { id, role, .. } => {
                PermCaller::Member { role: *role, operates_agent: session.operator == Some(*id), pinned_assignee }
            }
            Principal::Agent { session: own, .. } => PermCaller::Agent { own_session: *own == session.id },
            Principal::Device { .. } => PermCaller::Device,
        }
    }

    /// Whether the caller may open `session`'s terminal, type, read its scrollback and
    /// stop it (owners, admins and the operator of its agent; never an agent).
    pub fn may_drop_in(&self, session: &drover_store::SessionRow) -> bool {
        allowed(self.on_session(session, false), Action::DropIn)
    }

    /// Whether the caller may drop in to a run whose operator is `operator`.
    pub fn may_drop_in_run(&self, operator: Option<MemberId>) -> bool {
        let caller = match &self.0 {
            Principal::Member { id, role, .. } => {
                PermCaller::Member { role: *role, operates_agent: operator == Some(*id), pinned_assignee: false }
            }
            Principal::Agent { .. } => PermCaller::Agent { own_session: false },
            Principal::Device { .. } => PermCaller::Device,
        };
        allowed(caller, Action::DropIn)
    }

    /// The caller's name if they may drop in to `session`; else a 403 that says who may.
    pub fn require_drop_in(&self, session: &drover_store::SessionRow) -> Result<String, ApiError> {
        let name = self.member_name()?;
        if self.may_drop_in(session) {
            return Ok(name);
        }
        let operator = match &session.agent_name {
            Some(agent) => format!("the operator of agent {agent}"),
            None => format!("{}, who started it", session.created_by),
        };
        Err(ApiError::Forbidden(format!(
            "no permission: only a workspace owner or admin, or {operator}, can open this session's terminal, read its output, send it input or stop it"
        )))
    }

    /// The member's name, or an error if the caller is not a member.
    pub fn member_name(&self) -> Result<String, ApiError> {
        match &self.0 {
            Principal::Member { name, .. } => Ok(name.clone()),
            Principal::Device { .. } => Err(ApiError::Forbidden("device credentials can only open the device link".into())),
            Principal::Agent { .. } => Err(ApiError::Forbidden(
                "an agent's session credential can only hand off, comment, file blockers and ask on its own task".into(),
            )),
        }
    }
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let header = parts.headers.get(axum::http::header::AUTHORIZATION).and_then(|v| v.to_str().ok());
        let token = header.and_then(|h| h.strip_prefix("Bearer ")).map(str::trim).filter(|t| !t.is_empty());
        if token.is_none() {
            if let Some(cookie) = session_cookie(&parts.headers) {
                return from_cookie(parts, state, &cookie).await;
            }
        }
        let Some(token) = token else {
            return Err(ApiError::Unauthorized(
                "no credentials: send `Authorization: Bearer <token>` (the CLI reads it from $DROVER_HOME or DROVER_TOKEN)".into(),
            ));
        };
        if token.len() > 256 {
            return Err(ApiError::Unauthorized("the token is not valid".into()));
        }
        if token.starts_with(SESSION_TOKEN_PREFIX) {
            let hash = digest(token);
            return match state.store.session_for_token(&hash).await? {
                Some(s) => Ok(Caller(
                    Principal::Agent {
                        workspace: s.workspace,
                        session: s.id,
                        task: s.task,
                        name: s.agent_name.unwrap_or_else(|| "agent".into()),
                    },
                    Credential::Token(hash),
                )),
                None => Err(ApiError::Unauthorized("this session credential is not valid: its session has ended".into())),
            };
        }
        let hash = digest(token);
        match state.store.principal_for(&hash).await? {
            Some(Principal::Device { .. }) if parts.uri.path() != DEVICE_LINK_PATH => {
                Err(ApiError::Forbidden("device credentials can only open the device link".into()))
            }
            Some(p) => {
                // Last use is shown in `drover token list`; written off the request's
                // path, at most once a minute per token.
                if state.touch_due(&hash) {
                    let store = state.store.clone();
                    let hash = hash.clone();
                    tokio::spawn(async move {
                        if let Err(e) = store.touch_token(&hash).await {
                            tracing::debug!("recording a token's last use: {e}");
                        }
                    });
                }
                Ok(Caller(p, Credential::Token(hash)))
            }
            None => Err(ApiError::Unauthorized(
                "the token is not valid or was revoked: get a new one (`drover up` writes one to $DROVER_HOME)".into(),
            )),
        }
    }
}

/// The session cookie's value, if the request carries one.
pub fn session_cookie(headers: &axum::http::HeaderMap) -> Option<String> {
    headers
        .get_all(axum::http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == COOKIE)
        .map(|(_, v)| v.to_string())
        .filter(|v| !v.is_empty() && v.len() <= 256)
}

/// Whether the request comes from a page of this server: `Origin` names the `Host` the
/// request was sent to.
pub fn same_origin(headers: &axum::http::HeaderMap) -> bool {
    let origin = headers.get(axum::http::header::ORIGIN).and_then(|v| v.to_str().ok());
    let host = headers.get(axum::http::header::HOST).and_then(|v| v.to_str().ok());
    match (origin, host) {
        (Some(origin), Some(host)) => {
            let rest = origin.strip_prefix("http://").or_else(|| origin.strip_prefix("https://"));
            rest.is_some_and(|r| r.eq_ignore_ascii_case(host))
        }
        _ => false,
    }
}

async fn from_cookie(parts: &Parts, state: &AppState, cookie: &str) -> Result<Caller, ApiError> {
    let unsafe_method = !matches!(parts.method, axum::http::Method::GET | axum::http::Method::HEAD);
    let upgrade = parts.headers.contains_key(axum::http::header::UPGRADE);
    if (unsafe_method || upgrade) && !same_origin(&parts.headers) {
        return Err(ApiError::Forbidden("cross-site request refused: use the page this server serves".into()));
    }
    let hash = digest(cookie);
    match state.store.web_principal(&hash).await? {
        Ok(p) => Ok(Caller(p, Credential::Cookie(hash))),
        Err(drover_store::WebSessionState::Expired) => {
            Err(ApiError::AuthExpired("auth expired: sign in again (`drover ui` prints a fresh sign-in link)".into()))
        }
        Err(drover_store::WebSessionState::Unknown) => {
            Err(ApiError::Unauthorized("not signed in: open a sign-in link (`drover ui` prints one)".into()))
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

    #[test]
    fn cookies_and_origins_are_read_strictly() {
        let mut h = axum::http::HeaderMap::new();
        h.insert("cookie", "a=1; drover_session=drw_x; b=2".parse().unwrap());
        assert_eq!(session_cookie(&h).as_deref(), Some("drw_x"));
        h.insert("host", "127.0.0.1:7070".parse().unwrap());
        assert!(!same_origin(&h));
        h.insert("origin", "http://127.0.0.1:7070".parse().unwrap());
        assert!(same_origin(&h));
        h.insert("origin", "http://evil.example".parse().unwrap());
        assert!(!same_origin(&h));
        h.insert("origin", "null".parse().unwrap());
        assert!(!same_origin(&h));
    }
}

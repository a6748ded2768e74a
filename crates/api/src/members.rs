//! Members, sign-in, invites, roles and API tokens.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// `GET /api/v1/me`: who is signed in.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct MeView {
    /// The member's name.
    pub name: String,
    /// Their role (`owner`, `admin`, `member`).
    pub role: String,
}

/// `POST /api/v1/login-links`: a one-time sign-in link.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct LoginLink {
    /// The link's path on the server (`/login/…`); join it to the server's URL.
    pub path: String,
    /// When it stops working (RFC 3339).
    pub expires_at: String,
}

/// `GET /api/v1/members`: one member of the workspace.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct MemberView {
    /// Their stable id (names can be reused after a removal).
    #[schema(value_type = crate::schema::MemberId)]
    pub id: drover_core::MemberId,
    /// The name they sign in with.
    pub name: String,
    /// Their role (`owner`, `admin`, `member`).
    pub role: String,
    /// When they joined.
    pub created_at: String,
    /// Whether they have set a password (can sign in with `drover login` or the web form).
    pub has_password: bool,
}

/// `PUT /api/v1/members/{name}/role`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SetRole {
    /// The new role (`owner`, `admin`, `member`).
    pub role: String,
}

/// `POST /api/v1/invites`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct CreateInvite {
    /// The role the new member gets (default `member`).
    pub role: Option<String>,
    /// How long the invitation works, in hours (default 72, at most 720).
    pub hours: Option<u32>,
}

/// An invitation, with its code (shown once).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct InviteView {
    /// The id to revoke it by (`POST /api/v1/invites/{id}/revoke`).
    #[schema(value_type = crate::schema::InviteId)]
    pub id: drover_core::InviteId,
    /// The role the new member gets.
    pub role: String,
    /// The secret code (`dri_…`) the invitation page redeems; shown only here.
    pub code: String,
    /// The invitation page's path on the server (`/invite/…`); join it to the server's URL.
    pub path: String,
    /// When it stops working (RFC 3339).
    pub expires_at: String,
}

/// `GET /api/v1/invites`: an invitation not yet used (never its code).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct PendingInviteView {
    /// The id to revoke it by (`POST /api/v1/invites/{id}/revoke`).
    #[schema(value_type = crate::schema::InviteId)]
    pub id: drover_core::InviteId,
    /// The role it gives.
    pub role: String,
    /// Who sent it.
    pub created_by: String,
    /// When it was sent (RFC 3339).
    pub created_at: String,
    /// Until when it works.
    pub expires_at: String,
}

/// `GET /api/v1/invites/{code}`: what an invitation offers (for the invitation page).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct InviteInfo {
    /// The role the new member gets.
    pub role: String,
}

/// `POST /api/v1/invites/{code}/accept`: joins the workspace.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AcceptInvite {
    /// The invitation's code (`dri_…`), as its page read it from the link's fragment.
    pub code: String,
    /// The name to sign in with.
    pub name: String,
    /// The password to sign in with.
    pub password: String,
}

/// `POST /api/v1/login` (browser) and `POST /api/v1/login/token` (`drover login`).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Login {
    /// The member's name.
    pub name: String,
    /// Their password.
    pub password: String,
    /// For a token: what it is for (shown in `drover token list`).
    pub label: Option<String>,
}

/// `PUT /api/v1/me/password`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SetPassword {
    /// The current password (needed once one is set).
    pub current: Option<String>,
    /// The new password.
    pub password: String,
    /// Revoke every personal API token too (all but the one making the change).
    #[serde(default)]
    pub revoke_tokens: bool,
}

/// `POST /api/v1/invites/lookup`: an invitation's code, to learn the role it gives.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct InviteCode {
    /// The code (`dri_…`).
    pub code: String,
}

/// `POST /api/v1/login/link`: a one-time sign-in link's code, as its page read it from the
/// link's fragment.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct RedeemLoginLink {
    /// The code (`drl_…`).
    pub code: String,
}

/// `POST /api/v1/tokens`: a new personal token for the caller.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct CreateToken {
    /// What it is for, so its holder can tell tokens apart when revoking.
    pub label: String,
}

/// A personal API token (never the token itself, except once in [`IssuedToken`]).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct TokenView {
    /// The id to revoke it by (`POST /api/v1/tokens/{id}/revoke`).
    #[schema(value_type = crate::schema::TokenId)]
    pub id: drover_core::TokenId,
    /// What its holder said it is for (shown in `drover token list`).
    pub label: String,
    /// When it was issued.
    pub created_at: String,
    /// When it was last used (to the minute).
    pub last_used_at: Option<String>,
    /// When it was revoked.
    pub revoked_at: Option<String>,
}

/// A newly issued personal token (the token is shown once).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct IssuedToken {
    /// The token's row as `GET /api/v1/tokens` will list it.
    pub info: TokenView,
    /// The secret, for `Authorization: Bearer`.
    pub token: String,
    /// Who it signs in.
    pub member: MeView,
}

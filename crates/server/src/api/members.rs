//! Members and sign-in: the member list, invitations, roles, passwords, the browser's
//! password sign-in, and personal API tokens (`drover login`, `drover token`). Sign-ins
//! are rate-limited per client address and per name; every change is audited.

use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::Json;
use drover_api::{
    AcceptInvite, CreateInvite, CreateToken, InviteInfo, InviteView, IssuedToken, Login, MeView, MemberView, PendingInviteView,
    SetPassword, SetRole, TokenView,
};
use drover_core::names::{check_member_name, check_password};
use drover_core::permissions::{Role, WorkspaceAction};
use drover_core::TokenId;
use drover_store::{MemberRefused, MemberRow, TokenRow};

use super::ApiJson;
use crate::auth::{self, Caller};
use crate::{passwords, ApiError, AppState};

/// Prefix of invitation codes.
pub const INVITE_PREFIX: &str = "dri_";
/// Longest token label accepted, in characters.
const MAX_LABEL: usize = 100;

fn member_view(m: &MemberRow) -> MemberView {
    MemberView {
        id: m.id,
        name: m.name.clone(),
        role: m.role.as_str().into(),
        created_at: m.created_at.clone(),
        has_password: m.password_hash.is_some(),
    }
}

fn token_view(t: &TokenRow) -> TokenView {
    TokenView {
        id: t.id,
        label: t.label.clone(),
        created_at: t.created_at.clone(),
        last_used_at: t.last_used_at.clone(),
        revoked_at: t.revoked_at.clone(),
    }
}

fn refused(e: MemberRefused) -> ApiError {
    match e {
        MemberRefused::NoSuchMember(_) | MemberRefused::NoSuchToken(_) => ApiError::NotFound(e.to_string()),
        MemberRefused::NameTaken(_) => ApiError::Conflict(e.to_string()),
        MemberRefused::InviteInvalid => ApiError::NotFound(e.to_string()),
        MemberRefused::Role(_) => ApiError::Forbidden(e.to_string()),
        MemberRefused::LastOwner(_) => ApiError::Conflict(e.to_string()),
    }
}

fn parse_role(role: &str) -> Result<Role, ApiError> {
    Role::parse(role).ok_or_else(|| {
        ApiError::BadRequest(format!("`{}` is not a role: use owner, admin or member", role.chars().take(40).collect::<String>()))
    })
}

fn check_label(label: &str) -> Result<(), ApiError> {
    if label.trim().is_empty() || label.chars().count() > MAX_LABEL || label.chars().any(char::is_control) {
        return Err(ApiError::BadRequest(format!("the label must be 1–{MAX_LABEL} characters without control characters")));
    }
    Ok(())
}

/// A sign-in request from a page must come from this server's own pages (no login CSRF).
fn check_origin(headers: &HeaderMap) -> Result<(), ApiError> {
    if headers.contains_key(header::ORIGIN) && !auth::same_origin(headers) {
        return Err(ApiError::Forbidden("cross-site request refused: use the page this server serves".into()));
    }
    Ok(())
}

/// Checks a name and password against the store, under the rate limit; the member on success.
async fn authenticate(state: &AppState, addr: std::net::IpAddr, name: &str, password: &str) -> Result<MemberRow, ApiError> {
    let member = if check_member_name(name).is_ok() { state.store.member_by_name(state.workspace, name).await? } else { None };
    let attempt = crate::limits::count_attempt(state, addr, member.as_ref().map(|m| m.name.as_str())).await?;
    let hash = member.as_ref().and_then(|m| m.password_hash.clone());
    let bounded = password.len() <= drover_core::names::MAX_PASSWORD_BYTES;
    if bounded && passwords::verify(password.to_string(), hash).await? {
        crate::limits::forgive(state, attempt).await;
        return Ok(member.expect("a password matched"));
    }
    state.metrics.sign_in_failed(crate::metrics::SignInFailure::WrongPassword);
    Err(ApiError::Unauthorized(
        "wrong name or password (a member without a password signs in with a link from `drover ui`, then sets one)".into(),
    ))
}

/// Opens a browser session for `member`; the `Set-Cookie` header for it.
async fn open_web_session(state: &AppState, member: &MemberRow, https: crate::forwarded::Https) -> Result<header::HeaderValue, ApiError> {
    let cookie = auth::new_token(auth::WEB_SESSION_PREFIX);
    let ttl = chrono::Duration::from_std(state.config.web_session_ttl).unwrap_or(chrono::Duration::days(7));
    state.store.open_web_session(member.id, &auth::digest(&cookie), ttl).await?;
    Ok(crate::web::set_cookie(state, &cookie, https))
}

fn me(m: &MemberRow) -> MeView {
    MeView { name: m.name.clone(), role: m.role.as_str().into() }
}

/// `POST /api/v1/login`: signs a browser in with name and password (sets the cookie).
pub async fn login(
    State(state): State<AppState>,
    crate::forwarded::ClientAddr(addr): crate::forwarded::ClientAddr,
    https: crate::forwarded::Https,
    headers: HeaderMap,
    ApiJson(req): ApiJson<Login>,
) -> Result<impl IntoResponse, ApiError> {
    check_origin(&headers)?;
    let member = authenticate(&state, addr, &req.name, &req.password).await?;
    let cookie = open_web_session(&state, &member, https).await?;
    Ok(([(header::SET_COOKIE, cookie)], Json(me(&member))))
}

/// Issues a personal token for `member` labelled `label`.
async fn issue(state: &AppState, member: &MemberRow, label: &str) -> Result<IssuedToken, ApiError> {
    check_label(label)?;
    let token = auth::new_token(auth::MEMBER_TOKEN_PREFIX);
    let id = state.store.issue_member_token(member, &auth::digest(&token), label).await?;
    let row = state.store.member_tokens(member.id).await?.into_iter().find(|t| t.id == id).expect("just issued");
    Ok(IssuedToken { info: token_view(&row), token, member: me(member) })
}

/// `POST /api/v1/login/token`: `drover login`: name and password for a personal API token.
pub async fn login_token(
    State(state): State<AppState>,
    crate::forwarded::ClientAddr(addr): crate::forwarded::ClientAddr,
    headers: HeaderMap,
    ApiJson(req): ApiJson<Login>,
) -> Result<(StatusCode, Json<IssuedToken>), ApiError> {
    check_origin(&headers)?;
    let member = authenticate(&state, addr, &req.name, &req.password).await?;
    let label = req.label.unwrap_or_else(|| "drover login".into());
    Ok((StatusCode::CREATED, Json(issue(&state, &member, &label).await?)))
}

async fn caller_row(state: &AppState, caller: &Caller) -> Result<MemberRow, ApiError> {
    let id = caller.member()?.id;
    state.store.member(id).await?.ok_or_else(|| ApiError::Unauthorized("your membership no longer exists".into()))
}

/// `POST /api/v1/tokens`: another personal token for the signed-in member.
pub async fn create_token(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(req): ApiJson<CreateToken>,
) -> Result<(StatusCode, Json<IssuedToken>), ApiError> {
    let member = caller_row(&state, &caller).await?;
    Ok((StatusCode::CREATED, Json(issue(&state, &member, &req.label).await?)))
}

/// `GET /api/v1/tokens`: the caller's personal tokens (revoked ones too).
pub async fn tokens(State(state): State<AppState>, caller: Caller) -> Result<Json<Vec<TokenView>>, ApiError> {
    let id = caller.member()?.id;
    Ok(Json(state.store.member_tokens(id).await?.iter().map(token_view).collect()))
}

/// `POST /api/v1/tokens/{id}/revoke`: revokes one of the caller's tokens, or (owners)
/// any member's.
pub async fn revoke_token(State(state): State<AppState>, caller: Caller, Path(id): Path<String>) -> Result<Json<TokenView>, ApiError> {
    let member = caller_row(&state, &caller).await?;
    let id: TokenId = id.trim().parse().map_err(|e: drover_core::IdError| ApiError::BadRequest(e.to_string()))?;
    let owner = caller.require(WorkspaceAction::ManageMembers).is_ok();
    let row = state.store.revoke_member_token(&member, id, owner).await?.map_err(refused)?;
    state.access_changed.notify_waiters();
    Ok(Json(token_view(&row)))
}

/// `GET /api/v1/members/{name}/tokens`: a member's personal tokens (owners; anyone
/// their own).
pub async fn member_tokens(
    State(state): State<AppState>,
    caller: Caller,
    Path(name): Path<String>,
) -> Result<Json<Vec<TokenView>>, ApiError> {
    let me = caller_row(&state, &caller).await?;
    if !me.name.eq_ignore_ascii_case(&name) {
        caller.require(WorkspaceAction::ManageMembers)?;
    }
    let member =
        state.store.member_by_name(caller.0.workspace(), &name).await?.ok_or_else(|| refused(MemberRefused::NoSuchMember(name)))?;
    Ok(Json(state.store.member_tokens(member.id).await?.iter().map(token_view).collect()))
}

/// `DELETE /api/v1/members/{name}` (owners): removes a member. Their tokens and browser
/// sign-ins stop working at once and their open terminals close; what they did stays,
/// under their name.
pub async fn remove(State(state): State<AppState>, caller: Caller, Path(name): Path<String>) -> Result<Json<MemberView>, ApiError> {
    let who = caller.require(WorkspaceAction::ManageMembers)?;
    let row = state.store.remove_member(caller.0.workspace(), &name, &who).await?.map_err(refused)?;
    state.access_changed.notify_waiters();
    Ok(Json(member_view(&row)))
}

/// `GET /api/v1/members`.
pub async fn list(State(state): State<AppState>, caller: Caller) -> Result<Json<Vec<MemberView>>, ApiError> {
    caller.require(WorkspaceAction::Work)?;
    Ok(Json(state.store.members(caller.0.workspace()).await?.iter().map(member_view).collect()))
}

/// `PUT /api/v1/members/{name}/role` (owners): changes a member's role.
pub async fn set_role(
    State(state): State<AppState>,
    caller: Caller,
    Path(name): Path<String>,
    ApiJson(req): ApiJson<SetRole>,
) -> Result<Json<MemberView>, ApiError> {
    caller.require(WorkspaceAction::ManageMembers)?;
    let role = parse_role(&req.role)?;
    let row = state.store.set_role(caller.0.workspace(), &name, role, caller.member()?.id).await?.map_err(refused)?;
    state.access_changed.notify_waiters();
    Ok(Json(member_view(&row)))
}

/// `POST /api/v1/invites` (owners): an invitation link with a one-time code.
pub async fn invite(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(req): ApiJson<CreateInvite>,
) -> Result<(StatusCode, Json<InviteView>), ApiError> {
    let who = caller.require(WorkspaceAction::ManageMembers)?;
    let role = parse_role(req.role.as_deref().unwrap_or("member"))?;
    let hours = req.hours.unwrap_or(72);
    if !(1..=720).contains(&hours) {
        return Err(ApiError::BadRequest("an invitation works for 1–720 hours".into()));
    }
    let code = auth::new_token(INVITE_PREFIX);
    let by = caller.member()?.id;
    let row = state
        .store
        .create_invite(caller.0.workspace(), role, by, &who, &auth::digest(&code), chrono::Duration::hours(hours.into()))
        .await?;
    Ok((
        StatusCode::CREATED,
        Json(InviteView { id: row.id, role: role.as_str().into(), path: format!("/invite#{code}"), code, expires_at: row.expires_at }),
    ))
}

/// `GET /api/v1/invites` (owners): invitations not yet used.
pub async fn invites(State(state): State<AppState>, caller: Caller) -> Result<Json<Vec<PendingInviteView>>, ApiError> {
    caller.require(WorkspaceAction::ManageMembers)?;
    let list = state.store.pending_invites(caller.0.workspace()).await?;
    Ok(Json(
        list.into_iter()
            .map(|i| PendingInviteView {
                id: i.id,
                role: i.role.as_str().into(),
                created_by: i.created_by,
                created_at: i.created_at,
                expires_at: i.expires_at,
            })
            .collect(),
    ))
}

/// `POST /api/v1/invites/{id}/revoke` (owners): withdraws an unused invitation.
pub async fn revoke_invite(State(state): State<AppState>, caller: Caller, Path(id): Path<String>) -> Result<StatusCode, ApiError> {
    let who = caller.require(WorkspaceAction::ManageMembers)?;
    let id: drover_core::InviteId = id.trim().parse().map_err(|e: drover_core::IdError| ApiError::BadRequest(e.to_string()))?;
    if !state.store.revoke_invite(caller.0.workspace(), id, &who).await? {
        return Err(ApiError::NotFound(format!("no unused invitation {id}: `drover member invites` lists them")));
    }
    Ok(StatusCode::NO_CONTENT)
}

fn check_code(code: &str) -> Result<(), ApiError> {
    if code.len() > 128 || !code.starts_with(INVITE_PREFIX) {
        return Err(refused(MemberRefused::InviteInvalid));
    }
    Ok(())
}

/// `POST /api/v1/invites/lookup` (`{"code": …}`): what an unused invitation offers. The
/// code travels in bodies, never in a path (proxies log paths).
pub async fn invite_info(
    State(state): State<AppState>,
    ApiJson(req): ApiJson<drover_api::InviteCode>,
) -> Result<Json<InviteInfo>, ApiError> {
    let code = req.code;
    check_code(&code)?;
    let role = state.store.invite_role(&auth::digest(&code)).await?.ok_or_else(|| refused(MemberRefused::InviteInvalid))?;
    Ok(Json(InviteInfo { role: role.as_str().into() }))
}

/// `POST /api/v1/invites/accept` (`{"code", "name", "password"}`): joins with a name
/// and password, signed in.
pub async fn accept(
    State(state): State<AppState>,
    crate::forwarded::ClientAddr(addr): crate::forwarded::ClientAddr,
    https: crate::forwarded::Https,
    headers: HeaderMap,
    ApiJson(req): ApiJson<AcceptInvite>,
) -> Result<impl IntoResponse, ApiError> {
    check_origin(&headers)?;
    let code = req.code.clone();
    let attempt = crate::limits::count_attempt(&state, addr, None).await?;
    if check_code(&code).is_err() || state.store.invite_role(&auth::digest(&code)).await?.is_none() {
        return Err(refused(MemberRefused::InviteInvalid));
    }
    crate::limits::forgive(&state, attempt).await;
    check_member_name(&req.name).map_err(|e| ApiError::BadRequest(e.to_string()))?;
    check_password(&req.password).map_err(|e| ApiError::BadRequest(e.to_string()))?;
    let hash = passwords::hash(req.password).await?;
    let member = state.store.accept_invite(&auth::digest(&code), &req.name, &hash).await?.map_err(refused)?;
    let cookie = open_web_session(&state, &member, https).await?;
    Ok((StatusCode::CREATED, [(header::SET_COOKIE, cookie)], Json(me(&member))))
}

/// `PUT /api/v1/me/password`: sets the caller's password (the current one is needed
/// once one is set).
pub async fn set_password(
    State(state): State<AppState>,
    crate::forwarded::ClientAddr(addr): crate::forwarded::ClientAddr,
    caller: Caller,
    ApiJson(req): ApiJson<SetPassword>,
) -> Result<StatusCode, ApiError> {
    let member = caller_row(&state, &caller).await?;
    if member.password_hash.is_some() {
        let current = req.current.unwrap_or_default();
        authenticate(&state, addr, &member.name, &current).await.map_err(|e| {
            if matches!(e, ApiError::Unauthorized(_)) {
                ApiError::Forbidden("the current password is wrong".into())
            } else {
                e
            }
        })?;
    }
    check_password(&req.password).map_err(|e| ApiError::BadRequest(e.to_string()))?;
    let hash = passwords::hash(req.password).await?;
    // Other browsers signed in as this member are signed out (and, when asked, every
    // API token revoked); the credential that made the change stays.
    let keep = match &caller.1 {
        auth::Credential::Cookie(digest) | auth::Credential::Token(digest) => Some(digest.as_str()),
    };
    state.store.set_password(member.id, &hash, keep, req.revoke_tokens).await?;
    state.access_changed.notify_waiters();
    Ok(StatusCode::NO_CONTENT)
}

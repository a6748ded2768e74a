//! The browser UI: the built front end embedded in the binary (see build.rs), served
//! with strict headers, and the one-time sign-in links that set the session cookie.

use axum::extract::{Path, State};
use axum::http::{header, HeaderValue, StatusCode, Uri};
use axum::response::{IntoResponse, Response};

use crate::{auth, AppState};

mod assets {
    include!(concat!(env!("OUT_DIR"), "/web_assets.rs"));
}

/// Content-Security-Policy of every page: scripts and styles only from this server
/// (xterm.js sets inline style attributes, hence `'unsafe-inline'` for styles only).
const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; \
                   connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

/// Cross-origin isolation (`Cross-Origin-Opener-Policy` and `-Embedder-Policy`): every
/// page loads only from this server anyway, and isolation lets the live terminal share
/// memory with its socket worker, which brings a keystroke's echo in without waiting for
/// the browser's next frame (web/src/ring.ts).
const OPENER_POLICY: &str = "same-origin";
const EMBEDDER_POLICY: &str = "require-corp";

/// How long the cookie is kept after the sign-in it carries has expired.
const COOKIE_GRACE_SECS: u64 = 7 * 24 * 3600;

fn content_type(path: &str) -> &'static str {
    match path.rsplit_once('.').map(|(_, ext)| ext) {
        Some("html") => "text/html; charset=utf-8",
        Some("js") => "text/javascript; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("svg") => "image/svg+xml",
        Some("webmanifest") => "application/manifest+json",
        Some("png") => "image/png",
        Some("woff2") => "font/woff2",
        _ => "application/octet-stream",
    }
}

fn asset(path: &str) -> Option<&'static [u8]> {
    assets::ASSETS.iter().find(|(p, _)| *p == path).map(|(_, b)| *b)
}

fn with_headers(mut resp: Response, cache: &'static str) -> Response {
    let h = resp.headers_mut();
    h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert("cross-origin-opener-policy", HeaderValue::from_static(OPENER_POLICY));
    h.insert("cross-origin-embedder-policy", HeaderValue::from_static(EMBEDDER_POLICY));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
    resp
}

/// Serves a built file, or the app's page for any other path (the app routes itself).
pub async fn page(uri: Uri) -> Response {
    let path = uri.path();
    if let Some(bytes) = asset(path).filter(|_| path != "/index.html") {
        return with_headers(([(header::CONTENT_TYPE, content_type(path))], bytes).into_response(), "no-cache");
    }
    let index = asset("/index.html").unwrap_or(b"the web UI was not built");
    with_headers(([(header::CONTENT_TYPE, "text/html; charset=utf-8")], index).into_response(), "no-store")
}

/// A plain page for sign-in failures (fixed text: nothing from the request is echoed).
fn message_page(status: StatusCode, text: &'static str) -> Response {
    let body = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>Drover</title><link rel=\"stylesheet\" href=\"/app.css\"></head><body><main class=\"message-page\"><h1>Drover</h1><p>{text}</p></main></body></html>"
    );
    with_headers((status, [(header::CONTENT_TYPE, "text/html; charset=utf-8")], body).into_response(), "no-store")
}

/// The `Set-Cookie` value for a new browser session `cookie`. The cookie outlives the
/// sign-in by a week so the server can say "auth expired" (rather than "not signed in")
/// when it has; the server decides.
pub fn set_cookie(state: &AppState, cookie: &str, https: crate::forwarded::Https) -> HeaderValue {
    let max_age = state.config.web_session_ttl.as_secs() + COOKIE_GRACE_SECS;
    // Reached over https (directly or through a trusted proxy), the cookie never travels
    // in clear.
    let secure = if https.0 { "; Secure" } else { "" };
    let set = format!("{}={cookie}; Path=/; HttpOnly; SameSite=Strict; Max-Age={max_age}{secure}", auth::COOKIE);
    HeaderValue::from_str(&set).expect("cookie is ASCII")
}

/// `GET /login/{code}`: the retired form of a sign-in link, whose code travelled in the
/// address (and so into proxy logs): never redeemed, the page says to get a new one.
pub async fn retired_login(Path(_code): Path<String>) -> Response {
    message_page(
        StatusCode::GONE,
        "This form of sign-in link is no longer accepted. Run <code>drover ui</code> on the server's machine for a fresh one.",
    )
}

/// `POST /api/v1/login/link` (`{"code": …}`, from the sign-in page, which read it from
/// the link's fragment): redeems a one-time sign-in link and sets the session cookie.
/// Cross-site requests are refused, so no other site can sign a browser in.
pub async fn redeem_login(
    State(state): State<AppState>,
    https: crate::forwarded::Https,
    headers: axum::http::HeaderMap,
    crate::api::ApiJson(req): crate::api::ApiJson<drover_api::RedeemLoginLink>,
) -> Result<Response, crate::ApiError> {
    if headers.contains_key(header::ORIGIN) && !auth::same_origin(&headers) {
        return Err(crate::ApiError::Forbidden("cross-site request refused: use the page this server serves".into()));
    }
    let gone = || crate::ApiError::NotFound("this sign-in link was already used or has expired: run `drover ui` for a fresh one".into());
    if req.code.len() > 128 || !req.code.starts_with(auth::LOGIN_CODE_PREFIX) {
        return Err(gone());
    }
    let cookie = auth::new_token(auth::WEB_SESSION_PREFIX);
    let ttl = chrono::Duration::from_std(state.config.web_session_ttl).unwrap_or(chrono::Duration::days(7));
    if state.store.redeem_login_link(&auth::digest(&req.code), &auth::digest(&cookie), ttl).await?.is_none() {
        return Err(gone());
    }
    let mut resp = StatusCode::NO_CONTENT.into_response();
    resp.headers_mut().insert(header::SET_COOKIE, set_cookie(&state, &cookie, https));
    Ok(with_headers(resp, "no-store"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_built_ui_is_embedded() {
        assert!(asset("/index.html").is_some_and(|b| std::str::from_utf8(b).unwrap().contains("/app.js")));
        assert!(asset("/app.js").is_some());
        assert!(asset("/app.css").is_some());
        assert_eq!(content_type("/app.js"), "text/javascript; charset=utf-8");
        // The service worker, at the root so its scope is the whole site, and the app's
        // manifest with its icon.
        assert!(asset("/sw.js").is_some());
        // The live terminal's socket worker.
        assert!(asset("/socket.js").is_some());
        assert!(asset("/manifest.webmanifest").is_some_and(|b| std::str::from_utf8(b).unwrap().contains("\"start_url\": \"/inbox\"")));
        assert!(asset("/icon.svg").is_some());
        assert_eq!(content_type("/manifest.webmanifest"), "application/manifest+json");
    }

    #[test]
    fn every_page_is_cross_origin_isolated() {
        // The live terminal's shared ring needs it (web/src/ring.ts).
        for resp in [with_headers(().into_response(), "no-store"), message_page(StatusCode::GONE, "gone")] {
            let h = resp.headers();
            assert_eq!(h["cross-origin-opener-policy"], "same-origin");
            assert_eq!(h["cross-origin-embedder-policy"], "require-corp");
        }
    }
}

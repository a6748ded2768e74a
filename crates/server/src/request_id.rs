//! The request id: every response carries `x-request-id` (the client's own when well
//! formed, else a new one), and everything logged while serving the request is inside
//! an `http` span with that id, the method and the matched route.
//!
//! Only the route's template is logged (`/api/v1/sessions/{id}`), never the path as sent
//! nor its query: a path can carry a one-time code (`/login/{code}`). The layer is the
//! served router's outermost, so the id reaches every response, rewrapped errors included.

use axum::extract::{MatchedPath, Request};
use axum::http::HeaderValue;
use axum::middleware::Next;
use axum::response::Response;
use tracing::Instrument;

/// The header that carries the request id, both ways.
pub const HEADER: &str = "x-request-id";

/// The longest request id taken from a client.
pub const MAX_LEN: usize = 128;

/// Tags the request with its id and serves it inside its `http` span.
pub async fn tag(req: Request, next: Next) -> Response {
    let id = req.headers().get(HEADER).and_then(well_formed).unwrap_or_else(new_id);
    let route = req.extensions().get::<MatchedPath>().map(|p| p.as_str().to_string()).unwrap_or_else(|| "(fallback)".into());
    let span = tracing::info_span!("http", request_id = %id, method = %req.method(), route = %route);
    let started = std::time::Instant::now();
    let mut resp = next.run(req).instrument(span.clone()).await;
    span.in_scope(|| {
        tracing::info!(status = resp.status().as_u16(), ms = started.elapsed().as_secs_f64() * 1000.0, "request served");
    });
    resp.headers_mut().insert(HEADER, HeaderValue::from_str(&id).expect("request ids are visible ASCII"));
    resp
}

/// The client's request id, if it is 1 to [`MAX_LEN`] visible ASCII characters.
fn well_formed(v: &HeaderValue) -> Option<String> {
    let b = v.as_bytes();
    let ok = !b.is_empty() && b.len() <= MAX_LEN && b.iter().all(|c| c.is_ascii_graphic());
    ok.then(|| String::from_utf8_lossy(b).into_owned())
}

/// A new request id: a UUIDv7 (time-ordered), 32 hex digits.
fn new_id() -> String {
    uuid::Uuid::now_v7().simple().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_short_visible_ascii_ids_are_taken() {
        let take = |s: &[u8]| HeaderValue::from_bytes(s).ok().as_ref().and_then(well_formed);
        assert_eq!(take(b"abc-123_X.y:z").as_deref(), Some("abc-123_X.y:z"));
        assert_eq!(take(&[b'a'; MAX_LEN]).map(|s| s.len()), Some(MAX_LEN));
        assert_eq!(take(&[b'a'; MAX_LEN + 1]), None, "too long");
        assert_eq!(take(b"has space"), None);
        assert_eq!(take(b""), None);
        assert_eq!(take("é".as_bytes()), None, "not ASCII");
        assert_eq!(take(b"tab\there"), None);
        assert_eq!(new_id().len(), 32);
        assert_ne!(new_id(), new_id());
    }
}

//! Credentials and ids as they arrive in requests: the browser session cookie and the
//! same-origin check (`drover_server::auth::session_cookie` / `same_origin`) on header
//! maps built from the input, token digests, every typed id's parser (path segments,
//! cursors, JSON), and the store's time parser (sign-in expiry, list cursors).
//!
//! Input layout: a list of headers, each `[selector][length][value bytes]`; the selector
//! picks `cookie`, `origin`, `host`, `authorization` or `upgrade` (so repeated headers
//! happen). The whole input, as text, is also fed to the id, digest and time parsers.

#![no_main]

use std::str::FromStr;

use drover_core::{
    AgentId, DeviceId, EventId, InviteId, MemberId, MessageId, NoteId, RepoId, SandboxId, SessionId, TaskId, TokenId, WebhookId,
    WorkspaceId,
};
use drover_server::auth::{digest, same_origin, session_cookie, COOKIE};
use http::header::{AUTHORIZATION, COOKIE as COOKIE_HEADER, HOST, ORIGIN, UPGRADE};
use http::{HeaderMap, HeaderName, HeaderValue};
use libfuzzer_sys::fuzz_target;

const NAMES: [HeaderName; 5] = [COOKIE_HEADER, ORIGIN, HOST, AUTHORIZATION, UPGRADE];

fn headers(mut data: &[u8]) -> HeaderMap {
    let mut map = HeaderMap::new();
    while let [selector, len, rest @ ..] = data {
        let n = (*len as usize).min(rest.len());
        let (value, tail) = rest.split_at(n);
        if let Ok(v) = HeaderValue::from_bytes(value) {
            map.append(NAMES[*selector as usize % NAMES.len()].clone(), v);
        }
        data = tail;
    }
    map
}

fn id<T: FromStr + std::fmt::Display + PartialEq + std::fmt::Debug>(s: &str, prefix: &str) {
    if let Ok(id) = s.parse::<T>() {
        let shown = id.to_string();
        assert!(shown.starts_with(prefix) && shown.len() == prefix.len() + 32, "{shown}");
        assert!(shown.eq_ignore_ascii_case(s), "{s:?} shown as {shown:?}");
        assert_eq!(shown.parse::<T>().ok(), Some(id));
    }
}

fn json_id<T: serde::de::DeserializeOwned + FromStr + std::fmt::Debug + PartialEq>(data: &[u8]) {
    if let Ok(v) = serde_json::from_slice::<T>(data) {
        let text: String = serde_json::from_slice(data).expect("an id is a JSON string");
        assert_eq!(text.parse::<T>().ok(), Some(v));
    }
}

fuzz_target!(|data: &[u8]| {
    let map = headers(data);

    if let Some(cookie) = session_cookie(&map) {
        assert!(!cookie.is_empty() && cookie.len() <= 256 && !cookie.contains(';'));
        let pair = format!("{COOKIE}={cookie}");
        assert!(
            map.get_all(COOKIE_HEADER).iter().filter_map(|v| v.to_str().ok()).any(|v| v.contains(&pair)),
            "{pair:?} is not in the Cookie headers"
        );
    }

    if same_origin(&map) {
        let origin = map.get(ORIGIN).and_then(|v| v.to_str().ok()).expect("same origin needs an Origin");
        let host = map.get(HOST).and_then(|v| v.to_str().ok()).expect("same origin needs a Host");
        let rest = origin.strip_prefix("http://").or_else(|| origin.strip_prefix("https://")).expect("an http(s) origin");
        assert!(rest.eq_ignore_ascii_case(host));
    }

    for v in map.get_all(AUTHORIZATION) {
        if let Some(token) = v.to_str().ok().and_then(|h| h.strip_prefix("Bearer ")).map(str::trim) {
            let d = digest(token);
            assert!(d.len() == 64 && d.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')));
        }
    }

    let Ok(s) = std::str::from_utf8(data) else { return };
    let d = digest(s);
    assert_eq!(d, digest(s));
    assert!(d.len() == 64 && d.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')));

    // Ids as path segments (the handlers trim them first) and in JSON bodies.
    for s in [s, s.trim()] {
        id::<SessionId>(s, "ses_");
        id::<SandboxId>(s, "sbx_");
        id::<DeviceId>(s, "dev_");
        id::<WorkspaceId>(s, "wsp_");
        id::<MemberId>(s, "mbr_");
        id::<EventId>(s, "evt_");
        id::<TokenId>(s, "tok_");
        id::<TaskId>(s, "tsk_");
        id::<AgentId>(s, "agt_");
        id::<RepoId>(s, "rep_");
        id::<NoteId>(s, "not_");
        id::<WebhookId>(s, "whk_");
        id::<MessageId>(s, "msg_");
        id::<InviteId>(s, "inv_");
    }
    json_id::<SessionId>(data);
    json_id::<TaskId>(data);
    json_id::<WebhookId>(data);

    // List cursors are `created_at|id`; sign-in expiry is a stored time.
    if let Some((at, rest)) = s.split_once('|') {
        id::<SandboxId>(rest, "sbx_");
        id::<SessionId>(rest, "ses_");
        let _ = drover_store::parse_time(at);
    }
    if let Some(t) = drover_store::parse_time(s) {
        let shown = drover_store::format_time(t);
        assert!(drover_store::parse_time(&shown).is_some(), "{s:?} -> {shown:?} does not parse back");
    }
});

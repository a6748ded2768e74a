//! End-to-end: the permission matrix. Every API route and WebSocket the server's router
//! declares (crates/server/src/api/mod.rs) is called by every kind of caller against a
//! real `drover up`, and each answer is checked against [`MATRIX`], written out from
//! DESIGN.md's "Permissions" table and the workspace rules beside it:
//!
//! - drop in (terminal, type, Send box, scrollback, Stop): owner/admin, or the operator
//!   of the session's agent (for a task-free session: who started it); never an agent;
//! - Finish: admin/owner, or the stage's pinned assignee (its agent's operator);
//! - Mark done, Abandon: admin/owner; invites and role changes: owner only; webhooks,
//!   audit export, metrics, devices, workflow, repos: owner/admin;
//! - an agent's session-scoped token (`drs_…`) only hands off, comments, files and
//!   resolves blockers and asks a human, on its own task (and reads that task and its
//!   notes); everything else is 403;
//! - a revoked personal token and no token are 401; health, sign-in, the OpenAPI
//!   document and the outcome words are open.
//!
//! A route added to the router without a row here fails
//! [`every_route_in_the_router_has_a_matrix_row`].
#![allow(clippy::too_many_lines)] // the matrix tables are long by nature

mod support;

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::time::Instant;

use serde_json::{json, Value};
use support::{secs, wait_until, Drover};

/// The password every member made here signs in with.
const PASSWORD: &str = "correct horse battery";

/// The kinds of caller, in the order of [`Row::expect`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Who {
    /// The owner: the token `drover up` writes to `$DROVER_HOME/client.json`.
    Owner,
    /// A member invited as admin.
    Admin,
    /// A member who registered the agent `bot` (its operator) and started the task-free session.
    Operator,
    /// A member who operates nothing here.
    Other,
    /// The agent's session-scoped token (`DROVER_TOKEN` inside the run of its task).
    Agent,
    /// A personal token that was revoked.
    Revoked,
    /// No credentials at all.
    Nobody,
}

const CALLERS: [Who; 7] = [Who::Owner, Who::Admin, Who::Operator, Who::Other, Who::Agent, Who::Revoked, Who::Nobody];

impl Who {
    fn is_member(self) -> bool {
        matches!(self, Who::Owner | Who::Admin | Who::Operator | Who::Other)
    }
}

/// An expected answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// Allowed: the permission check passed: a 1xx (a WebSocket opened), 2xx or 3xx, or
    /// a 400/404/409/410 that a later check (the object's state) gave.
    A,
    /// Denied: 403.
    D,
    /// Unauthenticated: 401.
    U,
    /// 404: the object is not there for this caller (personal tokens are per member).
    N,
}

impl Expect {
    fn accepts(self, status: u16) -> bool {
        match self {
            A => matches!(status, 101..=399 | 400 | 404 | 409 | 410),
            D => status == 403,
            U => status == 401,
            N => status == 404,
        }
    }
}

use Expect::{A, D, N, U};

/// One call: `method` (`WS` is a WebSocket upgrade, a GET route) on `path`, with
/// `body`, and what each caller of [`CALLERS`] must get. `{name}` in the path or body
/// is filled in per call (see [`World::value`]); names starting `fresh_`, `own_`, or
/// naming a destructive target give each caller its own throwaway object, so one
/// caller's success never changes another's answer.
struct Row {
    method: &'static str,
    path: &'static str,
    body: &'static str,
    expect: [Expect; 7],
}

const fn r(method: &'static str, path: &'static str, body: &'static str, expect: [Expect; 7]) -> Row {
    Row { method, path, body, expect }
}

/// The matrix. Columns: owner, admin, operator, other member, agent, revoked token, no token.
/// Destructive calls come last; the agent's own hand-off (which ends its run and with
/// it its token) is the very last row.
#[rustfmt::skip]
const MATRIX: &[Row] = &[
    // Open to everyone: health, and signing in (credentials are in the body or the link).
    r("GET",    "/api/v1/health",                                  "", [A, A, A, A, A, A, A]),
    // The API's description and its outcome words: the same for everyone, about no workspace.
    r("GET",    "/api/v1/openapi.json",                            "", [A, A, A, A, A, A, A]),
    r("GET",    "/api/v1/outcomes",                                "", [A, A, A, A, A, A, A]),
    r("POST",   "/api/v1/login",                                   r#"{"name":"m-other","password":"{password}"}"#, [A, A, A, A, A, A, A]),
    r("POST",   "/api/v1/login/token",                             r#"{"name":"m-other","password":"{password}","label":"matrix"}"#, [A, A, A, A, A, A, A]),
    r("POST",   "/api/v1/invites/lookup",                          r#"{"code":"{invite_code}"}"#, [A, A, A, A, A, A, A]),
    r("POST",   "/api/v1/invites/accept",                          r#"{"code":"{fresh_invite}","name":"{fresh_name}","password":"{password}"}"#, [A, A, A, A, A, A, A]),
    r("POST",   "/api/v1/login/link",                              r#"{"code":"{fresh_login_code}"}"#, [A, A, A, A, A, A, A]),
    r("GET",    "/login/{fresh_login_code}",                       "", [A, A, A, A, A, A, A]),
    // A device trades its one-time enrollment token (the credential is in the body).
    r("POST",   "/api/v1/devices/enroll",                          r#"{"token":"{enrollment_token}","name":"{enrollment_device}"}"#, [A, A, A, A, A, A, A]),

    // A member's own profile and tokens.
    r("GET",    "/api/v1/me",                                      "", [A, A, A, A, D, U, U]),
    r("POST",   "/api/v1/login-links",                             "", [A, A, A, A, D, U, U]),
    r("POST",   "/api/v1/logout",                                  "", [A, A, A, A, D, U, U]),
    r("PUT",    "/api/v1/me/password",                             r#"{"current":"{password}","password":"{password}"}"#, [A, A, A, A, D, U, U]),
    r("GET",    "/api/v1/tokens",                                  "", [A, A, A, A, D, U, U]),
    // Getting told: each member their own browsers and choices; agents and devices never.
    r("GET",    "/api/v1/me/notifications",                        "", [A, A, A, A, D, U, U]),
    r("PUT",    "/api/v1/me/notifications",                        r#"{"events":["permission","failed"],"quiet":"22:00-07:00","zone":"Europe/Paris","cooldown_secs":300}"#, [A, A, A, A, D, U, U]),
    r("GET",    "/api/v1/push/key",                                "", [A, A, A, A, D, U, U]),
    r("GET",    "/api/v1/push/subscriptions",                      "", [A, A, A, A, D, U, U]),
    r("POST",   "/api/v1/push/subscriptions",                      r#"{"endpoint":"http://192.0.2.1:1/push/matrix","p256dh":"BEtn-YOvM4yotTMTnHLfT6qYaf7457RhBdfNvnOrlXJi4HrI6AGsZa8RYAku0bJP5zXWBvmsGqpv_Ig9WvLNmEU","auth":"AAAAAAAAAAAAAAAAAAAAAA"}"#, [A, A, A, A, D, U, U]),
    r("POST",   "/api/v1/push/test",                               "", [A, A, A, A, D, U, U]),
    r("DELETE", "/api/v1/push/subscriptions",                      r#"{"subscription":"http://192.0.2.1:1/push/nobody"}"#, [A, A, A, A, D, U, U]),
    r("POST",   "/api/v1/tokens",                                  r#"{"label":"matrix"}"#, [A, A, A, A, D, U, U]),
    r("POST",   "/api/v1/tokens/{own_token}/revoke",               "", [A, A, A, A, D, U, U]),
    r("POST",   "/api/v1/tokens/{operator_token}/revoke",          "", [A, N, A, N, D, U, U]),

    // Members and invitations: reading is for members, inviting and roles for owners.
    r("GET",    "/api/v1/members",                                 "", [A, A, A, A, D, U, U]),
    r("POST",   "/api/v1/invites",                                 r#"{"role":"member"}"#, [A, D, D, D, D, U, U]),
    r("GET",    "/api/v1/invites",                                 "", [A, D, D, D, D, U, U]),
    r("POST",   "/api/v1/invites/{fresh_invite_id}/revoke",        "", [A, D, D, D, D, U, U]),
    r("PUT",    "/api/v1/members/{spare_member}/role",             r#"{"role":"member"}"#, [A, D, D, D, D, U, U]),
    r("GET",    "/api/v1/members/{spare_member}/tokens",           "", [A, D, D, D, D, U, U]),
    r("DELETE", "/api/v1/members/{removable_member}",              "", [A, D, D, D, D, U, U]),

    // Reading the workspace: every member; never an agent.
    r("GET",    "/api/v1/overview",                                "", [A, A, A, A, D, U, U]),
    r("GET",    "/api/v1/sandboxes",                               "", [A, A, A, A, D, U, U]),
    r("GET",    "/api/v1/stream",                                  "", [A, A, A, A, D, U, U]),
    r("GET",    "/api/v1/events",                                  "", [A, A, A, A, D, U, U]),
    r("GET",    "/api/v1/devices",                                 "", [A, A, A, A, D, U, U]),
    r("GET",    "/api/v1/devices/{device}/sessions",               "", [A, A, A, A, D, U, U]),
    r("GET",    "/api/v1/repos",                                   "", [A, A, A, A, D, U, U]),
    r("GET",    "/api/v1/repos/{repo}",                            "", [A, A, A, A, D, U, U]),
    r("GET",    "/api/v1/workflow",                                "", [A, A, A, A, D, U, U]),
    r("GET",    "/api/v1/agents",                                  "", [A, A, A, A, D, U, U]),
    r("GET",    "/api/v1/agents/{agent}",                          "", [A, A, A, A, D, U, U]),
    r("GET",    "/api/v1/tasks",                                   "", [A, A, A, A, D, U, U]),
    r("GET",    "/api/v1/sessions",                                "", [A, A, A, A, D, U, U]),
    r("GET",    "/api/v1/sessions/{session}",                      "", [A, A, A, A, D, U, U]),
    r("GET",    "/api/v1/sessions/{agent_session}",                "", [A, A, A, A, D, U, U]),
    r("GET",    "/api/v1/sessions/{session}/events",               "", [A, A, A, A, D, U, U]),
    r("GET",    "/api/v1/sessions/{agent_session}/events",         "", [A, A, A, A, D, U, U]),

    // Dropping in to the operator's task-free session: owner, admin, who started it.
    r("GET",    "/api/v1/sessions/{session}/text",                 "", [A, A, A, D, D, U, U]),
    r("GET",    "/api/v1/sessions/{session}/output",               "", [A, A, A, D, D, U, U]),
    r("GET",    "/api/v1/sessions/{session}/export",               "", [A, A, A, D, D, U, U]),
    r("GET",    "/api/v1/sessions/{session}/recording",            "", [A, A, A, D, D, U, U]),
    r("GET",    "/api/v1/sessions/{session}/screen",               "", [A, A, A, D, D, U, U]),
    r("POST",   "/api/v1/sessions/{session}/input",                r#"{"text":"hello"}"#, [A, A, A, D, D, U, U]),
    r("POST",   "/api/v1/sessions/{session}/ask",                  r#"{"text":"hello","timeout_secs":2,"still_ms":150}"#, [A, A, A, D, D, U, U]),
    r("WS",     "/api/v1/sessions/{session}/terminal",             "", [A, A, A, D, D, U, U]),
    // … and to the agent's run: owner, admin, the agent's operator; not the agent itself.
    r("GET",    "/api/v1/sessions/{agent_session}/text",           "", [A, A, A, D, D, U, U]),
    r("GET",    "/api/v1/sessions/{agent_session}/output",         "", [A, A, A, D, D, U, U]),
    r("GET",    "/api/v1/sessions/{agent_session}/export",         "", [A, A, A, D, D, U, U]),
    r("GET",    "/api/v1/sessions/{agent_session}/recording",      "", [A, A, A, D, D, U, U]),
    r("GET",    "/api/v1/sessions/{agent_session}/screen",         "", [A, A, A, D, D, U, U]),
    r("POST",   "/api/v1/sessions/{agent_session}/input",          r#"{"text":"hello"}"#, [A, A, A, D, D, U, U]),
    r("POST",   "/api/v1/sessions/{agent_session}/ask",            r#"{"text":"hello","timeout_secs":2,"still_ms":150}"#, [A, A, A, D, D, U, U]),
    r("WS",     "/api/v1/sessions/{agent_session}/terminal",       "", [A, A, A, D, D, U, U]),

    // The device link takes device credentials only.
    r("WS",     "/api/v1/device/connect",                          "", [D, D, D, D, D, U, U]),

    // Starting things: every member; never an agent.
    r("POST",   "/api/v1/sessions",                                r#"{"device":"{device}","command":["sleep","600"]}"#, [A, A, A, A, D, U, U]),
    r("POST",   "/api/v1/agents",                                  r#"{"name":"{fresh_name}","harness":"custom","template":["true"]}"#, [A, A, A, A, D, U, U]),
    r("POST",   "/api/v1/tasks",                                   r#"{"title":"filed","repo":"app","workflow":[{"stage":"code"}]}"#, [A, A, A, A, D, U, U]),
    r("POST",   "/api/v1/tasks/{other_task}/launch",               "", [A, A, A, A, D, U, U]),
    r("POST",   "/api/v1/tasks/{other_task}/activate",             "", [A, A, A, A, D, U, U]),

    // Tasks and notes: members, and the agent on its own task only.
    r("GET",    "/api/v1/tasks/{agent_task}",                      "", [A, A, A, A, A, U, U]),
    r("GET",    "/api/v1/tasks/{other_task}",                      "", [A, A, A, A, D, U, U]),
    r("POST",   "/api/v1/tasks/{agent_task}/comments",             r#"{"text":"a comment"}"#, [A, A, A, A, A, U, U]),
    r("POST",   "/api/v1/tasks/{other_task}/comments",             r#"{"text":"a comment"}"#, [A, A, A, A, D, U, U]),
    r("POST",   "/api/v1/tasks/{agent_task}/blockers",             r#"{"text":"stuck"}"#, [A, A, A, A, A, U, U]),
    r("POST",   "/api/v1/tasks/{other_task}/blockers",             r#"{"text":"stuck"}"#, [A, A, A, A, D, U, U]),
    r("POST",   "/api/v1/tasks/{agent_task}/questions",            r#"{"text":"which colour?"}"#, [A, A, A, A, A, U, U]),
    r("POST",   "/api/v1/tasks/{other_task}/questions",            r#"{"text":"which colour?"}"#, [A, A, A, A, D, U, U]),
    r("GET",    "/api/v1/notes/{agent_note}",                      "", [A, A, A, A, A, U, U]),
    r("GET",    "/api/v1/notes/{other_note}",                      "", [A, A, A, A, D, U, U]),
    r("POST",   "/api/v1/notes/{fresh_question}/answer",           r#"{"text":"blue"}"#, [A, A, A, A, D, U, U]),
    r("POST",   "/api/v1/notes/{own_blocker}/resolve",             "", [A, A, A, A, A, U, U]),
    r("POST",   "/api/v1/notes/{foreign_blocker}/resolve",         "", [A, A, A, A, D, U, U]),

    // What waits on a person: members read it (what a held call would run only where
    // they may drop in); only those who may drop in decide; only the run's own hook
    // reports and waits for the decision.
    r("GET",    "/api/v1/inbox",                                   "", [A, A, A, A, D, U, U]),
    r("GET",    "/api/v1/attention/{agent_held}",                  "", [A, A, A, A, D, U, U]),
    r("POST",   "/api/v1/attention/{fresh_held}/decide",           r#"{"decision":"deny","message":"no"}"#, [A, A, A, D, D, U, U]),
    r("GET",    "/api/v1/attention/{agent_held}/decision",         "", [D, D, D, D, A, U, U]),
    r("POST",   "/api/v1/hooks/claude",                            r#"{"hook_event_name":"PreCompact"}"#, [D, D, D, D, A, U, U]),
    r("POST",   "/api/v1/hooks/codex",                             r#"{"type":"something-else"}"#, [D, D, D, D, A, U, U]),

    // Administering the workspace: owners and admins.
    r("GET",    "/api/v1/audit/export?since=2000-01-01",           "", [A, A, D, D, D, U, U]),
    // Prometheus metrics: an owner's or admin's personal token.
    r("GET",    "/metrics",                                        "", [A, A, D, D, D, U, U]),
    r("POST",   "/api/v1/devices",                                 r#"{"name":"spare-device","slots":1}"#, [A, A, D, D, D, U, U]),
    r("POST",   "/api/v1/repos",                                   r#"{"name":"extra","device":"{device}","path":"{repo_path}"}"#, [A, A, D, D, D, U, U]),
    r("PUT",    "/api/v1/workflow",                                r#"{"stages":[{"stage":"plan"},{"stage":"code"},{"stage":"review"},{"stage":"merge"},{"stage":"verify"}]}"#, [A, A, D, D, D, U, U]),
    r("GET",    "/api/v1/spend",                                   "", [A, A, A, A, D, U, U]),
    r("GET",    "/api/v1/prices",                                  "", [A, A, A, A, D, U, U]),
    r("GET",    "/api/v1/skills",                                  "", [A, A, A, A, D, U, U]),
    r("PUT",    "/api/v1/skills/{fresh_name}",                     r#"{"files":[{"path":"SKILL.md","content":"be kind"}]}"#, [A, A, D, D, D, U, U]),
    r("DELETE", "/api/v1/skills/{fresh_skill}",                    "", [A, A, D, D, D, U, U]),
    r("PUT",    "/api/v1/prices",                                  r#"{"overrides":[]}"#, [A, A, D, D, D, U, U]),
    r("PUT",    "/api/v1/spend/cap",                               r#"{"usd":null}"#, [A, A, D, D, D, U, U]),
    r("PUT",    "/api/v1/tasks/{other_task}/spend-cap",            r#"{"usd":null}"#, [A, A, D, D, D, U, U]),
    r("GET",    "/api/v1/webhooks",                                "", [A, A, D, D, D, U, U]),
    r("POST",   "/api/v1/webhooks",                                r#"{"url":"http://192.0.2.1:1/hook","events":["task.finished"]}"#, [A, A, D, D, D, U, U]),
    r("POST",   "/api/v1/webhooks/{webhook}/rotate",               "", [A, A, D, D, D, U, U]),
    r("POST",   "/api/v1/webhooks/{webhook}/enable",               "", [A, A, D, D, D, U, U]),
    r("GET",    "/api/v1/webhooks/{webhook}/deliveries",           "", [A, A, D, D, D, U, U]),
    r("POST",   "/api/v1/webhooks/{webhook}/deliveries/{delivery}/redeliver", "", [A, A, D, D, D, U, U]),

    // Destructive, each caller on its own throwaway object.
    r("DELETE", "/api/v1/webhooks/{fresh_webhook}",                "", [A, A, D, D, D, U, U]),
    r("POST",   "/api/v1/devices/{fresh_device}/revoke",           "", [A, A, D, D, D, U, U]),
    r("POST",   "/api/v1/tasks/{fresh_task}/cancel",               "", [A, A, A, D, D, U, U]),
    r("PATCH",  "/api/v1/tasks/{fresh_task}",                      r#"{"base":"main"}"#, [A, A, A, D, D, U, U]),
    r("POST",   "/api/v1/tasks/{fresh_task}/abandon",              "", [A, A, D, D, D, U, U]),
    r("POST",   "/api/v1/tasks/{finish_task}/finish",              "", [A, A, A, D, D, U, U]),
    r("POST",   "/api/v1/tasks/{completing_task}/mark-done",       "", [A, A, D, D, D, U, U]),
    r("POST",   "/api/v1/sessions/{fresh_session}/stop",           "", [A, A, A, D, D, U, U]),
    r("POST",   "/api/v1/sessions/{run_to_stop}/stop",             "", [A, A, A, D, D, U, U]),
    r("POST",   "/api/v1/tasks/{handoff_foreign}/advance",         r#"{"text":"handed off"}"#, [A, A, A, A, D, U, U]),
    // Last: the agent hands off its own task, which ends its run and its token.
    r("POST",   "/api/v1/tasks/{handoff_own}/advance",             r#"{"text":"handed off"}"#, [A, A, A, A, A, U, U]),
];

// ---------------------------------------------------------------------------------------
// HTTP and WebSocket clients.

/// How a request authenticates.
#[derive(Debug, Clone)]
enum Auth {
    None,
    Bearer(String),
    /// The browser's session cookie, with an `Origin` header if given.
    Cookie {
        cookie: String,
        origin: Option<String>,
    },
}

/// An answer.
#[derive(Debug)]
struct Resp {
    status: u16,
    head: String,
    body: String,
}

impl Resp {
    fn header(&self, name: &str) -> Option<&str> {
        self.head
            .lines()
            .skip(1)
            .filter_map(|l| l.split_once(':'))
            .find(|(k, _)| k.trim().eq_ignore_ascii_case(name))
            .map(|(_, v)| v.trim())
    }

    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Undoes `Transfer-Encoding: chunked`.
fn dechunk(mut raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(eol) = find(raw, b"\r\n") {
        let size = std::str::from_utf8(&raw[..eol]).ok().and_then(|s| usize::from_str_radix(s.split(';').next()?.trim(), 16).ok());
        let Some(size) = size.filter(|s| *s > 0) else { break };
        let start = eol + 2;
        let end = (start + size).min(raw.len());
        out.extend_from_slice(&raw[start..end]);
        raw = raw.get(end + 2..).unwrap_or_default();
    }
    out
}

/// One HTTP/1.1 request over a fresh connection. A server-sent event stream is
/// answered with its head only (it never ends).
fn http(url: &str, method: &str, path: &str, auth: &Auth, body: &str) -> Resp {
    let host = url.trim_start_matches("http://");
    let mut s = TcpStream::connect(host).expect("connect to the server");
    s.set_read_timeout(Some(secs(60))).unwrap();
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\nContent-Length: {}\r\n", body.len());
    if !body.is_empty() {
        head.push_str("Content-Type: application/json\r\n");
    }
    match auth {
        Auth::None => {}
        Auth::Bearer(t) => head.push_str(&format!("Authorization: Bearer {t}\r\n")),
        Auth::Cookie { cookie, origin } => {
            head.push_str(&format!("Cookie: drover_session={cookie}\r\n"));
            if let Some(o) = origin {
                head.push_str(&format!("Origin: {o}\r\n"));
            }
        }
    }
    head.push_str("\r\n");
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body.as_bytes()).unwrap();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let split = loop {
        if let Some(p) = find(&buf, b"\r\n\r\n") {
            break p;
        }
        let n = s.read(&mut chunk).unwrap_or_else(|e| panic!("{method} {path}: reading the answer: {e}"));
        assert!(n > 0, "{method} {path}: the connection closed before an answer");
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..split]).into_owned();
    let status = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let mut rest = buf[split + 4..].to_vec();
    let mut resp = Resp { status, head, body: String::new() };
    if resp.header("content-type").is_some_and(|c| c.contains("text/event-stream")) {
        return resp;
    }
    let _ = s.read_to_end(&mut rest);
    if resp.header("transfer-encoding").is_some_and(|t| t.eq_ignore_ascii_case("chunked")) {
        rest = dechunk(&rest);
    }
    resp.body = String::from_utf8_lossy(&rest).into_owned();
    resp
}

/// A WebSocket upgrade of `path`: the handshake's HTTP status (101 when it opened; the
/// socket is closed at once) and the refusal's body.
fn ws(rt: &tokio::runtime::Runtime, url: &str, path: &str, auth: &Auth) -> (u16, String) {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    use tokio_tungstenite::tungstenite::Error;
    let target = format!("ws://{}{path}", url.trim_start_matches("http://"));
    rt.block_on(async {
        let mut req = target.as_str().into_client_request().expect("a WebSocket request");
        let h = req.headers_mut();
        match auth {
            Auth::None => {}
            Auth::Bearer(t) => {
                h.insert("authorization", format!("Bearer {t}").parse().unwrap());
            }
            Auth::Cookie { cookie, origin } => {
                h.insert("cookie", format!("drover_session={cookie}").parse().unwrap());
                if let Some(o) = origin {
                    h.insert("origin", o.parse().unwrap());
                }
            }
        }
        match tokio::time::timeout(secs(20), tokio_tungstenite::connect_async(req)).await {
            Err(_) => panic!("WebSocket {target}: no handshake answer within 20 s"),
            Ok(Ok((mut socket, resp))) => {
                let _ = socket.close(None).await;
                (resp.status().as_u16(), String::new())
            }
            Ok(Err(Error::Http(resp))) => {
                let body = resp.body().as_deref().map(|b| String::from_utf8_lossy(b).into_owned()).unwrap_or_default();
                (resp.status().as_u16(), body)
            }
            Ok(Err(e)) => panic!("WebSocket {target}: {e}"),
        }
    })
}

// ---------------------------------------------------------------------------------------
// The world the matrix is walked in.

struct World {
    d: Drover,
    url: String,
    /// Bearer tokens by caller (none for [`Who::Nobody`]).
    tokens: HashMap<&'static str, String>,
    /// Fixed placeholder values.
    fixed: HashMap<&'static str, String>,
    /// Agent runs started ahead for destructive rows: (task, session).
    runs: RefCell<Vec<(String, String)>>,
    /// A shared agent run nobody allowed ever touches: (task, session).
    shared_run: (String, String),
    tmp: tempfile::TempDir,
    n: Cell<u32>,
    rt: tokio::runtime::Runtime,
}

fn key(who: Who) -> &'static str {
    match who {
        Who::Owner => "owner",
        Who::Admin => "admin",
        Who::Operator => "operator",
        Who::Other => "other",
        Who::Agent => "agent",
        Who::Revoked => "revoked",
        Who::Nobody => "none",
    }
}

/// A call that must succeed; its JSON answer (Null for an empty body).
fn must(url: &str, auth: &Auth, method: &str, path: &str, body: &Value) -> Value {
    let body = if body.is_null() { String::new() } else { body.to_string() };
    let resp = http(url, method, path, auth, &body);
    assert!((200..300).contains(&resp.status), "setup: {method} {path} {body}: {} {}", resp.status, resp.body);
    if resp.body.trim().is_empty() {
        Value::Null
    } else {
        resp.json()
    }
}

fn text(v: &Value) -> String {
    v.as_str().unwrap_or_else(|| panic!("expected a string, got {v}")).to_string()
}

impl World {
    fn auth(&self, who: Who) -> Auth {
        self.tokens.get(key(who)).map(|t| Auth::Bearer(t.clone())).unwrap_or(Auth::None)
    }

    fn must(&self, who: Who, method: &str, path: &str, body: Value) -> Value {
        must(&self.url, &self.auth(who), method, path, &body)
    }

    fn next(&self) -> u32 {
        self.n.set(self.n.get() + 1);
        self.n.get()
    }

    /// A task worked by a person (no run), filed by the operator.
    fn human_task(&self) -> String {
        let body = json!({"title": format!("human {}", self.next()), "repo": "app", "workflow": [{"stage": "code"}, {"stage": "review"}]});
        text(&self.must(Who::Operator, "POST", "/api/v1/tasks", body)["id"])
    }

    /// Files a task pinned to the agent `bot` (a run starts); returns its id.
    fn file_agent_task(&self, title: &str) -> String {
        let body = json!({"title": title, "repo": "app", "workflow": [{"stage": "code", "assignee": "bot"}]});
        text(&self.must(Who::Operator, "POST", "/api/v1/tasks", body)["id"])
    }

    /// Waits until `task`'s run is running in an active sandbox; returns the session.
    fn wait_run(&self, task: &str) -> String {
        wait_until(&format!("a running run of {task}"), secs(40), || {
            let t = self.must(Who::Owner, "GET", &format!("/api/v1/tasks/{task}"), Value::Null);
            let live = t["task"]["live_session"].as_str()?.to_string();
            let running = t["sessions"].as_array()?.iter().any(|s| s["id"] == live.as_str() && s["outcome"] == "running");
            (running && t["task"]["sandbox_state"] == "active").then_some(live)
        })
    }

    /// A fresh agent run (started ahead if there is one left): (task, session).
    fn agent_run(&self) -> (String, String) {
        let next = self.runs.borrow_mut().pop();
        next.unwrap_or_else(|| {
            let task = self.file_agent_task(&format!("run {}", self.next()));
            let session = self.wait_run(&task);
            (task, session)
        })
    }

    /// A task-free session started by the operator.
    fn task_free_session(&self) -> String {
        let body = json!({"device": self.d.device, "command": ["sleep", "600"]});
        let id = text(&self.must(Who::Operator, "POST", "/api/v1/sessions", body)["id"]);
        wait_until("the session to run", secs(20), || {
            let s = self.must(Who::Owner, "GET", &format!("/api/v1/sessions/{id}"), Value::Null);
            (s["outcome"] == "running").then_some(())
        });
        id
    }

    /// A tool call the agent's run holds for a decision (as its Claude Code hook reports one).
    fn held_call(&self) -> String {
        let event = json!({
            "hook_event_name": "PermissionRequest",
            "tool_name": "Bash",
            "tool_input": {"command": format!("make deploy-{}", self.next())},
        });
        let id = &self.must(Who::Agent, "POST", "/api/v1/hooks/claude", event)["attention"];
        assert!(id.is_string(), "no held call raised: {id}");
        text(id)
    }

    /// A note of `kind` (`blockers`, `questions`) on `task`, filed by `who`.
    fn note(&self, who: Who, task: &str, kind: &str) -> String {
        let body = json!({"text": format!("note {}", self.next())});
        text(&self.must(who, "POST", &format!("/api/v1/tasks/{task}/{kind}"), body)["id"])
    }

    /// The value of placeholder `name` for a call by `who` in row `row`.
    fn value(&self, name: &str, who: Who, row: usize) -> String {
        let fixed = |k: &str| self.fixed.get(k).unwrap_or_else(|| panic!("no placeholder {{{k}}}")).clone();
        let (agent_task, other_task) = (fixed("agent_task"), fixed("other_task"));
        match name {
            "fresh_name" => format!("n{row}-{}", key(who)),
            "fresh_invite" => text(&self.must(Who::Owner, "POST", "/api/v1/invites", json!({"role": "member"}))["code"]),
            "fresh_skill" => {
                let name = format!("skill-{}", self.next());
                self.must(Who::Owner, "PUT", &format!("/api/v1/skills/{name}"), json!({"files": [{"path": "SKILL.md", "content": "x"}]}));
                name
            }
            "fresh_invite_id" => text(&self.must(Who::Owner, "POST", "/api/v1/invites", json!({"role": "member"}))["id"]),
            "fresh_login_code" => {
                let link = self.must(Who::Owner, "POST", "/api/v1/login-links", Value::Null);
                text(&link["path"]).trim_start_matches("/login#").to_string()
            }
            "fresh_webhook" => {
                let body = json!({"url": "http://192.0.2.1:1/gone", "events": ["task.finished"]});
                text(&self.must(Who::Owner, "POST", "/api/v1/webhooks", body)["webhook"]["id"])
            }
            "fresh_device" => {
                let name = format!("gone-{}", self.next());
                self.must(Who::Owner, "POST", "/api/v1/devices", json!({"name": name, "slots": 1}));
                name
            }
            // A device registered by the owner, and its one-time enrollment token.
            "enrollment_device" => format!("enrolled-{row}-{}", key(who)),
            "enrollment_token" => {
                let body = json!({"name": format!("enrolled-{row}-{}", key(who)), "slots": 1});
                text(&self.must(Who::Owner, "POST", "/api/v1/devices", body)["enrollment_token"])
            }
            // A member who joined for this call (the owner may remove them).
            "removable_member" => {
                let name = format!("leaver-{}", self.next());
                join(&self.url, &self.auth(Who::Owner), "member", &name);
                name
            }
            "fresh_task" => self.human_task(),
            "fresh_held" => self.held_call(),
            "fresh_session" => self.task_free_session(),
            // A token of the caller's own (for callers that have none, one of the owner's).
            "own_token" => {
                let by = if who.is_member() { who } else { Who::Owner };
                text(&self.must(by, "POST", "/api/v1/tokens", json!({"label": "throwaway"}))["info"]["id"])
            }
            // A question to answer: the agent's on its own task; a person's elsewhere.
            "fresh_question" if who == Who::Agent => self.note(Who::Agent, &agent_task, "questions"),
            "fresh_question" => self.note(Who::Owner, &other_task, "questions"),
            // A blocker the agent filed on its own task; for people, one on another task.
            "own_blocker" if who == Who::Agent => self.note(Who::Agent, &agent_task, "blockers"),
            "own_blocker" | "foreign_blocker" => self.note(Who::Owner, &other_task, "blockers"),
            "handoff_own" if who == Who::Agent => agent_task,
            "handoff_foreign" if who == Who::Agent => other_task,
            "handoff_own" | "handoff_foreign" => self.human_task(),
            // Finish: a fresh live run for those allowed; the agent tries its own task.
            "finish_task" => match who {
                Who::Owner | Who::Admin | Who::Operator => self.agent_run().0,
                Who::Agent => agent_task,
                _ => self.shared_run.0.clone(),
            },
            // Mark done: a fresh run finished (completing) by the owner, for those allowed.
            "completing_task" => match who {
                Who::Owner | Who::Admin => {
                    let task = self.agent_run().0;
                    let t = self.must(Who::Owner, "POST", &format!("/api/v1/tasks/{task}/finish"), Value::Null);
                    assert_eq!(t["sandbox_state"], "completing", "{t}");
                    task
                }
                Who::Agent => agent_task,
                _ => self.shared_run.0.clone(),
            },
            // Stop an agent's run: a fresh one for those allowed; the agent tries its own.
            "run_to_stop" => match who {
                Who::Owner | Who::Admin | Who::Operator => self.agent_run().1,
                Who::Agent => fixed("agent_session"),
                _ => self.shared_run.1.clone(),
            },
            other => fixed(other),
        }
    }

    /// `template` with every `{name}` filled in for one call (the same name gets the
    /// same value within the call).
    fn fill(&self, template: &str, who: Who, row: usize, cache: &mut HashMap<String, String>) -> String {
        let mut out = String::new();
        let mut rest = template;
        while let Some(i) = rest.find('{') {
            out.push_str(&rest[..i]);
            let after = &rest[i + 1..];
            let len = after.find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')).unwrap_or(after.len());
            if len > 0 && after[len..].starts_with('}') {
                let name = &after[..len];
                if !cache.contains_key(name) {
                    let v = self.value(name, who, row);
                    cache.insert(name.to_string(), v);
                }
                out.push_str(&cache[name]);
                rest = &after[len + 1..];
            } else {
                out.push('{');
                rest = after;
            }
        }
        out.push_str(rest);
        out
    }
}

/// Joins the workspace as `name` with `role` through an invitation; returns a personal token.
fn join(url: &str, owner: &Auth, role: &str, name: &str) -> String {
    let code = text(&must(url, owner, "POST", "/api/v1/invites", &json!({"role": role}))["code"]);
    must(url, &Auth::None, "POST", "/api/v1/invites/accept", &json!({"code": code, "name": name, "password": PASSWORD}));
    let issued = must(url, &Auth::None, "POST", "/api/v1/login/token", &json!({"name": name, "password": PASSWORD, "label": "matrix"}));
    text(&issued["token"])
}

/// Agent runs started ahead for the destructive rows (finish ×3, mark-done ×2, stop ×3).
const RUNS_AHEAD: usize = 8;

fn setup() -> World {
    let d = Drover::up();
    let url = d.url.clone();
    let owner = Auth::Bearer(d.token());
    let mut tokens = HashMap::new();
    tokens.insert("owner", d.token());
    tokens.insert("admin", join(&url, &owner, "admin", "m-admin"));
    tokens.insert("operator", join(&url, &owner, "member", "m-oper"));
    tokens.insert("other", join(&url, &owner, "member", "m-other"));
    join(&url, &owner, "member", "m-spare");
    // A personal token of the other member, revoked.
    let issued =
        must(&url, &Auth::None, "POST", "/api/v1/login/token", &json!({"name": "m-other", "password": PASSWORD, "label": "revoked"}));
    let (revoked, revoked_id) = (text(&issued["token"]), text(&issued["info"]["id"]));
    must(&url, &Auth::Bearer(revoked.clone()), "POST", &format!("/api/v1/tokens/{revoked_id}/revoke"), &Value::Null);
    assert_eq!(http(&url, "GET", "/api/v1/me", &Auth::Bearer(revoked.clone()), "").status, 401, "a revoked token still works");
    tokens.insert("revoked", revoked);

    // A repository, and the agent `bot`, registered by the operator. Its stand-in CLI
    // writes its session credential where the test can read it, then waits.
    let tmp = tempfile::tempdir().unwrap();
    let repo = support::git_repo(tmp.path());
    let script = tmp.path().join("agent.sh");
    support::executable(
        &script,
        &format!("#!/bin/sh\necho \"$DROVER_TOKEN\" > '{}/token-'\"$DROVER_TASK\"\nexec sleep 600\n", tmp.path().display()),
    );
    let repo_path = repo.to_str().unwrap().to_string();
    must(&url, &owner, "POST", "/api/v1/repos", &json!({"name": "app", "device": d.device, "path": repo_path}));
    let operator = Auth::Bearer(tokens["operator"].clone());
    let agent = json!({"name": "bot", "harness": "custom", "template": [script.to_str().unwrap(), "{prompt}"]});
    must(&url, &operator, "POST", "/api/v1/agents", &agent);
    // A webhook on session starts, so it has a delivery to redeliver.
    let hook = json!({"url": "http://192.0.2.1:1/hook", "events": ["session.started"]});
    let webhook = text(&must(&url, &owner, "POST", "/api/v1/webhooks", &hook)["webhook"]["id"]);

    let mut w = World {
        d,
        url: url.clone(),
        tokens,
        fixed: HashMap::new(),
        runs: RefCell::new(Vec::new()),
        shared_run: Default::default(),
        tmp,
        n: Cell::new(0),
        rt: tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap(),
    };
    // The agent's own task (T1), a shared run nobody allowed touches, and runs for the
    // destructive rows, all started at once.
    let agent_task = w.file_agent_task("the agent's own task");
    let shared = w.file_agent_task("shared");
    let ahead: Vec<String> = (0..RUNS_AHEAD).map(|i| w.file_agent_task(&format!("ahead {i}"))).collect();
    let session = w.task_free_session();
    let other_task = w.human_task();
    let agent_session = w.wait_run(&agent_task);
    w.shared_run = (shared.clone(), w.wait_run(&shared));
    let runs = ahead.iter().map(|t| (t.clone(), w.wait_run(t))).collect();
    *w.runs.borrow_mut() = runs;
    let token_file: PathBuf = w.tmp.path().join(format!("token-{agent_task}"));
    let agent_token = wait_until("the agent's credential", secs(20), || {
        std::fs::read_to_string(&token_file).ok().map(|t| t.trim().to_string()).filter(|t| !t.is_empty())
    });
    assert!(agent_token.starts_with("drs_"), "{agent_token}");
    w.tokens.insert("agent", agent_token);

    let agent_note = w.note(Who::Agent, &agent_task, "questions");
    let agent_held = w.held_call();
    let other_note = w.note(Who::Owner, &other_task, "questions");
    let invite_code = text(&w.must(Who::Owner, "POST", "/api/v1/invites", json!({"role": "member"}))["code"]);
    let operator_token = text(&w.must(Who::Operator, "POST", "/api/v1/tokens", json!({"label": "spare"}))["info"]["id"]);
    let delivery = wait_until("a webhook delivery", secs(20), || {
        let log = w.must(Who::Owner, "GET", &format!("/api/v1/webhooks/{webhook}/deliveries"), Value::Null);
        log.as_array()?.first().map(|d| text(&d["id"]))
    });
    let device = w.d.device.clone();
    for (k, v) in [
        ("device", device),
        ("repo_path", repo_path),
        ("password", PASSWORD.to_string()),
        ("session", session),
        ("agent_session", agent_session),
        ("agent_task", agent_task),
        ("other_task", other_task),
        ("agent_note", agent_note),
        ("agent_held", agent_held),
        ("other_note", other_note),
        ("invite_code", invite_code),
        ("webhook", webhook),
        ("delivery", delivery),
        ("spare_member", "m-spare".to_string()),
        ("agent", "bot".to_string()),
        ("repo", "app".to_string()),
        ("operator_token", operator_token),
    ] {
        w.fixed.insert(k, v);
    }
    w
}

#[test]
fn every_route_is_answered_as_the_permission_matrix_says() {
    let t0 = Instant::now();
    let w = setup();
    let setup_took = t0.elapsed();
    let mut failures = Vec::new();
    let mut table = String::new();
    let mut notes = Vec::new();
    for (i, row) in MATRIX.iter().enumerate() {
        let mut got = Vec::new();
        for (c, who) in CALLERS.iter().enumerate() {
            let mut cache = HashMap::new();
            let path = w.fill(row.path, *who, i, &mut cache);
            let body = w.fill(row.body, *who, i, &mut cache);
            let (status, answer) = if row.method == "WS" {
                ws(&w.rt, &w.url, &path, &w.auth(*who))
            } else {
                let r = http(&w.url, row.method, &path, &w.auth(*who), &body);
                (r.status, r.body)
            };
            let expect = row.expect[c];
            got.push(format!("{}={status}", key(*who)));
            let answer: String = answer.chars().take(200).collect();
            if !expect.accepts(status) {
                failures.push(format!("{} {} as {}: got {status}, expected {expect:?} — {answer}", row.method, row.path, key(*who)));
            } else if expect == A && !(101..400).contains(&status) {
                notes.push(format!("{} {} as {}: {status} (the permission check passed) — {answer}", row.method, row.path, key(*who)));
            }
        }
        table.push_str(&format!("{:<6} {:<58} {}\n", row.method, row.path, got.join(" ")));
    }
    let walk_took = t0.elapsed() - setup_took;

    // A device credential opens the device link and nothing else: every route that
    // needs credentials answers it 403 (DESIGN.md, "Trust model").
    let device_file: Value = serde_json::from_str(&std::fs::read_to_string(w.d.home.path().join("device.json")).unwrap()).unwrap();
    let device = Auth::Bearer(text(&device_file["token"]));
    for (i, row) in MATRIX.iter().enumerate() {
        if row.expect[CALLERS.len() - 1] != U {
            continue;
        }
        let mut cache = HashMap::new();
        // The agent's run has handed off by now (the matrix's last row), so it can hold no
        // fresh call: the device is refused before any held call would be looked at.
        let path = w.fill(&row.path.replace("{fresh_held}", "{agent_held}"), Who::Owner, i, &mut cache);
        let body = w.fill(row.body, Who::Owner, i, &mut cache);
        let status =
            if row.method == "WS" { ws(&w.rt, &w.url, &path, &device).0 } else { http(&w.url, row.method, &path, &device, &body).status };
        let want = if row.path == "/api/v1/device/connect" { 101 } else { 403 };
        table.push_str(&format!("device: {} {}: {status}\n", row.method, row.path));
        if status != want {
            failures.push(format!("{} {} as a device: got {status}, expected {want}", row.method, row.path));
        }
    }

    // A browser's cookie: a foreign page can neither open a terminal nor act with it.
    let host = w.url.trim_start_matches("http://").to_string();
    let login = http(&w.url, "POST", "/api/v1/login", &Auth::None, &json!({"name": "m-oper", "password": PASSWORD}).to_string());
    assert_eq!(login.status, 200, "{}", login.body);
    let cookie = login
        .header("set-cookie")
        .and_then(|c| c.split(';').next())
        .and_then(|kv| kv.strip_prefix("drover_session="))
        .expect("a session cookie")
        .to_string();
    let with = |origin: Option<&str>| Auth::Cookie { cookie: cookie.clone(), origin: origin.map(str::to_string) };
    let (evil, ours) = ("http://evil.example", format!("http://{host}"));
    let session = &w.fixed["session"];
    let terminal = format!("/api/v1/sessions/{session}/terminal");
    let input = format!("/api/v1/sessions/{session}/input");
    let body = r#"{"text":"from the browser"}"#;
    let cookie_checks: Vec<(&str, u16, u16)> = vec![
        ("WS terminal, cookie, foreign Origin", ws(&w.rt, &w.url, &terminal, &with(Some(evil))).0, 403),
        ("WS terminal, cookie, no Origin", ws(&w.rt, &w.url, &terminal, &with(None)).0, 403),
        ("WS terminal, cookie, own Origin", ws(&w.rt, &w.url, &terminal, &with(Some(&ours))).0, 101),
        ("POST input, cookie, foreign Origin", http(&w.url, "POST", &input, &with(Some(evil)), body).status, 403),
        ("POST input, cookie, own Origin", http(&w.url, "POST", &input, &with(Some(&ours)), body).status, 200),
        ("GET text, cookie", http(&w.url, "GET", &format!("/api/v1/sessions/{session}/text"), &with(None), "").status, 200),
        (
            "POST login, foreign Origin",
            http(&w.url, "POST", "/api/v1/login", &with(Some(evil)), &json!({"name": "m-oper", "password": PASSWORD}).to_string()).status,
            403,
        ),
    ];
    for (what, got, want) in &cookie_checks {
        table.push_str(&format!("cookie: {what}: {got}\n"));
        if got != want {
            failures.push(format!("{what}: got {got}, expected {want}"));
        }
    }

    println!("{table}");
    println!("allowed with a non-2xx answer:\n{}", notes.join("\n"));
    println!("setup {setup_took:?}, walk {walk_took:?}, total {:?}", t0.elapsed());
    assert!(failures.is_empty(), "{} answer(s) disagree with the permission matrix:\n{}", failures.len(), failures.join("\n"));
    assert_every_route_has_a_row();
}

// ---------------------------------------------------------------------------------------
// Every route of the router has a row.

/// A path with its `{…}` segments made alike and its query left off.
fn shape(path: &str) -> String {
    let path = path.split('?').next().unwrap_or_default();
    path.split('/').map(|seg| if seg.starts_with('{') { "{}" } else { seg }).collect::<Vec<_>>().join("/")
}

/// Every (METHOD, path shape) the router declares, read from its source.
fn router_routes() -> Vec<(String, String)> {
    let src = include_str!("../../server/src/api/mod.rs");
    let mut out = Vec::new();
    let mut rest = src;
    while let Some(i) = rest.find(".route(") {
        let after = &rest[i + ".route(".len()..];
        let (mut depth, mut in_str, mut end) = (1, false, after.len());
        for (j, ch) in after.char_indices() {
            match ch {
                '"' => in_str = !in_str,
                '(' if !in_str => depth += 1,
                ')' if !in_str => {
                    depth -= 1;
                    if depth == 0 {
                        end = j;
                        break;
                    }
                }
                _ => {}
            }
        }
        let call = &after[..end];
        let path = call.split('"').nth(1).expect("a route's path");
        let handlers = &call[call.find(',').expect("a route's handlers")..];
        for method in ["get", "post", "put", "delete", "patch"] {
            let needle = format!("{method}(");
            let called = handlers
                .match_indices(&needle)
                .any(|(k, _)| handlers[..k].chars().next_back().is_none_or(|c| !(c.is_ascii_alphanumeric() || c == '_' || c == ':')));
            if called {
                out.push((method.to_uppercase(), shape(path)));
            }
        }
        rest = &after[end..];
    }
    out
}

fn assert_every_route_has_a_row() {
    let routes = router_routes();
    assert!(routes.len() >= 50, "reading the router found only {} routes: {routes:?}", routes.len());
    let rows: Vec<(String, String)> =
        MATRIX.iter().map(|r| (if r.method == "WS" { "GET" } else { r.method }.to_string(), shape(r.path))).collect();
    let missing: Vec<String> = routes.iter().filter(|r| !rows.contains(r)).map(|(m, p)| format!("{m} {p}")).collect();
    assert!(missing.is_empty(), "routes without a row in the permission matrix (add one to MATRIX): {missing:?}");
    let stale: Vec<String> = rows.iter().filter(|r| !routes.contains(r)).map(|(m, p)| format!("{m} {p}")).collect();
    assert!(stale.is_empty(), "matrix rows for routes the router does not have: {stale:?}");
}

#[test]
fn every_route_in_the_router_has_a_matrix_row() {
    assert_every_route_has_a_row();
}

#[test]
fn placeholders_and_chunked_bodies_are_read_right() {
    assert_eq!(shape("/api/v1/tasks/{agent_task}/comments?x=1"), "/api/v1/tasks/{}/comments");
    assert_eq!(dechunk(b"3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"), b"abcde");
}

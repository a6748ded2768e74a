//! Property tests of the HTTP API against malformed input, in-process (the real router
//! over a real SQLite store, no sockets): arbitrary bytes, arbitrary JSON and JSON shaped
//! like the request bodies but with hostile values are sent to every route that takes a
//! body or changes something (POST, PUT, DELETE; with and without credentials, with
//! random path segments), and random `Authorization`, `Cookie`, `Origin` and `Host`
//! headers to GET routes. The server must never answer 5xx, and every 4xx must be the
//! API's JSON error `{"error", "code"}`.
//!
//! They run in the default test command; each property runs 64 cases.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{header, HeaderName, HeaderValue, Method, Request, StatusCode};
use axum::Router;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use serde_json::{json, Map, Number, Value};
use tower::ServiceExt;

/// The host every request is sent to; a same-origin request names it in `Origin`.
const HOST: &str = "drover.test";
/// Cases per property.
const CASES: u32 = 64;
/// The longest any one request may take before it counts as hung.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(20);

/// The type of a request body's field, as `drover_api` declares it.
#[derive(Debug, Clone, Copy)]
enum Ty {
    Str,
    U32,
    U64,
    F64,
    StrList,
    Stages,
}

/// A body's fields: name, type, and whether it may be left out.
type Schema = &'static [(&'static str, Ty, bool)];

const LOGIN: Schema = &[("name", Ty::Str, false), ("password", Ty::Str, false), ("label", Ty::Str, true)];
const TEXT: Schema = &[("text", Ty::Str, false)];
const INPUT: Schema = &[("text", Ty::Str, false), ("timeout_secs", Ty::F64, true), ("still_ms", Ty::U64, true)];
const NONE: Schema = &[];

/// Every route that takes a body or changes something (POST, PUT, DELETE), with the
/// body it takes (`{kind}` in a path is a parameter of that kind).
const ROUTES: &[(&str, &str, Schema)] = &[
    ("POST", "/api/v1/login-links", NONE),
    ("POST", "/api/v1/logout", NONE),
    ("POST", "/api/v1/login", LOGIN),
    ("POST", "/api/v1/login/token", LOGIN),
    ("PUT", "/api/v1/me/password", &[("current", Ty::Str, true), ("password", Ty::Str, false)]),
    ("POST", "/api/v1/tokens", &[("label", Ty::Str, false)]),
    ("POST", "/api/v1/tokens/{token}/revoke", NONE),
    ("PUT", "/api/v1/members/{member}/role", &[("role", Ty::Str, false)]),
    ("POST", "/api/v1/invites", &[("role", Ty::Str, true), ("hours", Ty::U32, true)]),
    ("POST", "/api/v1/invites/accept", &[("code", Ty::Str, false), ("name", Ty::Str, false), ("password", Ty::Str, false)]),
    ("POST", "/api/v1/invites/lookup", &[("code", Ty::Str, false)]),
    ("POST", "/api/v1/login/link", &[("code", Ty::Str, false)]),
    ("POST", "/api/v1/repos", &[("name", Ty::Str, false), ("device", Ty::Str, false), ("path", Ty::Str, false), ("base", Ty::Str, true)]),
    ("PUT", "/api/v1/workflow", &[("stages", Ty::Stages, false)]),
    ("POST", "/api/v1/webhooks", &[("url", Ty::Str, false), ("events", Ty::StrList, false)]),
    ("DELETE", "/api/v1/webhooks/{webhook}", NONE),
    ("POST", "/api/v1/webhooks/{webhook}/rotate", NONE),
    ("POST", "/api/v1/webhooks/{webhook}/enable", NONE),
    ("POST", "/api/v1/webhooks/{webhook}/deliveries/{message}/redeliver", NONE),
    (
        "POST",
        "/api/v1/agents",
        &[
            ("name", Ty::Str, false),
            ("harness", Ty::Str, false),
            ("model", Ty::Str, true),
            ("provider", Ty::Str, true),
            ("account", Ty::Str, true),
            ("effort", Ty::Str, true),
            ("template", Ty::StrList, true),
        ],
    ),
    (
        "POST",
        "/api/v1/tasks",
        &[
            ("kind", Ty::Str, true),
            ("title", Ty::Str, false),
            ("body", Ty::Str, true),
            ("repo", Ty::Str, false),
            ("workflow", Ty::Stages, true),
            ("agent", Ty::Str, true),
        ],
    ),
    ("POST", "/api/v1/tasks/{task}/advance", TEXT),
    ("POST", "/api/v1/tasks/{task}/comments", TEXT),
    ("POST", "/api/v1/tasks/{task}/blockers", TEXT),
    ("POST", "/api/v1/tasks/{task}/questions", TEXT),
    ("POST", "/api/v1/tasks/{task}/launch", NONE),
    ("POST", "/api/v1/tasks/{task}/finish", NONE),
    ("POST", "/api/v1/tasks/{task}/mark-done", NONE),
    ("POST", "/api/v1/tasks/{task}/abandon", NONE),
    ("POST", "/api/v1/tasks/{task}/cancel", NONE),
    ("POST", "/api/v1/notes/{note}/answer", TEXT),
    ("POST", "/api/v1/notes/{note}/resolve", NONE),
    ("POST", "/api/v1/devices", &[("name", Ty::Str, false), ("slots", Ty::U32, true)]),
    ("POST", "/api/v1/devices/{device}/revoke", NONE),
    (
        "POST",
        "/api/v1/sessions",
        &[
            ("device", Ty::Str, false),
            ("command", Ty::StrList, false),
            ("cwd", Ty::Str, true),
            ("title", Ty::Str, true),
            ("cols", Ty::U32, true),
            ("rows", Ty::U32, true),
        ],
    ),
    ("POST", "/api/v1/sessions/{session}/input", INPUT),
    ("POST", "/api/v1/sessions/{session}/ask", INPUT),
    ("POST", "/api/v1/sessions/{session}/stop", NONE),
];

/// Every field name of the request bodies in `drover_api`, so shaped bodies
/// get past "missing field" to the checks behind it.
const FIELDS: &[&str] = &[
    "name",
    "password",
    "label",
    "current",
    "role",
    "hours",
    "device",
    "command",
    "cwd",
    "title",
    "cols",
    "rows",
    "text",
    "timeout_secs",
    "still_ms",
    "kind",
    "body",
    "repo",
    "workflow",
    "agent",
    "stages",
    "stage",
    "assignee",
    "merge",
    "harness",
    "model",
    "provider",
    "account",
    "effort",
    "template",
    "url",
    "events",
    "slots",
    "path",
    "base",
];

/// Strings the server gives meaning to, so random bodies sometimes say something valid.
const WORDS: &[&str] = &[
    "owner",
    "admin",
    "member",
    "bob",
    "dev1",
    "repo1",
    "plan",
    "code",
    "merge",
    "story",
    "bug",
    "claude",
    "custom",
    "opencode",
    "session.started",
    "task.finished",
    "https://example.com/hook",
    "http://user:pw@example.com/",
    "ftp://example.com",
    "/tmp",
    "/tmp/repo",
    "main",
    "drover/x",
    "..",
    "-x",
    "@",
    "{prompt}",
    "correct horse battery",
    "drv_",
    "dri_",
    "ses_",
    "tsk_",
];

/// Raw JSON literals serde_json's `Value` cannot express (or parses specially).
const LITERALS: &[&str] = &[
    "1e400",
    "-1e400",
    "18446744073709551616",
    "-9223372036854775809",
    "4294967296",
    "65536",
    "-0",
    "0.5",
    "1E2",
    "NaN",
    "Infinity",
    "\"\\ud800\"",
    "\"\\u0000\"",
    "\"\\udfff\\ud800\"",
    "[]",
    "{}",
    "true",
    "null",
    "\"\"",
    "[[[[[[[[[[[[]]]]]]]]]]]]",
];

// ----------------------------------------------------------------------------------------
// The server under test.

/// Ids and credentials of things the fixture made, for path segments and headers.
struct Fixture {
    app: Router,
    owner: String,
    member: String,
    cookie: String,
    real: Vec<(&'static str, String)>,
    rt: tokio::runtime::Runtime,
    _dir: tempfile::TempDir,
}

/// A response, for the checks.
struct Answer {
    status: StatusCode,
    body: Vec<u8>,
}

fn request(method: &str, path: &str, headers: &[(HeaderName, HeaderValue)], body: Vec<u8>, ip: u8) -> Request<Body> {
    let mut req = Request::builder().method(Method::from_bytes(method.as_bytes()).unwrap()).uri(path);
    req = req.header(header::HOST, HOST);
    for (k, v) in headers {
        req = req.header(k, v);
    }
    let mut req = req.body(Body::from(body)).expect("a valid request");
    req.extensions_mut().insert(ConnectInfo(SocketAddr::from((Ipv4Addr::new(10, 0, 0, ip), 40000))));
    req
}

impl Fixture {
    fn new() -> Fixture {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let (app, owner, ws) = rt.block_on(async {
            let store = drover_store::Store::open_sqlite(&dir.path().join("drover.db")).await.unwrap();
            let (ws, owner) = store.bootstrap("default", "owner").await.unwrap();
            let token = drover_server::auth::issue_member_token(&store, ws, owner, "tests").await.unwrap();
            let state = drover_server::AppState::new(store.clone(), ws, drover_server::ServerConfig::default());
            (drover_server::api::router(state), token, (store, ws))
        });
        let mut fx = Fixture { app, owner, member: String::new(), cookie: String::new(), real: Vec::new(), rt, _dir: dir };
        fx.populate(ws);
        fx
    }

    /// Sends one request; panics if it hangs.
    fn send(&self, req: Request<Body>) -> Answer {
        let app = self.app.clone();
        self.rt.block_on(async move {
            let resp = tokio::time::timeout(REQUEST_TIMEOUT, app.oneshot(req)).await.expect("the request hung").expect("infallible");
            let status = resp.status();
            let body = axum::body::to_bytes(resp.into_body(), usize::MAX).await.expect("a readable body").to_vec();
            Answer { status, body }
        })
    }

    fn bearer(token: &str) -> Vec<(HeaderName, HeaderValue)> {
        vec![(header::AUTHORIZATION, HeaderValue::from_str(&format!("Bearer {token}")).unwrap())]
    }

    /// A JSON call as the owner that must succeed; its answer.
    fn setup(&self, method: &str, path: &str, token: &str, body: Value) -> Value {
        let mut headers = Fixture::bearer(token);
        headers.push((header::CONTENT_TYPE, HeaderValue::from_static("application/json")));
        let a = self.send(request(method, path, &headers, serde_json::to_vec(&body).unwrap(), 1));
        assert!(a.status.is_success(), "setup {method} {path}: {} {}", a.status, String::from_utf8_lossy(&a.body));
        serde_json::from_slice(&a.body).unwrap_or(Value::Null)
    }

    /// Makes one of each thing the routes act on: a device, a repository, an agent, a
    /// task with a question, a webhook, a spare token, and a second member (role
    /// `member`) with a token and a browser session.
    fn populate(&mut self, (store, ws): (drover_store::Store, drover_core::WorkspaceId)) {
        let owner = self.owner.clone();
        self.setup("POST", "/api/v1/devices", &owner, json!({ "name": "dev1" }));
        self.setup("POST", "/api/v1/repos", &owner, json!({ "name": "repo1", "device": "dev1", "path": "/tmp/repo1" }));
        self.setup("POST", "/api/v1/agents", &owner, json!({ "name": "agent1", "harness": "claude" }));
        let task =
            self.setup("POST", "/api/v1/tasks", &owner, json!({ "title": "Fix it", "repo": "repo1" }))["id"].as_str().unwrap().to_string();
        let note = self.setup("POST", &format!("/api/v1/tasks/{task}/questions"), &owner, json!({ "text": "why?" }))["id"]
            .as_str()
            .unwrap()
            .to_string();
        let hook = self.setup("POST", "/api/v1/webhooks", &owner, json!({ "url": "https://example.com/h", "events": ["session.started"] }))
            ["webhook"]["id"]
            .as_str()
            .unwrap()
            .to_string();
        let spare = self.setup("POST", "/api/v1/tokens", &owner, json!({ "label": "spare" }))["info"]["id"].as_str().unwrap().to_string();
        let code = self.setup("POST", "/api/v1/invites", &owner, json!({ "role": "member" }))["code"].as_str().unwrap().to_string();
        // Joining answers with the browser session's cookie.
        let headers = vec![(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))];
        let body = serde_json::to_vec(&json!({ "code": code, "name": "bob", "password": "correct horse battery" })).unwrap();
        let req = request("POST", "/api/v1/invites/accept", &headers, body, 1);
        let app = self.app.clone();
        let set_cookie = self.rt.block_on(async move {
            let resp = app.oneshot(req).await.unwrap();
            assert_eq!(resp.status(), StatusCode::CREATED);
            resp.headers()[header::SET_COOKIE].to_str().unwrap().to_string()
        });
        self.cookie = set_cookie.split(';').next().unwrap().split_once('=').unwrap().1.to_string();
        self.member = self.rt.block_on(async {
            let bob = store.member_by_name(ws, "bob").await.unwrap().unwrap();
            drover_server::auth::issue_member_token(&store, ws, bob.id, "tests").await.unwrap()
        });
        self.real = vec![
            ("task", task),
            ("note", note),
            ("webhook", hook),
            ("token", spare),
            ("code", code),
            ("member", "bob".into()),
            ("member", "owner".into()),
            ("device", "dev1".into()),
        ];
    }

    /// The path with each `{kind}` replaced by a segment of `segs`.
    fn path(&self, template: &str, segs: &[Segment]) -> String {
        let mut out = String::new();
        let mut rest = template;
        let mut i = 0;
        while let Some(start) = rest.find('{') {
            let end = rest.find('}').unwrap();
            out.push_str(&rest[..start]);
            out.push_str(&segs[i % segs.len()].render(&rest[start + 1..end], &self.real));
            i += 1;
            rest = &rest[end + 1..];
        }
        out.push_str(rest);
        out
    }

    fn headers(&self, auth: &Auth, content_type: &Option<&'static str>) -> Vec<(HeaderName, HeaderValue)> {
        let mut h = Vec::new();
        let v = |s: String| HeaderValue::from_str(&s).unwrap();
        match auth {
            Auth::None => {}
            Auth::Owner => h.push((header::AUTHORIZATION, v(format!("Bearer {}", self.owner)))),
            Auth::Member => h.push((header::AUTHORIZATION, v(format!("Bearer {}", self.member)))),
            Auth::Bogus(t) => h.push((header::AUTHORIZATION, v(format!("Bearer {t}")))),
            Auth::Cookie { same_origin } => {
                h.push((header::COOKIE, v(format!("drover_session={}", self.cookie))));
                let origin = if *same_origin { format!("http://{HOST}") } else { "https://evil.example".into() };
                h.push((header::ORIGIN, v(origin)));
            }
        }
        if let Some(ct) = content_type {
            h.push((header::CONTENT_TYPE, HeaderValue::from_static(ct)));
        }
        h
    }
}

// ----------------------------------------------------------------------------------------
// What is checked.

/// At most 300 characters of a body, for a failure's message.
fn shorten(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let mut short: String = text.chars().take(300).collect();
    if short.len() < text.len() {
        short.push_str(&format!("… ({} bytes)", body.len()));
    }
    format!("{short:?}")
}

/// Never 5xx; every 4xx is `{"error": non-empty, "code": non-empty}`.
fn check(what: &str, a: &Answer) -> Result<(), TestCaseError> {
    prop_assert!(!a.status.is_server_error(), "{what}: answered {} {}", a.status, shorten(&a.body));
    if a.status.is_client_error() {
        let body: Value = serde_json::from_slice(&a.body)
            .map_err(|_| TestCaseError::fail(format!("{what}: {} with a non-JSON body: {}", a.status, shorten(&a.body))))?;
        let error = body.get("error").and_then(Value::as_str).unwrap_or_default();
        let code = body.get("code").and_then(Value::as_str).unwrap_or_default();
        prop_assert!(!error.is_empty() && !code.is_empty(), "{what}: {} without an error and code: {}", a.status, shorten(&a.body));
    }
    Ok(())
}

// ----------------------------------------------------------------------------------------
// Generators.

/// Who calls.
#[derive(Debug, Clone)]
enum Auth {
    None,
    Owner,
    Member,
    Bogus(String),
    Cookie { same_origin: bool },
}

fn auth() -> impl Strategy<Value = Auth> {
    prop_oneof![
        1 => Just(Auth::None),
        4 => Just(Auth::Owner),
        1 => Just(Auth::Member),
        1 => "(drv_|drs_|drd_|drw_)?[A-Za-z0-9]{0,300}".prop_map(Auth::Bogus),
        1 => any::<bool>().prop_map(|same_origin| Auth::Cookie { same_origin }),
    ]
}

/// A path segment.
#[derive(Debug, Clone)]
enum Segment {
    /// Something the fixture made, of the kind the route wants (or another kind).
    Real(usize),
    /// A well-formed id of some kind that names nothing.
    Id(&'static str, u128),
    /// Any text, percent-encoded. (Bytes that do not decode to UTF-8 are refused with
    /// a text/plain 400: see `undecodable_paths_and_queries_get_json_errors`.)
    Text(String),
}

impl Segment {
    fn render(&self, kind: &str, real: &[(&'static str, String)]) -> String {
        match self {
            Segment::Real(i) => {
                let of_kind: Vec<&String> = real.iter().filter(|(k, _)| *k == kind).map(|(_, v)| v).collect();
                match of_kind.is_empty() {
                    true => real[i % real.len()].1.clone(),
                    false => of_kind[i % of_kind.len()].clone(),
                }
            }
            Segment::Id(prefix, n) => format!("{prefix}_{n:032x}"),
            Segment::Text(s) => encode(s.as_bytes()),
        }
    }
}

fn encode(bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|&b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn segment() -> impl Strategy<Value = Segment> {
    let prefixes = vec!["ses", "tsk", "not", "whk", "msg", "tok", "dev", "mbr", "sbx", "inv", "dri"];
    prop_oneof![
        3 => any::<usize>().prop_map(Segment::Real),
        2 => (prop::sample::select(prefixes), any::<u128>()).prop_map(|(p, n)| Segment::Id(p, n)),
        3 => "(?s).{0,80}".prop_map(Segment::Text),
    ]
}

/// A string meant to upset a parser or a check.
fn hostile_string() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => prop::sample::select(WORDS).prop_map(str::to_string),
        3 => "(?s).{0,60}",
        2 => "[\\x00-\\x1f\\x7f\\u{80}-\\u{9f}\\u{202e}\\u{feff}a-z]{0,20}",
        1 => "\\PC{0,40}",
        // Lengths around every limit the API has (63, 100, 200, 256, 4096, 16K, 64K).
        1 => (
            prop::sample::select(vec!['x', 'é', '\0', '\u{1b}', '🚀']),
            prop::sample::select(vec![63usize, 64, 100, 101, 200, 201, 256, 257, 2049, 4097, 16_385, 65_537]),
        )
            .prop_map(|(c, n)| c.to_string().repeat(n)),
    ]
}

fn number() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_filter_map("finite", |f| Number::from_f64(f).map(Value::Number)),
        prop::sample::select(vec![0i64, 1, -1, 2, 1000, 1001, 720, 721, 65_535, 65_536, u32::MAX as i64, u32::MAX as i64 + 1, i64::MIN])
            .prop_map(Value::from),
        prop::sample::select(vec![0.0f64, -0.0, 0.5, 3600.0, 3600.5, 1e300, -1e300, f64::MIN_POSITIVE]).prop_map(Value::from),
    ]
}

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        1 => Just(Value::Null),
        1 => any::<bool>().prop_map(Value::Bool),
        2 => number(),
        4 => hostile_string().prop_map(Value::String),
    ]
}

fn key() -> impl Strategy<Value = String> {
    prop_oneof![3 => prop::sample::select(FIELDS).prop_map(str::to_string), 1 => "(?s).{0,12}"]
}

/// Any JSON value, nested a few levels.
fn json_value() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((key(), inner), 0..6).prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// A string that is often valid where a name, password, label, title or path is wanted.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => "[a-z0-9][a-z0-9._-]{0,15}",
        3 => prop::sample::select(WORDS).prop_map(str::to_string),
        1 => "[ -~]{10,40}",
        3 => hostile_string(),
    ]
}

fn stages() -> impl Strategy<Value = Value> {
    let stage =
        (prop_oneof![3 => "[a-z0-9_-]{1,8}", 1 => hostile_string()], prop::option::weighted(0.2, text()), prop::option::of(any::<bool>()))
            .prop_map(|(s, a, m)| json!({ "stage": s, "assignee": a, "merge": m }));
    prop::collection::vec(stage, 0..22).prop_map(Value::Array)
}

/// A value of type `ty`, mostly; sometimes of another type.
fn typed(ty: Ty) -> BoxedStrategy<Value> {
    let right = match ty {
        Ty::Str => text().prop_map(Value::String).boxed(),
        Ty::U32 => prop_oneof![3 => (0u32..1100).prop_map(Value::from), 1 => number()].boxed(),
        Ty::U64 => prop_oneof![3 => (0u64..5000).prop_map(Value::from), 1 => number()].boxed(),
        Ty::F64 => prop_oneof![3 => (-1.0f64..4000.0).prop_map(Value::from), 1 => number()].boxed(),
        Ty::StrList => prop::collection::vec(text(), 0..5).prop_map(|v| json!(v)).boxed(),
        Ty::Stages => stages().boxed(),
    };
    prop_oneof![20 => right, 1 => leaf(), 1 => json_value()].boxed()
}

/// An object with the body's fields, mostly of the right types and mostly present, with
/// hostile values: what gets past deserialising to the checks and the store.
fn schema_body(schema: Schema) -> BoxedStrategy<Value> {
    let fields: Vec<BoxedStrategy<Option<(String, Value)>>> = schema
        .iter()
        .map(|&(name, ty, optional)| {
            prop::option::weighted(if optional { 0.6 } else { 0.95 }, typed(ty).prop_map(move |v| (name.to_string(), v))).boxed()
        })
        .collect();
    let extra = prop::option::weighted(0.1, (key(), leaf()));
    (fields, extra).prop_map(|(fields, extra)| Value::Object(fields.into_iter().flatten().chain(extra).collect::<Map<_, _>>())).boxed()
}

/// An object with any of the bodies' field names and values of every kind.
fn any_fields_body() -> impl Strategy<Value = Value> {
    let value = prop_oneof![4 => leaf(), 2 => typed(Ty::StrList), 1 => stages(), 1 => json_value()];
    prop::collection::vec((prop::sample::select(FIELDS), value), 0..8)
        .prop_map(|kv| Value::Object(kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect::<Map<_, _>>()))
}

/// A hostile body for a route that takes `schema`: mostly of its shape, sometimes with
/// a raw literal spliced in, sometimes any fields, sometimes nested too deep.
fn body(schema: Schema) -> BoxedStrategy<Vec<u8>> {
    let names: Vec<&str> = if schema.is_empty() { FIELDS.to_vec() } else { schema.iter().map(|f| f.0).collect() };
    prop_oneof![
        6 => schema_body(schema).prop_map(|v| serde_json::to_vec(&v).unwrap()),
        1 => any_fields_body().prop_map(|v| serde_json::to_vec(&v).unwrap()),
        2 => (prop::sample::select(names), prop::sample::select(LITERALS), schema_body(schema)).prop_map(|(k, lit, v)| {
            let rest = serde_json::to_string(&v).unwrap();
            let rest = rest.strip_prefix('{').unwrap();
            let sep = if rest == "}" { "" } else { "," };
            format!("{{\"{k}\":{lit}{sep}{rest}").into_bytes()
        }),
        1 => (1usize..400).prop_map(|n| "[".repeat(n).into_bytes()),
    ]
    .boxed()
}

fn content_type() -> impl Strategy<Value = Option<&'static str>> {
    prop_oneof![
        8 => Just(Some("application/json")),
        1 => Just(Some("application/json; charset=utf-8")),
        1 => Just(None),
        1 => Just(Some("text/plain")),
    ]
}

/// One request's variable parts.
#[derive(Debug, Clone)]
struct Call {
    auth: Auth,
    segs: Vec<Segment>,
    content_type: Option<&'static str>,
    body: Vec<u8>,
    ip: u8,
}

fn call(body: BoxedStrategy<Vec<u8>>) -> impl Strategy<Value = Call> {
    (auth(), prop::collection::vec(segment(), 2), content_type(), body, any::<u8>()).prop_map(|(auth, segs, content_type, body, ip)| Call {
        auth,
        segs,
        content_type,
        body,
        ip,
    })
}

/// One call to every route, its body made by `body` from the route's schema.
fn calls(body: fn(Schema) -> BoxedStrategy<Vec<u8>>) -> Vec<BoxedStrategy<Call>> {
    ROUTES.iter().map(|&(_, _, schema)| call(body(schema)).boxed()).collect()
}

fn run_routes(fx: &Fixture, calls: &[Call]) -> Result<(), TestCaseError> {
    for ((method, template, _), c) in ROUTES.iter().zip(calls) {
        let path = fx.path(template, &c.segs);
        let a = fx.send(request(method, &path, &fx.headers(&c.auth, &c.content_type), c.body.clone(), c.ip));
        let what = format!("{method} {path} as {:?} ({:?}) with {}", c.auth, c.content_type, shorten(&c.body));
        check(&what, &a)?;
    }
    Ok(())
}

fn config() -> ProptestConfig {
    ProptestConfig { cases: CASES, max_shrink_iters: 256, ..ProptestConfig::default() }
}

// ----------------------------------------------------------------------------------------
// The properties.

#[test]
fn routes_answer_arbitrary_bytes_with_json_errors() {
    let fx = Fixture::new();
    proptest!(config(), |(calls in calls(|_| prop::collection::vec(any::<u8>(), 0..400).boxed()))| {
        run_routes(&fx, &calls)?;
    });
}

#[test]
fn routes_answer_arbitrary_json_with_json_errors() {
    let fx = Fixture::new();
    proptest!(config(), |(calls in calls(|_| json_value().prop_map(|v| serde_json::to_vec(&v).unwrap()).boxed()))| {
        run_routes(&fx, &calls)?;
    });
}

#[test]
fn routes_answer_hostile_bodies_of_the_right_shape_with_json_errors() {
    let fx = Fixture::new();
    proptest!(config(), |(calls in calls(body))| {
        run_routes(&fx, &calls)?;
    });
}

/// A header value's bytes: visible ASCII, spaces, tabs and obs-text.
fn header_bytes() -> impl Strategy<Value = Vec<u8>> {
    let byte = prop_oneof![8 => 0x20u8..0x7f, 1 => Just(b'\t'), 1 => 0x80u8..=0xff];
    prop::collection::vec(byte, 0..300)
}

/// A header value that may come close to valid credentials.
fn header_value(fx_owner: String, fx_cookie: String) -> impl Strategy<Value = Option<Vec<u8>>> {
    let owner = fx_owner.clone();
    let cookie = fx_cookie.clone();
    prop::option::weighted(
        0.7,
        prop_oneof![
            2 => header_bytes(),
            1 => header_bytes().prop_map(|b| [b"Bearer ".to_vec(), b].concat()),
            1 => header_bytes().prop_map(move |b| [format!("Bearer {owner}").into_bytes(), b].concat()),
            1 => Just(format!("Bearer {fx_owner}").into_bytes()),
            1 => header_bytes().prop_map(|b| [b"a=1; drover_session=".to_vec(), b].concat()),
            1 => header_bytes().prop_map(move |b| [format!("drover_session={cookie}").into_bytes(), b].concat()),
            1 => Just(format!("x=y;drover_session={fx_cookie}; drover_session=drw_other").into_bytes()),
            1 => header_bytes().prop_map(|b| [b"http://".to_vec(), b].concat()),
            1 => Just(format!("http://{}", HOST.to_uppercase()).into_bytes()),
            1 => Just(b"null".to_vec()),
        ],
    )
}

#[test]
fn credentials_headers_are_refused_or_accepted_never_fail() {
    let fx = Fixture::new();
    let names = [header::AUTHORIZATION, header::COOKIE, header::ORIGIN, header::UPGRADE];
    let headers = prop::collection::vec((prop::sample::select(names.to_vec()), header_value(fx.owner.clone(), fx.cookie.clone())), 0..6);
    let host = prop::option::of(prop_oneof![Just(HOST.as_bytes().to_vec()), header_bytes()]);
    let routes = prop::sample::select(vec!["/api/v1/me", "/api/v1/sessions", "/api/v1/tokens", "/api/v1/overview"]);
    proptest!(config(), |(headers in headers, host in host, route in routes)| {
        let mut req = Request::builder().method("GET").uri(route);
        if let Some(host) = host.and_then(|h| HeaderValue::from_bytes(&h).ok()) {
            req = req.header(header::HOST, host);
        }
        let mut shown = Vec::new();
        for (name, value) in headers {
            let Some(value) = value.and_then(|v| HeaderValue::from_bytes(&v).ok()) else { continue };
            shown.push(format!("{name}: {value:?}"));
            req = req.header(name, value);
        }
        let mut req = req.body(Body::empty()).unwrap();
        req.extensions_mut().insert(ConnectInfo(SocketAddr::from((Ipv4Addr::LOCALHOST, 40000))));
        let a = fx.send(req);
        let what = format!("GET {route} with {shown:?}");
        check(&what, &a)?;
        prop_assert!(
            a.status.is_success() || matches!(a.status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN),
            "{what}: answered {} {}", a.status, String::from_utf8_lossy(&a.body)
        );
    });
}

/// A path segment that does not decode to UTF-8, or a query string that does not parse,
/// is refused by axum's own `Path` / `Query` rejections before a handler runs; found by
/// these properties as text/plain 400s, they are now the API's JSON error (the router's
/// `json_errors` layer rewraps them).
#[test]
fn undecodable_paths_and_queries_get_json_errors() {
    let fx = Fixture::new();
    let calls = [
        ("POST", "/api/v1/tasks/%FF/launch"),
        ("POST", "/api/v1/invites/dri_%C3%28/revoke"),
        ("PUT", "/api/v1/members/%80/role"),
        ("POST", "/api/v1/webhooks/whk_x/deliveries/%FE/redeliver"),
        ("GET", "/api/v1/sessions?limit=many"),
        ("GET", "/api/v1/sessions?all=maybe"),
        ("GET", "/api/v1/sandboxes?limit=1e3"),
    ];
    let mut failures = Vec::new();
    for (method, path) in calls {
        let headers = fx.headers(&Auth::Owner, &Some("application/json"));
        let a = fx.send(request(method, path, &headers, br#"{"role":"member","name":"x","password":"correct horse"}"#.to_vec(), 1));
        if let Err(e) = check(&format!("{method} {path}"), &a) {
            failures.push(e.to_string());
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

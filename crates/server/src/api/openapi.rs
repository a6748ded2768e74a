//! The OpenAPI 3.1 document of `/api/v1`, built from the `drover-api` types and a table of
//! the router's routes (`GET /api/v1/openapi.json`; committed as `web/openapi.json`, from
//! which the web app's types are generated), and the outcome words served once.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::LazyLock;

use axum::http::header;
use axum::response::IntoResponse;
use axum::Json;
use drover_api as api;
use utoipa::openapi::path::{HttpMethod, OperationBuilder, ParameterBuilder, ParameterIn, PathItem};
use utoipa::openapi::request_body::RequestBodyBuilder;
use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, Schema, Type};
use utoipa::openapi::{ComponentsBuilder, Content, InfoBuilder, OpenApi, OpenApiBuilder, PathsBuilder, Ref, RefOr, Required};
use utoipa::openapi::{ResponseBuilder, ResponsesBuilder};
use utoipa::ToSchema;

/// A named schema of the contract: its name, and how to add it and the schemas it uses to
/// the document's components.
#[derive(Clone, Copy)]
struct Body {
    name: fn() -> Cow<'static, str>,
    collect: fn(&mut Vec<(String, RefOr<Schema>)>),
}

/// Adds `T` and every schema it refers to.
fn collect<T: ToSchema>(out: &mut Vec<(String, RefOr<Schema>)>) {
    out.push((T::name().into_owned(), T::schema()));
    T::schemas(out);
}

/// The schema `T` as a [`Body`].
const fn body<T: ToSchema>() -> Body {
    Body { name: T::name, collect: collect::<T> }
}

impl Body {
    fn reference(self) -> RefOr<Schema> {
        Ref::from_schema_name((self.name)()).into()
    }
}

/// What a route answers when it succeeds.
#[derive(Clone, Copy)]
enum Reply {
    /// 200 with this JSON body.
    Json(Body),
    /// 200 with a JSON array of this.
    List(Body),
    /// 201 with this JSON body.
    Created(Body),
    /// This status and no body.
    Empty(u16),
    /// 200 with bytes of this media type, described.
    Bytes(&'static str, &'static str),
    /// The document itself (any JSON).
    Document,
    /// 101: a WebSocket, described.
    Socket(&'static str),
}

/// A query parameter's type.
#[derive(Clone, Copy)]
enum Q {
    Int,
    Num,
    Bool,
    Str,
    /// A string the route cannot do without.
    Needed,
}

/// One query parameter: name, type, what it is for.
type Param = (&'static str, Q, &'static str);

/// One method on one path of the router.
struct Route {
    method: &'static str,
    path: &'static str,
    summary: &'static str,
    query: &'static [Param],
    body: Option<Body>,
    reply: Reply,
}

const fn r(method: &'static str, path: &'static str, summary: &'static str, body: Option<Body>, reply: Reply) -> Route {
    Route { method, path, summary, query: &[], body, reply }
}

const fn rq(method: &'static str, path: &'static str, summary: &'static str, query: &'static [Param], reply: Reply) -> Route {
    Route { method, path, summary, query, body: None, reply }
}

use Reply::{Created, Empty, List};

const EVENT_QUERY: &[Param] = &[
    ("after", Q::Int, "Only events after this sequence number."),
    ("newest", Q::Bool, "Newest first instead, before `before` (a feed read backwards)."),
    ("before", Q::Int, "With `newest`: only events before this sequence number."),
    ("limit", Q::Int, "At most this many (default 200, at most 1000)."),
];
const PAGE_QUERY: &[Param] = &[
    ("cursor", Q::Str, "`created_at|id` of the last row of the previous batch."),
    ("limit", Q::Int, "Batch size (default 50, at most 200)."),
];
const SANDBOX_QUERY: &[Param] = &[
    ("filter", Q::Str, "`live` (default), `open` or `all`."),
    ("q", Q::Str, "Search text (title, device, sandbox or session id)."),
    ("cursor", Q::Str, "From a previous batch's `next_cursor`."),
    ("limit", Q::Int, "Batch size (default 50, at most 200)."),
];
const TERMINAL_QUERY: &[Param] = &[
    ("read_only", Q::Bool, "Only watch: keystrokes and resizes are ignored."),
    ("cols", Q::Int, "Resize the session to these columns on join."),
    ("rows", Q::Int, "Resize the session to these rows on join."),
    ("local", Q::Bool, "The viewer takes the terminal's bytes from the session's shim on its own machine (`drover session attach` there): it is counted, told of resizes and the end, but sent no bytes."),
    ("window", Q::Int, "Bytes the viewer may be sent ahead of what it has said it is done with (`consumed` commands; 65536 to 16777216): beyond it output is held back, and once the viewer has caught up to half of it, a `resync` and a fresh screen take the place of what it missed."),
];

const fn json(b: Body) -> Reply {
    Reply::Json(b)
}

/// Every route under `/api/v1`, as `router` declares them (the tests hold the two together).
#[rustfmt::skip]
const ROUTES: &[Route] = &[
    r("GET", "/api/v1/health", "Whether the server answers (`ok`); the `drover-version` header says its version.", None, Reply::Bytes("text/plain", "`ok`")),
    r("GET", "/api/v1/openapi.json", "This document.", None, Reply::Document),
    r("GET", "/api/v1/outcomes", "Every outcome word, whether it is live, and what it means.", None, json(body::<api::OutcomeGuide>())),
    r("GET", "/api/v1/me", "Who is signed in.", None, json(body::<api::MeView>())),
    r("POST", "/api/v1/login-links", "A one-time sign-in link for the caller.", None, Created(body::<api::LoginLink>())),
    r("POST", "/api/v1/logout", "Ends the browser session (clears its cookie).", None, Empty(204)),
    r("POST", "/api/v1/login", "Signs a browser in (sets its cookie).", Some(body::<api::Login>()), json(body::<api::MeView>())),
    r("POST", "/api/v1/login/token", "Signs `drover login` in: a personal API token.", Some(body::<api::Login>()), Created(body::<api::IssuedToken>())),
    r("POST", "/api/v1/login/link", "Redeems a one-time sign-in link (sets the cookie).", Some(body::<api::RedeemLoginLink>()), Empty(204)),
    r("PUT", "/api/v1/me/password", "Sets the caller's password.", Some(body::<api::SetPassword>()), Empty(204)),
    r("GET", "/api/v1/tokens", "The caller's personal API tokens.", None, List(body::<api::TokenView>())),
    r("POST", "/api/v1/tokens", "Issues a personal API token.", Some(body::<api::CreateToken>()), Created(body::<api::IssuedToken>())),
    r("POST", "/api/v1/tokens/{id}/revoke", "Revokes one of the caller's tokens.", None, json(body::<api::TokenView>())),
    r("GET", "/api/v1/members", "The workspace's members.", None, List(body::<api::MemberView>())),
    r("DELETE", "/api/v1/members/{name}", "Removes a member.", None, json(body::<api::MemberView>())),
    r("GET", "/api/v1/members/{name}/tokens", "A member's personal tokens (owners).", None, List(body::<api::TokenView>())),
    r("PUT", "/api/v1/members/{name}/role", "Changes a member's role (owners).", Some(body::<api::SetRole>()), json(body::<api::MemberView>())),
    r("GET", "/api/v1/invites", "Invitations not yet used.", None, List(body::<api::PendingInviteView>())),
    r("POST", "/api/v1/invites", "Invites a member (owners); the code is shown once.", Some(body::<api::CreateInvite>()), Created(body::<api::InviteView>())),
    r("POST", "/api/v1/invites/{id}/revoke", "Revokes an invitation.", None, Empty(204)),
    r("POST", "/api/v1/invites/lookup", "What an invitation offers.", Some(body::<api::InviteCode>()), json(body::<api::InviteInfo>())),
    r("POST", "/api/v1/invites/accept", "Joins the workspace (sets the cookie).", Some(body::<api::AcceptInvite>()), Created(body::<api::MeView>())),
    r("GET", "/api/v1/overview", "The counts the sidebar and the Sessions header show.", None, json(body::<api::Overview>())),
    rq("GET", "/api/v1/sandboxes", "A batch of the sandbox list, newest first.", SANDBOX_QUERY, json(body::<api::SandboxList>())),
    rq("GET", "/api/v1/stream", "Live updates as server-sent events: `activity` (StreamUpdate), `changed` (StreamChanged), `resync`.", &[("since", Q::Int, "Events after this sequence number (default: only new ones).")], Reply::Bytes("text/event-stream", "Server-sent events; each `data` is the JSON of the event's schema.")),
    rq("GET", "/api/v1/devices/{name}/sessions", "A device's sessions, newest first.", PAGE_QUERY, json(body::<api::SessionList>())),
    rq("GET", "/api/v1/sessions/{id}/screen", "The session's screen after everything stored (its Final screen), or at a time of its recording, from the nearest screen checkpoint: escape sequences that draw it on a blank terminal (`x-drover-cols`/`x-drover-rows`, `x-drover-offset`/`x-drover-t`); 503 while an old session's checkpoints are being built.", &[("t", Q::Int, "The screen a player shows at this time, in µs since the start.")], Reply::Bytes("application/octet-stream", "Terminal bytes.")),
    r("GET", "/api/v1/repos", "The workspace's repositories.", None, List(body::<api::RepoView>())),
    r("POST", "/api/v1/repos", "Registers a repository and a device clone of it.", Some(body::<api::AddRepo>()), Created(body::<api::RepoAdded>())),
    r("GET", "/api/v1/repos/{name}", "A repository's page.", None, json(body::<api::RepoPage>())),
    r("GET", "/api/v1/workflow", "The stages new tasks get.", None, json(body::<api::WorkflowView>())),
    r("PUT", "/api/v1/workflow", "Sets the stages new tasks get.", Some(body::<api::WorkflowView>()), json(body::<api::WorkflowView>())),
    r("GET", "/api/v1/webhooks", "The webhook endpoints.", None, List(body::<api::WebhookView>())),
    r("POST", "/api/v1/webhooks", "Registers an endpoint; its secret is shown once.", Some(body::<api::CreateWebhook>()), Created(body::<api::WebhookSecretView>())),
    r("DELETE", "/api/v1/webhooks/{id}", "Removes an endpoint.", None, Empty(204)),
    r("POST", "/api/v1/webhooks/{id}/rotate", "Makes a new signing secret (the old one signs for a while).", None, json(body::<api::WebhookSecretView>())),
    r("POST", "/api/v1/webhooks/{id}/enable", "Enables a disabled endpoint.", None, json(body::<api::WebhookView>())),
    r("GET", "/api/v1/webhooks/{id}/deliveries", "An endpoint's delivery log.", None, List(body::<api::DeliveryView>())),
    r("POST", "/api/v1/webhooks/{id}/deliveries/{msg}/redeliver", "Queues a delivery again.", None, Empty(202)),
    r("GET", "/api/v1/agents", "The workspace's agents.", None, List(body::<api::AgentView>())),
    r("POST", "/api/v1/agents", "Registers an agent (the caller is its operator).", Some(body::<api::CreateAgent>()), Empty(201)),
    r("GET", "/api/v1/agents/{name}", "An agent's page.", None, json(body::<api::AgentPage>())),
    r("GET", "/api/v1/tasks", "The workspace's tasks.", None, List(body::<api::TaskView>())),
    r("POST", "/api/v1/tasks", "Files a task.", Some(body::<api::CreateTask>()), Created(body::<api::TaskView>())),
    r("GET", "/api/v1/tasks/{id}", "A task with its runs, notes and activity.", None, json(body::<api::TaskDetail>())),
    r("PATCH", "/api/v1/tasks/{id}", "Changes a task before its first run.", Some(body::<api::UpdateTask>()), json(body::<api::TaskView>())),
    r("POST", "/api/v1/tasks/{id}/advance", "Hands the current stage off, with a note.", Some(body::<api::TextBody>()), json(body::<api::TaskView>())),
    r("POST", "/api/v1/tasks/{id}/comments", "Comments on a task.", Some(body::<api::TextBody>()), Empty(201)),
    r("POST", "/api/v1/tasks/{id}/blockers", "Files a blocker.", Some(body::<api::TextBody>()), Created(body::<api::NoteView>())),
    r("POST", "/api/v1/tasks/{id}/questions", "Asks a person a question.", Some(body::<api::TextBody>()), Created(body::<api::NoteView>())),
    r("POST", "/api/v1/tasks/{id}/launch", "Queues the task's run.", None, json(body::<api::TaskView>())),
    r("POST", "/api/v1/tasks/{id}/activate", "Starts a run prepared to wait for a person.", None, json(body::<api::TaskView>())),
    r("POST", "/api/v1/tasks/{id}/finish", "Finishes the current stage's session.", None, json(body::<api::TaskView>())),
    r("POST", "/api/v1/tasks/{id}/mark-done", "Retires the task as done.", None, json(body::<api::TaskView>())),
    rq("POST", "/api/v1/tasks/{id}/abandon", "Tears the task's sandbox down without merging.", &[("task", Q::Bool, "Abandon the task too (it will not run again).")], json(body::<api::TaskView>())),
    r("POST", "/api/v1/tasks/{id}/cancel", "Calls the task off; a live run is released.", None, json(body::<api::TaskView>())),
    r("PUT", "/api/v1/tasks/{id}/spend-cap", "Sets a task's lifetime spend cap.", Some(body::<api::SpendCap>()), Empty(204)),
    rq("GET", "/api/v1/spend", "The workspace's spend by agent, model and day.", &[("days", Q::Int, "Days back from today (default 30, at most 366).")], json(body::<api::SpendReport>())),
    r("PUT", "/api/v1/spend/cap", "Sets the workspace's monthly spend cap.", Some(body::<api::SpendCap>()), Empty(204)),
    r("GET", "/api/v1/prices", "Model prices: the workspace's and the shipped ones.", None, json(body::<api::Prices>())),
    r("PUT", "/api/v1/prices", "Sets the workspace's own prices.", Some(body::<api::Prices>()), json(body::<api::Prices>())),
    r("GET", "/api/v1/skills", "The enabled skills.", None, List(body::<api::SkillView>())),
    r("PUT", "/api/v1/skills/{name}", "Adds or replaces a skill.", Some(body::<api::PutSkill>()), Empty(204)),
    r("DELETE", "/api/v1/skills/{name}", "Removes a skill.", None, Empty(204)),
    r("GET", "/api/v1/me/notifications", "What the caller is told of, and when.", None, json(body::<api::NotificationChoices>())),
    r("PUT", "/api/v1/me/notifications", "Sets what the caller is told of: events, quiet hours, cool-down.", Some(body::<api::NotificationChoices>()), json(body::<api::NotificationChoices>())),
    r("GET", "/api/v1/push/key", "The server's VAPID public key, for subscribing a browser.", None, json(body::<api::PushKey>())),
    r("GET", "/api/v1/push/subscriptions", "The caller's browsers registered for Web Push.", None, List(body::<api::PushSubscriptionView>())),
    r("POST", "/api/v1/push/subscriptions", "Registers the caller's browser for Web Push.", Some(body::<api::NewPushSubscription>()), Created(body::<api::PushSubscriptionView>())),
    r("DELETE", "/api/v1/push/subscriptions", "Forgets one of the caller's browsers.", Some(body::<api::RemovePushSubscription>()), Empty(204)),
    r("POST", "/api/v1/push/test", "Sends a test push to each of the caller's browsers.", None, json(body::<api::PushTestResult>())),
    r("GET", "/api/v1/inbox", "What waits on a person in the workspace, newest first.", None, json(body::<api::Inbox>())),
    r("GET", "/api/v1/attention/{id}", "One thing a run waits (or waited) on a person for.", None, json(body::<api::InboxItem>())),
    r("POST", "/api/v1/attention/{id}/decide", "Approves or denies a held tool call.", Some(body::<api::DecideBody>()), json(body::<api::InboxItem>())),
    rq("GET", "/api/v1/attention/{id}/decision", "For a run's hook: the decision on its held call; with `wait`, once one is taken.", &[("wait", Q::Num, "Seconds to wait for a decision (at most 3600).")], json(body::<api::HookDecision>())),
    r("POST", "/api/v1/hooks/claude", "For a run's hook: a Claude Code hook event.", Some(body::<api::HookEvent>()), json(body::<api::HookReceipt>())),
    r("POST", "/api/v1/hooks/codex", "For a run's hook: what Codex handed its `notify` program.", Some(body::<api::HookEvent>()), json(body::<api::HookReceipt>())),
    rq("GET", "/api/v1/notes/{id}", "A blocker or question; with `wait`, once it closes.", &[("wait", Q::Num, "Seconds to wait for the note to close (at most 3600).")], json(body::<api::NoteView>())),
    r("POST", "/api/v1/notes/{id}/answer", "Answers a question.", Some(body::<api::TextBody>()), json(body::<api::NoteView>())),
    r("POST", "/api/v1/notes/{id}/resolve", "Resolves a blocker.", None, json(body::<api::NoteView>())),
    r("GET", "/api/v1/devices", "The registered devices.", None, List(body::<api::DeviceView>())),
    r("POST", "/api/v1/devices", "Registers a device; its enrollment token is shown once.", Some(body::<api::AddDevice>()), Created(body::<api::DeviceEnrollment>())),
    r("POST", "/api/v1/devices/{name}/revoke", "Revokes a device's credential.", None, json(body::<api::DeviceView>())),
    r("POST", "/api/v1/devices/enroll", "A device trades its enrollment token for a credential.", Some(body::<api::Enroll>()), Created(body::<api::DeviceCredential>())),
    r("GET", "/api/v1/device/connect", "A device daemon's link (WebSocket; frames in `drover_protocol::device`).", None, Reply::Socket("The device link.")),
    rq("GET", "/api/v1/sessions", "Sessions, newest first.", &[("all", Q::Bool, "Include ended sessions."), ("limit", Q::Int, "At most this many (default 100, at most 1000).")], json(body::<api::SessionList>())),
    r("POST", "/api/v1/sessions", "Starts a task-free session on a device.", Some(body::<api::StartSession>()), Created(body::<api::SessionView>())),
    r("GET", "/api/v1/sessions/{id}", "One session.", None, json(body::<api::SessionView>())),
    r("POST", "/api/v1/sessions/{id}/input", "Types text into a session (audited).", Some(body::<api::SendInput>()), json(body::<api::InputReceipt>())),
    r("POST", "/api/v1/sessions/{id}/ask", "Types text and waits for the reply.", Some(body::<api::SendInput>()), json(body::<api::AskReply>())),
    r("POST", "/api/v1/sessions/{id}/stop", "Stops a session (released).", None, json(body::<api::SessionView>())),
    rq("GET", "/api/v1/sessions/{id}/text", "What the run printed, as plain text.", &[("lines", Q::Int, "Only the last N lines."), ("complete", Q::Bool, "Only settled lines (for following).")], json(body::<api::SessionText>())),
    rq("GET", "/api/v1/sessions/{id}/output", "Raw stored output from an offset (long-poll; `x-drover-offset`, `x-drover-outcome`, `x-drover-size`).", &[("from", Q::Int, "First offset wanted."), ("wait_ms", Q::Int, "Wait up to this many milliseconds for output (at most 30000).")], Reply::Bytes("application/octet-stream", "Terminal bytes.")),
    r("GET", "/api/v1/sessions/{id}/export", "The recording as asciicast v3.", None, Reply::Bytes("application/x-asciicast", "An asciicast v3 file.")),
    rq("GET", "/api/v1/sessions/{id}/recording", "The recording a window at a time (about 512 KiB of output and the marks among it), for a player that fetches as it plays.", &[("from", Q::Int, "The output offset to start at: 0, a window's `next`, or a screen's `x-drover-offset`.")], json(body::<api::RecordingWindow>())),
    rq("GET", "/api/v1/sessions/{id}/events", "A session's activity, oldest first.", EVENT_QUERY, List(body::<api::EventView>())),
    rq("GET", "/api/v1/sessions/{id}/terminal", "Joins a session's terminal (WebSocket: binary frames are bytes, text frames JSON ViewerEvent; the viewer sends keystrokes as binary frames and, as JSON, `{\"type\":\"resize\",\"cols\":C,\"rows\":R}`, `{\"type\":\"resync\"}` when it has fallen behind and, opened with `window`, `{\"type\":\"consumed\",\"bytes\":N}` as it draws what it was sent).", TERMINAL_QUERY, Reply::Socket("The terminal.")),
    rq("GET", "/api/v1/events", "The workspace's activity.", EVENT_QUERY, List(body::<api::EventView>())),
    rq("GET", "/api/v1/audit/export", "Every event in a window as JSON lines (owners and admins).", &[("since", Q::Needed, "From this time on (RFC 3339, or a date: midnight UTC)."), ("until", Q::Str, "Up to this time (exclusive).")], Reply::Bytes("application/x-ndjson", "One EventView per line.")),
];

/// Schemas the routes do not name but clients parse: the stream's and the terminal's messages.
const MESSAGES: [Body; 3] = [body::<api::StreamUpdate>(), body::<api::StreamChanged>(), body::<api::schema::ViewerEvent>()];

fn method(m: &str) -> HttpMethod {
    match m {
        "GET" => HttpMethod::Get,
        "POST" => HttpMethod::Post,
        "PUT" => HttpMethod::Put,
        "DELETE" => HttpMethod::Delete,
        "PATCH" => HttpMethod::Patch,
        other => unreachable!("no route uses {other}"),
    }
}

fn content(schema: RefOr<Schema>) -> Content {
    Content::new(Some(schema))
}

fn query_param((name, q, doc): Param) -> ParameterBuilder {
    let ty = match q {
        Q::Int => Type::Integer,
        Q::Num => Type::Number,
        Q::Bool => Type::Boolean,
        Q::Str | Q::Needed => Type::String,
    };
    let required = if matches!(q, Q::Needed) { Required::True } else { Required::False };
    ParameterBuilder::new()
        .name(name)
        .parameter_in(ParameterIn::Query)
        .required(required)
        .description(Some(doc))
        .schema(Some(ObjectBuilder::new().schema_type(ty)))
}

fn path_param(name: &str) -> ParameterBuilder {
    ParameterBuilder::new()
        .name(name)
        .parameter_in(ParameterIn::Path)
        .required(Required::True)
        .schema(Some(ObjectBuilder::new().schema_type(Type::String)))
}

/// The success answer of `reply`: status and response.
fn success(reply: Reply) -> (u16, ResponseBuilder) {
    let json_of = |s: RefOr<Schema>| ResponseBuilder::new().description("OK").content("application/json", content(s));
    match reply {
        Reply::Json(b) => (200, json_of(b.reference())),
        Reply::List(b) => (200, json_of(ArrayBuilder::new().items(b.reference()).into())),
        Reply::Created(b) => (201, json_of(b.reference()).description("Created")),
        Reply::Empty(status) => (status, ResponseBuilder::new().description("Done; no body.")),
        Reply::Bytes(mime, doc) => {
            (200, ResponseBuilder::new().description(doc).content(mime, content(ObjectBuilder::new().schema_type(Type::String).into())))
        }
        Reply::Document => (200, json_of(ObjectBuilder::new().into()).description("The OpenAPI document.")),
        Reply::Socket(doc) => (101, ResponseBuilder::new().description(doc)),
    }
}

/// The operation of one route.
fn operation(route: &Route) -> OperationBuilder {
    let segments: Vec<&str> = route.path.trim_start_matches("/api/v1/").split('/').collect();
    let id: Vec<String> = segments.iter().map(|s| s.trim_matches(['{', '}']).replace(['-', '.'], "_")).collect();
    let mut op = OperationBuilder::new().tag(segments[0]).summary(Some(route.summary)).operation_id(Some(format!(
        "{}_{}",
        route.method.to_lowercase(),
        id.join("_")
    )));
    for name in segments.iter().filter_map(|s| s.strip_prefix('{').and_then(|s| s.strip_suffix('}'))) {
        op = op.parameter(path_param(name));
    }
    for p in route.query {
        op = op.parameter(query_param(*p));
    }
    if let Some(b) = route.body {
        op = op.request_body(Some(
            RequestBodyBuilder::new().required(Some(Required::True)).content("application/json", content(b.reference())).build(),
        ));
    }
    let (status, ok) = success(route.reply);
    let error = ResponseBuilder::new()
        .description("An error: what was wrong and what to do.")
        .content("application/json", content(body::<api::ErrorBody>().reference()));
    op.responses(ResponsesBuilder::new().response(status.to_string(), ok).response("default", error))
}

/// Marks every property of a schema that is only ever sent (never read from a request) as
/// required: the server serialises every field, `null` included (no body skips one), so a
/// client may rely on each being there; `#[serde(default)]` only matters when reading.
fn always_sent(schema: &mut RefOr<Schema>) {
    match schema {
        RefOr::T(Schema::Object(o)) => o.required = o.properties.keys().cloned().collect(),
        RefOr::T(Schema::OneOf(one)) => one.items.iter_mut().for_each(always_sent),
        _ => {}
    }
}

/// Builds the document.
pub fn document() -> OpenApi {
    let mut items: BTreeMap<&str, Vec<&Route>> = BTreeMap::new();
    for route in ROUTES {
        items.entry(route.path).or_default().push(route);
    }
    let mut paths = PathsBuilder::new();
    for (path, routes) in items {
        let mut item = PathItem::new(method(routes[0].method), operation(routes[0]));
        for route in &routes[1..] {
            item.merge_operations(PathItem::new(method(route.method), operation(route)));
        }
        paths = paths.path(path, item);
    }
    let mut schemas = Vec::new();
    let used = ROUTES.iter().flat_map(|r| {
        let reply = match r.reply {
            Reply::Json(b) | Reply::List(b) | Reply::Created(b) => Some(b),
            Reply::Empty(_) | Reply::Bytes(..) | Reply::Document | Reply::Socket(_) => None,
        };
        [r.body, reply]
    });
    for b in used.flatten().chain(MESSAGES).chain([body::<api::ErrorBody>()]) {
        (b.collect)(&mut schemas);
    }
    let mut requests = Vec::new();
    for b in ROUTES.iter().filter_map(|r| r.body) {
        (b.collect)(&mut requests);
    }
    let requests: Vec<String> = requests.into_iter().map(|(name, _)| name).collect();
    for (name, schema) in &mut schemas {
        if !requests.contains(name) {
            always_sent(schema);
        }
    }
    let components = ComponentsBuilder::new().schemas_from_iter(schemas);
    let info = InfoBuilder::new()
        .title("Drover API")
        .version(env!("CARGO_PKG_VERSION"))
        .description(Some("Drover's HTTP API under /api/v1: JSON bodies; every error is an ErrorBody."));
    OpenApiBuilder::new().info(info).paths(paths).components(Some(components.build())).build()
}

/// The document as committed in `web/openapi.json`: pretty JSON and a final newline.
pub fn document_json() -> String {
    let mut text = serde_json::to_string_pretty(&document()).expect("the document serialises");
    text.push('\n');
    text
}

static DOCUMENT: LazyLock<String> = LazyLock::new(document_json);

/// `GET /api/v1/openapi.json`: the document (open to everyone, like health: it describes
/// the API, never a workspace).
pub async fn serve() -> axum::response::Response {
    ([(header::CONTENT_TYPE, "application/json")], DOCUMENT.as_str()).into_response()
}

/// `GET /api/v1/outcomes`: every outcome word with what it means (open to everyone).
pub async fn outcomes() -> Json<api::OutcomeGuide> {
    Json(api::OutcomeGuide::new())
}

#[cfg(test)]
#[path = "openapi_tests.rs"]
mod tests;

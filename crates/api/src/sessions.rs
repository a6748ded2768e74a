//! Sessions: starting one, listing, input, asking, text, events, spend; and the error body.

use drover_core::{Outcome, SandboxId, SandboxState, SessionId};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Every error response: what was wrong and what to do.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ErrorBody {
    /// One line for a person.
    pub error: String,
    /// A stable machine-readable code (`not_found`, `conflict`, …).
    pub code: String,
}

/// `POST /api/v1/sessions`: start a task-free session on a device.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct StartSession {
    /// The name of the device to run it on.
    pub device: String,
    /// Program and arguments.
    pub command: Vec<String>,
    /// Working directory on the device (default: a fresh private directory of the session
    /// when sandboxed, the device user's home directory when unconfined).
    pub cwd: Option<String>,
    /// A title for the sandbox.
    pub title: Option<String>,
    /// Terminal columns (default 120).
    pub cols: Option<u32>,
    /// Terminal rows (default 40).
    pub rows: Option<u32>,
    /// Start it outside the sandbox (owners and admins only; audited).
    #[serde(default)]
    pub unconfined: bool,
}

/// A session (run) as shown by list/show.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SessionView {
    /// The session's id, as routes, links and `drover session` name it.
    #[schema(value_type = crate::schema::SessionId)]
    pub id: SessionId,
    /// The sandbox it runs in (a task's sandbox holds one run per stage).
    #[schema(value_type = crate::schema::SandboxId)]
    pub sandbox: SandboxId,
    /// Its sandbox's own lifecycle state (distinct from this run's outcome).
    #[schema(value_type = crate::schema::SandboxState)]
    pub sandbox_state: SandboxState,
    /// Title (the sandbox's title or the command).
    pub title: String,
    /// The name of the device it runs on.
    pub device: String,
    /// The program and arguments it runs (secrets left out for callers who may not drop in).
    pub command: Vec<String>,
    /// Its working directory on the device.
    pub cwd: String,
    /// How the run stands or ended; `live` and `outcome_explanation` say what it means.
    #[schema(value_type = crate::schema::Outcome)]
    pub outcome: Outcome,
    /// Whether it has not ended yet (`starting` or `running`): clients ask this instead of
    /// listing live outcomes themselves.
    #[serde(default)]
    pub live: bool,
    /// What its outcome means ([`crate::OutcomeWords::explanation`]), for `show` and the
    /// session page.
    #[serde(default)]
    pub outcome_explanation: String,
    /// Exit code, when one was recorded.
    pub exit_code: Option<i32>,
    /// Why it ended.
    pub reason: Option<String>,
    /// When it was created.
    pub created_at: String,
    /// When its program started.
    pub started_at: Option<String>,
    /// When it ended.
    pub ended_at: Option<String>,
    /// How long it ran, in seconds (not for lost sessions).
    pub duration_secs: Option<f64>,
    /// Terminal columns now (the live size while it runs).
    pub cols: u16,
    /// Terminal rows now (the live size while it runs).
    pub rows: u16,
    /// Bytes of output stored.
    pub output_bytes: u64,
    /// Clients attached now.
    pub attached: u32,
    /// Who started it.
    pub started_by: String,
    /// The task it works, if any.
    #[serde(default)]
    #[schema(value_type = Option<crate::schema::TaskId>)]
    pub task: Option<drover_core::TaskId>,
    /// The stage it was staffed for.
    #[serde(default)]
    pub stage: Option<String>,
    /// The agent running it.
    #[serde(default)]
    pub agent: Option<String>,
    /// The repository its sandbox works in (task runs).
    #[serde(default)]
    pub repo: Option<String>,
    /// When it last printed anything (live sessions; RFC 3339).
    #[serde(default)]
    pub last_output_at: Option<String>,
    /// Its latest evidence of progress (a hand-off, comment, blocker or question);
    /// null means unknown: output alone is not progress.
    #[serde(default)]
    pub last_progress: Option<Progress>,
    /// The output length the device reported at the end: the recording is complete when
    /// `output_bytes` reaches it.
    #[serde(default)]
    pub final_offset: Option<u64>,
    /// When its recording and events were pruned after the retention window, if they were.
    #[serde(default)]
    pub pruned_at: Option<String>,
    /// Whether the caller may drop in: open the terminal, read the scrollback, send
    /// input, Stop (owners, admins and the operator of its agent).
    #[serde(default)]
    pub can_drop_in: bool,
    /// Its model spend, read from its harness's records (null until any was reported).
    #[serde(default)]
    pub spend: Option<SpendView>,
    /// Which of the workspace's skills reached it (task runs; null before any report).
    #[serde(default)]
    #[schema(value_type = Option<Vec<crate::schema::SkillReport>>)]
    pub skills: Option<Vec<drover_protocol::device::SkillReport>>,
}

/// One piece of evidence that a run moved its work on.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Progress {
    /// What it was, in the feed's words.
    pub label: String,
    /// When (RFC 3339).
    pub at: String,
}

/// A page of sessions.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SessionList {
    /// The sessions, newest first.
    pub sessions: Vec<SessionView>,
}

/// `POST /api/v1/sessions/{id}/input` and `/ask`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SendInput {
    /// The text (newlines and tabs kept; Enter is pressed after it).
    pub text: String,
    /// For ask: give up after this many seconds (default 60).
    pub timeout_secs: Option<f64>,
    /// For ask: the screen counts as still after this many milliseconds without change (default 1500).
    pub still_ms: Option<u64>,
}

/// Reply to input: what was recorded.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct InputReceipt {
    /// The session the input went to.
    #[schema(value_type = crate::schema::SessionId)]
    pub session: SessionId,
    /// The audit event's id.
    pub event: String,
    /// Whether it went as a bracketed paste.
    pub bracketed_paste: bool,
    /// Output offset at the moment it was written.
    pub offset: u64,
}

/// Reply to ask.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AskReply {
    /// What was recorded when the question was typed.
    pub receipt: InputReceipt,
    /// What the program printed in reply, as plain text.
    pub reply: String,
    /// True when the reply is complete: the session ended, the program showed its
    /// prompt again, or (a program that gives no such signal) its screen went still.
    /// False when the timeout came first: `reply` is what came so far.
    pub settled: bool,
    /// The session's outcome after the reply.
    #[schema(value_type = crate::schema::Outcome)]
    pub outcome: Outcome,
    /// What settled it: `ended`, `prompt` (the program is reading input again) or
    /// `still` (no output for the stillness time); null when not settled.
    #[serde(default)]
    pub settled_by: Option<String>,
    /// When not settled: what the reply was still waiting for, for a person.
    #[serde(default)]
    pub pending: Option<String>,
}

/// `GET /api/v1/sessions/{id}/text`: what the run printed, as plain text.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SessionText {
    /// The text, one string per terminal line, oldest first.
    pub lines: Vec<String>,
    /// Output offset the text reflects (pass as `after` to follow).
    pub offset: u64,
    /// The session's outcome.
    #[schema(value_type = crate::schema::Outcome)]
    pub outcome: Outcome,
}

/// One activity event.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct EventView {
    /// Sequence number (for resuming a stream).
    pub seq: i64,
    /// The event's id, stable across pages and exports.
    pub id: String,
    /// What happened, as a stable identifier (`session.started`, `task.advanced`, …).
    pub kind: String,
    /// The words the feed shows.
    pub label: String,
    /// Who did it.
    pub actor: String,
    /// The session it concerns.
    #[schema(value_type = Option<crate::schema::SessionId>)]
    pub session: Option<SessionId>,
    /// The task it concerns.
    #[serde(default)]
    pub task: Option<String>,
    /// The title of the session it concerns.
    #[serde(default)]
    pub session_title: Option<String>,
    /// The title of the task it concerns.
    #[serde(default)]
    pub task_title: Option<String>,
    /// The kind's own facts (exit code, text typed, stage, …), as recorded.
    #[schema(value_type = Option<std::collections::HashMap<String, serde_json::Value>>)]
    pub detail: serde_json::Value,
    /// When (RFC 3339).
    pub at: String,
}

/// A run's model spend (seed 001's Cost row).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SpendView {
    /// Generation plus cache reads, USD; null when a response was on a model with no
    /// price ("unknown": never a guessed number).
    pub total_usd: Option<f64>,
    /// Uncached input, output and cache writes, USD (priced responses).
    pub generation_usd: f64,
    /// Cache reads, USD (priced responses).
    pub cache_read_usd: f64,
    /// The same three amounts exactly, in nano-dollars.
    pub total_nano: Option<u64>,
    /// Generation, nano-dollars.
    pub generation_nano: u64,
    /// Cache reads, nano-dollars.
    pub cache_read_nano: u64,
    /// Model responses.
    pub turns: u64,
    /// Cache reads ÷ all prompt tokens, percent.
    pub cache_hit_pct: Option<f64>,
    /// Every token, split as priced.
    #[schema(value_type = crate::schema::Tokens)]
    pub tokens: drover_core::spend::Tokens,
    /// The model of the latest response (the current route).
    pub model: Option<String>,
    /// Per model: tokens and responses.
    #[schema(value_type = Vec<crate::schema::ModelUsage>)]
    pub models: Vec<drover_protocol::device::ModelUsage>,
}

/// One stretch of a session's recording (`GET /api/v1/sessions/{id}/recording`): what a
/// player fetches as it plays, a window at a time, instead of the whole file.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct RecordingWindow {
    /// Columns of the terminal the recording starts at.
    pub cols: u16,
    /// Rows of the terminal the recording starts at.
    pub rows: u16,
    /// The recording's length: µs from its start to its last event.
    pub length_us: u64,
    /// The output offset this window starts at.
    pub from: u64,
    /// The window's events, in order.
    pub events: Vec<RecordingEvent>,
    /// Where the next window starts (its `from`); absent when this one reaches the end.
    pub next: Option<u64>,
}

/// One event of a recording, with asciicast v3's codes.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct RecordingEvent {
    /// µs since the recording's start.
    pub t_us: u64,
    /// `o` output, `r` resize (`COLSxROWS`), `m` marker, `x` exit status.
    pub code: String,
    /// The output text, size, label or status.
    pub data: String,
}

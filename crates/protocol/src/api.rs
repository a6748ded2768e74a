//! JSON bodies of the HTTP API under `/api/v1`, shared by the server and the CLI.

use drover_core::{DeviceId, Outcome, SandboxId, SandboxState, SessionId};
use serde::{Deserialize, Serialize};

/// Every error response: what was wrong and what to do.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ErrorBody {
    /// One line for a person.
    pub error: String,
    /// A stable machine-readable code (`not_found`, `conflict`, …).
    pub code: String,
}

/// A device as listed.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DeviceView {
    /// Its id.
    pub id: DeviceId,
    /// Its name.
    pub name: String,
    /// Sessions it may run at once.
    pub slots: u32,
    /// Sessions live on it now.
    pub live_sessions: u32,
    /// Whether its daemon is connected now.
    pub connected: bool,
    /// When it last reported in (RFC 3339).
    pub last_contact_at: Option<String>,
}

/// `POST /api/v1/sessions`: start a task-free session on a device.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StartSession {
    /// Device name.
    pub device: String,
    /// Program and arguments.
    pub command: Vec<String>,
    /// Working directory on the device (default: the device's home directory).
    pub cwd: Option<String>,
    /// A title for the sandbox.
    pub title: Option<String>,
    /// Terminal columns (default 120).
    pub cols: Option<u32>,
    /// Terminal rows (default 40).
    pub rows: Option<u32>,
}

/// A session (run) as shown by list/show.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SessionView {
    /// Its id.
    pub id: SessionId,
    /// Its sandbox.
    pub sandbox: SandboxId,
    /// The sandbox's own state.
    pub sandbox_state: SandboxState,
    /// Title (the sandbox's title or the command).
    pub title: String,
    /// Device name.
    pub device: String,
    /// The command.
    pub command: Vec<String>,
    /// Working directory.
    pub cwd: String,
    /// The outcome.
    pub outcome: Outcome,
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
    /// Terminal size.
    pub cols: u16,
    /// Terminal size.
    pub rows: u16,
    /// Bytes of output stored.
    pub output_bytes: u64,
    /// Clients attached now.
    pub attached: u32,
    /// Who started it.
    pub started_by: String,
}

/// A page of sessions.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SessionList {
    /// The sessions, newest first.
    pub sessions: Vec<SessionView>,
}

/// `POST /api/v1/sessions/{id}/input` and `/ask`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SendInput {
    /// The text (newlines and tabs kept; Enter is pressed after it).
    pub text: String,
    /// For ask: give up after this many seconds (default 60).
    pub timeout_secs: Option<f64>,
    /// For ask: the screen counts as still after this many milliseconds without change (default 1500).
    pub still_ms: Option<u64>,
}

/// Reply to input: what was recorded.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct InputReceipt {
    /// The session.
    pub session: SessionId,
    /// The audit event's id.
    pub event: String,
    /// Whether it went as a bracketed paste.
    pub bracketed_paste: bool,
    /// Output offset at the moment it was written.
    pub offset: u64,
}

/// Reply to ask.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AskReply {
    /// The input receipt.
    pub receipt: InputReceipt,
    /// What the program printed in reply, as plain text.
    pub reply: String,
    /// True when the screen went still; false when the timeout came first.
    pub settled: bool,
    /// The session's outcome after the reply.
    pub outcome: Outcome,
}

/// `GET /api/v1/sessions/{id}/text`: what the run printed, as plain text.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SessionText {
    /// The lines.
    pub lines: Vec<String>,
    /// Output offset the text reflects (pass as `after` to follow).
    pub offset: u64,
    /// The session's outcome.
    pub outcome: Outcome,
}

/// One activity event.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EventView {
    /// Sequence number (for resuming a stream).
    pub seq: i64,
    /// Its id.
    pub id: String,
    /// Kind identifier.
    pub kind: String,
    /// The words the feed shows.
    pub label: String,
    /// Who did it.
    pub actor: String,
    /// The session it concerns.
    pub session: Option<SessionId>,
    /// Details.
    pub detail: serde_json::Value,
    /// When (RFC 3339).
    pub at: String,
}

/// `POST /api/v1/devices`: register a device.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AddDevice {
    /// Its name.
    pub name: String,
    /// Sessions it may run at once (default 4).
    pub slots: Option<u32>,
}

/// A registered device and its credential (shown once).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DeviceCredential {
    /// The device.
    pub device: DeviceView,
    /// Its credential, for `drover device --token`.
    pub token: String,
}

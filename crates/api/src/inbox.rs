//! The "Needs you" inbox: what runs wait on a person for, deciding a held tool call, and
//! what a run's hook hears back.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// One thing a run waits on a person for (`GET /api/v1/inbox`, `GET /api/v1/attention/{id}`).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct InboxItem {
    /// Its id (`att_…`), to decide it.
    pub id: String,
    /// `permission`, `idle`, `probably_waiting` or `question` (a task's open question).
    pub kind: String,
    /// What a list shows for it: `needs approval: Bash`, `waiting for its next
    /// instruction`, `probably waiting (a guess…)`, `waiting for an answer: …`.
    pub words: String,
    /// It is a guess from a still screen, not a fact the harness reported.
    pub guess: bool,
    /// The run that waits (`ses_…`), if one does.
    pub session: Option<String>,
    /// The run's title, as lists show it.
    pub title: String,
    /// The task, if the run works one (`tsk_…`).
    pub task: Option<String>,
    /// A held call's tool, when it is a name.
    pub tool: Option<String>,
    /// The command, file or input it would run or touch, the prompt or the question:
    /// only for those who may drop in to the run (questions: every member).
    pub subject: Option<String>,
    /// An edit's change (`-`/`+` lines), for those who may drop in.
    pub diff: Option<String>,
    /// The rules "Approve always" keeps on the task, for those who may drop in.
    pub always_rules: Vec<String>,
    /// The subject or diff was cut to fit: it cannot be approved here.
    pub clipped: bool,
    /// The decisions the caller may take now (`approve`, `approve_always`, `deny`);
    /// `answer` for a question; empty when it is answered in the terminal or by input.
    pub decisions: Vec<String>,
    /// The caller may open the run's terminal.
    pub can_drop_in: bool,
    /// When it began waiting (RFC 3339).
    pub raised_at: String,
    /// How it was decided, once it was.
    pub decision: Option<String>,
    /// Who decided it.
    pub decided_by: Option<String>,
    /// Why it closed (`decided`, `moved_on`, `replaced`, `ended`); None while it waits.
    pub closed: Option<String>,
}

/// `GET /api/v1/inbox`: everything waiting on a person in the workspace, newest first.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Inbox {
    /// The items, newest first.
    pub items: Vec<InboxItem>,
}

/// `POST /api/v1/attention/{id}/decide`: a person's decision on a held tool call.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct DecideBody {
    /// `approve`, `approve_always` or `deny`.
    pub decision: String,
    /// With `deny`: what the agent is told.
    #[serde(default)]
    pub message: Option<String>,
}

/// `GET /api/v1/attention/{id}/decision`: what a run's hook hears back.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct HookDecision {
    /// A decision was taken (false: still waiting when the wait ended, or closed
    /// without one: the harness asks in its own terminal then).
    pub decided: bool,
    /// The JSON the hook prints for the harness, when decided.
    #[schema(value_type = Option<Object>)]
    pub output: Option<serde_json::Value>,
    /// The item closed without a decision (the run moved on or ended): stop waiting.
    pub closed: bool,
}

/// `POST /api/v1/hooks/claude`: what became of a hook event.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct HookReceipt {
    /// The item raised for a held call: the hook waits on its decision.
    pub attention: Option<String>,
}

/// `POST /api/v1/hooks/claude`: a Claude Code hook event, as the harness handed it to
/// its hook (`hook_event_name`, `tool_name`, `tool_input`, …).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(transparent)]
#[schema(value_type = Object)]
pub struct HookEvent(pub serde_json::Value);

//! The Sessions view: sandboxes, their last runs, what needs attention, the live stream.

use crate::EventView;
use drover_core::{Outcome, SandboxId, SandboxState, SessionId};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// A sandbox's last run, as the sandbox list shows it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct LastRunView {
    /// The run's session id, to open its page or terminal.
    #[schema(value_type = crate::schema::SessionId)]
    pub id: SessionId,
    /// How it ended (or `running`).
    #[schema(value_type = crate::schema::Outcome)]
    pub outcome: Outcome,
    /// Exit code, when one was recorded.
    pub exit_code: Option<i32>,
    /// When it started.
    pub started_at: Option<String>,
    /// When it ended.
    pub ended_at: Option<String>,
    /// Whether the caller may drop in to it (owners, admins, its agent's operator).
    #[serde(default)]
    pub can_drop_in: bool,
}

/// One row of the sandbox list (seed 001 "The sandbox list"). Fields for tasks, agents,
/// repos and costs are null until those exist for the sandbox.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SandboxView {
    /// The sandbox's id, as searches and links name it.
    #[schema(value_type = crate::schema::SandboxId)]
    pub id: SandboxId,
    /// `remote` (a session started on a device) or `task`.
    pub kind: String,
    /// The task's type (`story`, `bug`, …) for a task sandbox.
    pub task_type: Option<String>,
    /// The task it works, for a task sandbox: the web app keeps the task totals of one
    /// task's rows in agreement when one of them refreshes.
    #[serde(default)]
    #[schema(value_type = Option<crate::schema::TaskId>)]
    pub task: Option<drover_core::TaskId>,
    /// The sandbox's own lifecycle state.
    #[schema(value_type = crate::schema::SandboxState)]
    pub state: SandboxState,
    /// Whether a run is live in it now (the green dot).
    pub live: bool,
    /// Its most recent run, for the row's outcome badge (null before any run).
    pub last_run: Option<LastRunView>,
    /// Runs it has held.
    pub runs: u32,
    /// The agent running (or that last ran) in it.
    pub agent: Option<String>,
    /// What it works on: `<Stage> - <task title>`, or its own title.
    pub working_on: String,
    /// The name of the device it lives on.
    pub device: String,
    /// The repository its worktree is checked out from.
    pub repo: Option<String>,
    /// Model spend so far, in USD (null when no run reported usage, or when unknown).
    pub cost_usd: Option<f64>,
    /// True when a run used a model with no price: the cost is unknown.
    #[serde(default)]
    pub cost_unknown: bool,
    /// Lifetime spend of its task, in USD.
    pub task_cost_usd: Option<f64>,
    /// True when the task's lifetime spend is unknown (a model with no price).
    #[serde(default)]
    pub task_cost_unknown: bool,
    /// A warning on the row (e.g. "task done").
    pub warning: Option<String>,
    /// What its live run waits on a person for (`needs approval: Bash`, `waiting for
    /// its next instruction`, `probably waiting (a guess…)`), newest; None when nothing.
    #[serde(default)]
    pub waiting: Option<String>,
    /// When it was created.
    pub created_at: String,
}

/// A batch of the sandbox list.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SandboxList {
    /// The sandboxes, newest first.
    pub sandboxes: Vec<SandboxView>,
    /// Pass as `cursor` for the next batch; null at the end. A search of one or two
    /// characters (which no index serves) looks through a bounded number of sandboxes per
    /// batch, so its batch may hold fewer than `limit` rows, or none, and still have a
    /// cursor: keep going until it is null.
    pub next_cursor: Option<String>,
}

/// A live session flagged stale (seed 001 "Sessions needing attention").
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AttentionRow {
    /// The flagged session, to open or stop it.
    #[schema(value_type = crate::schema::SessionId)]
    pub session: SessionId,
    /// What the row shows for it (its sandbox's title or its command).
    pub title: String,
    /// Its outcome (live).
    #[schema(value_type = crate::schema::Outcome)]
    pub outcome: Outcome,
    /// Why it was flagged (`Device silent`, `Sandbox retired`).
    pub flag: String,
    /// The flag's one-line explanation (the badge's hover text).
    #[serde(default)]
    pub explanation: String,
    /// The agent running it (null: a person's task-free session).
    pub agent: Option<String>,
    /// The name of the device it runs on.
    pub device: String,
    /// When the device last reported in.
    pub last_contact_at: Option<String>,
}

/// `GET /api/v1/overview`: the counts the sidebar and the Sessions page header show.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Overview {
    /// Sessions running right now (the sidebar badge).
    pub running: u32,
    /// Sessions set up and waiting for a device slot.
    pub queued: u32,
    /// Sessions still open on tasks that already finished.
    pub on_finished_tasks: u32,
    /// Live sessions flagged stale.
    pub stale: u32,
    /// Open tasks waiting on a person (the Tasks badge).
    #[serde(default)]
    pub tasks_needing_a_person: u32,
    /// What waits on a person in the inbox: held calls, finished turns, guesses and
    /// open questions (the Needs you badge).
    #[serde(default)]
    pub needs_you: u32,
    /// The flagged sessions.
    pub attention: Vec<AttentionRow>,
}

/// One message of the live update stream (`GET /api/v1/stream`, server-sent events).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct StreamUpdate {
    /// The activity event that caused it.
    pub event: EventView,
    /// Sessions running right now, after it.
    pub running: u32,
}

/// `event: changed` of the live update stream: something changed that has no activity
/// event (a session's output or state); clients reload what shows it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct StreamChanged {
    /// The session that changed, when one did.
    #[schema(value_type = Option<crate::schema::SessionId>)]
    pub session: Option<SessionId>,
    /// Sessions running right now, after it.
    pub running: u32,
}

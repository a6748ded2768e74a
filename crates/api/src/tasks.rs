//! Tasks, their workflow stages, turns and notes.

use crate::{EventView, SessionView};
use drover_core::{SandboxId, SessionId};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// `PATCH /api/v1/tasks/{id}`: what to change (before the task's first run).
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
pub struct UpdateTask {
    /// The branch it starts from and merges into.
    #[serde(default)]
    pub base: Option<String>,
}

/// One stage of a workflow.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct StageView {
    /// The stage's name (`plan`, `code`, `review`, …), as hand-offs and lists name it.
    pub stage: String,
    /// The agent pinned to it; null: a human works it.
    pub assignee: Option<String>,
    /// Whether handing it off merges the task's branch into the repository's base
    /// branch; when filing, null means "if the stage is called `merge`".
    #[serde(default)]
    pub merge: Option<bool>,
    /// Its run is prepared but starts only when a person activates it.
    #[serde(default)]
    pub activate: Option<bool>,
}

/// `GET`/`PUT /api/v1/workflow`: the stages new tasks get unless they name their own.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct WorkflowView {
    /// The stages, in order.
    pub stages: Vec<StageView>,
}

/// `POST /api/v1/tasks`: file a task.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct CreateTask {
    /// Type (`story`, `bug`, `chore`, …; default `story`).
    pub kind: Option<String>,
    /// One line saying what the task is, for lists.
    pub title: String,
    /// The full brief its runs are given.
    #[serde(default)]
    pub body: String,
    /// The name of the repository its runs work in.
    pub repo: String,
    /// Stages (default plan, code, review, merge, verify), with assignees.
    pub workflow: Option<Vec<StageView>>,
    /// Pin this agent to every stage that has no assignee.
    pub agent: Option<String>,
    /// Stop its runs once its lifetime spend reaches this many USD.
    #[serde(default)]
    pub spend_cap_usd: Option<f64>,
}

/// A task as shown.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct TaskView {
    /// The task's id, as routes, links and `drover task` name it.
    #[schema(value_type = crate::schema::TaskId)]
    pub id: drover_core::TaskId,
    /// Its type (`story`, `bug`, `chore`, …), as the list's badge shows.
    pub kind: String,
    /// One line saying what the task is, for lists.
    pub title: String,
    /// The full brief its runs are given.
    pub body: String,
    /// Where it stands overall: `open`, `done`, `cancelled` or `abandoned`.
    pub status: String,
    /// The name of the repository its runs work in.
    pub repo: String,
    /// Its stages, in order, with their assignees.
    pub workflow: Vec<StageView>,
    /// The current stage (null once finished).
    pub stage: Option<String>,
    /// Runs on the current stage so far.
    pub attempts: u32,
    /// Waiting for a slot since.
    pub queued_at: Option<String>,
    /// Why a human must look.
    pub flagged: Option<String>,
    /// The task's branch, once it has a sandbox.
    pub branch: Option<String>,
    /// The sandbox its runs share (null before its first run).
    #[schema(value_type = Option<crate::schema::SandboxId>)]
    pub sandbox: Option<SandboxId>,
    /// The sandbox's lifecycle state (`ready`, `active`, `completing`, `done`, …).
    pub sandbox_state: Option<String>,
    /// Its run that is live now, to open its terminal (null when none is).
    #[schema(value_type = Option<crate::schema::SessionId>)]
    pub live_session: Option<SessionId>,
    /// Whose turn it is.
    #[serde(default)]
    pub turn: TurnView,
    /// Whether the caller may drop in to its live run.
    #[serde(default)]
    pub can_drop_in: bool,
    /// Its lifetime spend (all runs, every sandbox), USD; null without usage or unknown.
    #[serde(default)]
    pub cost_usd: Option<f64>,
    /// True when a run used a model with no price.
    #[serde(default)]
    pub cost_unknown: bool,
    /// Its lifetime spend cap, USD.
    #[serde(default)]
    pub spend_cap_usd: Option<f64>,
    /// Who filed it.
    pub created_by: String,
    /// When it was filed (RFC 3339).
    pub created_at: String,
}

/// Whose turn it is on a task (`drover_core::turn`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
pub struct TurnView {
    /// `person`, `answer`, `blocked`, `waiting` (its run waits on a person), `flagged`,
    /// `stalled`, `ready`, `queued`, `starting`, `running` or `finished`.
    pub kind: String,
    /// What a list says: `needs a person: review`, `waiting for an answer: …`.
    pub label: String,
    /// Whether a person must act before the task moves on.
    pub needs_person: bool,
}

/// A blocker or a question.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct NoteView {
    /// The note's id, to answer, resolve or wait on it.
    pub id: String,
    /// `blocker` or `question`.
    pub kind: String,
    /// What it says.
    pub text: String,
    /// The answer (questions).
    pub answer: Option<String>,
    /// Who resolved or answered it.
    pub closed_by: Option<String>,
    /// When it was resolved or answered (RFC 3339).
    pub closed_at: Option<String>,
    /// Who filed it.
    pub created_by: String,
}

/// `GET /api/v1/tasks/{id}`: a task with its runs, notes and activity.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct TaskDetail {
    /// The task's own row, as the list shows it.
    pub task: TaskView,
    /// Every run, oldest first (its Workflow view).
    pub sessions: Vec<SessionView>,
    /// Blockers and questions.
    pub notes: Vec<NoteView>,
    /// Its Activity timeline.
    pub events: Vec<EventView>,
    /// Which of the Sessions panel's controls the caller may use.
    #[serde(default)]
    pub controls: TaskControls,
    /// Allow rules people kept for the task ("Approve always"): its runs start with
    /// them.
    #[serde(default)]
    pub allow_rules: Vec<String>,
    /// Why it is not moving, in one line, with the command that moves it on ("Why
    /// isn't my task moving?").
    #[serde(default)]
    pub why: String,
}

/// Which task controls the caller may use (the UI shows only these).
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, ToSchema)]
pub struct TaskControls {
    /// Finish session (the stage's pinned assignee's operator, or an admin).
    pub finish: bool,
    /// Mark done, Abandon (owners and admins).
    pub retire: bool,
    /// Cancel task (who filed it, or an admin).
    pub cancel: bool,
}

/// A text body (hand-off note, comment, blocker, question, answer).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct TextBody {
    /// What the person or agent wrote.
    #[serde(default)]
    pub text: String,
}

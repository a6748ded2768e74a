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
    /// When an admin revoked its credential (it is refused until added again).
    #[serde(default)]
    pub revoked_at: Option<String>,
    /// What it does with its runs, as its daemon last said (None: it never said).
    #[serde(default)]
    pub sandbox: Option<drover_core::confinement::Offer>,
}

/// `POST /api/v1/sessions`: start a task-free session on a device.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StartSession {
    /// Device name.
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
    /// The task it works, if any.
    #[serde(default)]
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
    pub skills: Option<Vec<crate::device::SkillReport>>,
}

/// One piece of evidence that a run moved its work on.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Progress {
    /// What it was, in the feed's words.
    pub label: String,
    /// When (RFC 3339).
    pub at: String,
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
    /// True when the reply is complete: the session ended, the program showed its
    /// prompt again, or (a program that gives no such signal) its screen went still.
    /// False when the timeout came first: `reply` is what came so far.
    pub settled: bool,
    /// The session's outcome after the reply.
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
    /// The task it concerns.
    #[serde(default)]
    pub task: Option<String>,
    /// The title of the session it concerns.
    #[serde(default)]
    pub session_title: Option<String>,
    /// The title of the task it concerns.
    #[serde(default)]
    pub task_title: Option<String>,
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

/// A registered device and its one-time enrollment token (shown once).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DeviceEnrollment {
    /// The device.
    pub device: DeviceView,
    /// The one-time enrollment token, for `drover device --token` on the device: the
    /// daemon trades it for its own credential on first connect.
    pub enrollment_token: String,
    /// When the enrollment token stops working (RFC 3339).
    pub expires_at: String,
}

/// `POST /api/v1/devices/enroll`: a device trades its enrollment token for a credential.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Enroll {
    /// The enrollment token (`dre_…`).
    pub token: String,
    /// The device's name, as registered.
    pub name: String,
}

/// The device's own credential (kept by the daemon; never shown to a person).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DeviceCredential {
    /// The device's name.
    pub name: String,
    /// Its credential.
    pub token: String,
}

/// `GET /api/v1/me`: who is signed in.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MeView {
    /// The member's name.
    pub name: String,
    /// Their role (`owner`, `admin`, `member`).
    pub role: String,
}

/// `POST /api/v1/login-links`: a one-time sign-in link.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LoginLink {
    /// The link's path on the server (`/login/…`); join it to the server's URL.
    pub path: String,
    /// When it stops working (RFC 3339).
    pub expires_at: String,
}

/// A sandbox's last run, as the sandbox list shows it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LastRunView {
    /// The session.
    pub id: SessionId,
    /// How it ended (or `running`).
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
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SandboxView {
    /// The sandbox.
    pub id: SandboxId,
    /// `remote` (a session started on a device) or `task`.
    pub kind: String,
    /// The task's type (`story`, `bug`, …) for a task sandbox.
    pub task_type: Option<String>,
    /// The task it works, for a task sandbox: the web app keeps the task totals of one
    /// task's rows in agreement when one of them refreshes.
    #[serde(default)]
    pub task: Option<drover_core::TaskId>,
    /// The sandbox's own lifecycle state.
    pub state: SandboxState,
    /// Whether a run is live in it now (the green dot).
    pub live: bool,
    /// Its last run.
    pub last_run: Option<LastRunView>,
    /// Runs it has held.
    pub runs: u32,
    /// The agent running (or that last ran) in it.
    pub agent: Option<String>,
    /// What it works on: `<Stage> - <task title>`, or its own title.
    pub working_on: String,
    /// The device's name.
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
    /// When it was created.
    pub created_at: String,
}

/// A batch of the sandbox list.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SandboxList {
    /// The sandboxes, newest first.
    pub sandboxes: Vec<SandboxView>,
    /// Pass as `cursor` for the next batch; null at the end.
    pub next_cursor: Option<String>,
}

/// A live session flagged stale (seed 001 "Sessions needing attention").
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AttentionRow {
    /// The session.
    pub session: SessionId,
    /// Its title.
    pub title: String,
    /// Its outcome (live).
    pub outcome: Outcome,
    /// Why it was flagged (`Device silent`, `Sandbox retired`).
    pub flag: String,
    /// The flag's one-line explanation (the badge's hover text).
    #[serde(default)]
    pub explanation: String,
    /// The agent running it.
    pub agent: Option<String>,
    /// The device.
    pub device: String,
    /// When the device last reported in.
    pub last_contact_at: Option<String>,
}

/// `GET /api/v1/overview`: the counts the sidebar and the Sessions page header show.
#[derive(Debug, Clone, Serialize, Deserialize)]
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
    /// The flagged sessions.
    pub attention: Vec<AttentionRow>,
}

/// One message of the live update stream (`GET /api/v1/stream`, server-sent events).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StreamUpdate {
    /// The activity event that caused it.
    pub event: EventView,
    /// Sessions running right now, after it.
    pub running: u32,
}

/// `POST /api/v1/repos`: register a repository and the device clone that has it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AddRepo {
    /// The repository's name in the workspace.
    pub name: String,
    /// A device that has a clone.
    pub device: String,
    /// The clone's path on that device.
    pub path: String,
    /// The branch tasks start from and merge into; None: the branch the clone has
    /// checked out.
    #[serde(default)]
    pub base: Option<String>,
}

/// A repository as listed.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RepoView {
    /// Its name.
    pub name: String,
    /// Devices that have it: (device, path).
    pub devices: Vec<(String, String)>,
    /// The branch tasks start from and merge into (None: the clone's checked-out branch).
    pub base: Option<String>,
}

/// `PATCH /api/v1/tasks/{id}`: what to change (before the task's first run).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct UpdateTask {
    /// The branch it starts from and merges into.
    #[serde(default)]
    pub base: Option<String>,
}

/// The answer to `POST /api/v1/repos`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RepoAdded {
    /// The device checked its clone (it exists, is a git repository, has the base branch).
    pub checked: bool,
    /// Why it could not be checked (the device is offline): runs then find out.
    #[serde(default)]
    pub unchecked_because: Option<String>,
}

/// `POST /api/v1/agents`: register an agent (the caller is its operator).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CreateAgent {
    /// Its name.
    pub name: String,
    /// `claude`, `codex`, `gemini`, `aider`, `opencode`, `goose` or `custom`.
    pub harness: String,
    /// Model.
    pub model: Option<String>,
    /// Provider.
    pub provider: Option<String>,
    /// Account.
    pub account: Option<String>,
    /// Reasoning effort.
    pub effort: Option<String>,
    /// For `custom`: the command, `{prompt}` replaced in each argument.
    #[serde(default)]
    pub template: Vec<String>,
}

/// An agent as listed.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AgentView {
    /// Its name.
    pub name: String,
    /// Its operator (the member who created it).
    pub operator: String,
    /// Its harness.
    pub harness: String,
    /// Model.
    pub model: Option<String>,
    /// Provider.
    pub provider: Option<String>,
    /// Account.
    #[serde(default)]
    pub account: Option<String>,
    /// Reasoning effort.
    #[serde(default)]
    pub effort: Option<String>,
}

/// What an agent's or a repository's runs cost, all of them.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct PageSpend {
    /// USD; null without usage, or when a run used a model with no price.
    pub cost_usd: Option<f64>,
    /// True when a run used a model with no price.
    pub cost_unknown: bool,
}

/// `GET /api/v1/agents/{name}`: an agent's page.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AgentPage {
    /// The agent.
    pub agent: AgentView,
    /// Its runs: live ones first, then newest first (at most [`PAGE_SESSIONS`]).
    pub sessions: Vec<SessionView>,
    /// True when it has more runs than shown.
    pub more_sessions: bool,
    /// The tasks it is pinned to or has run, newest first.
    pub tasks: Vec<TaskView>,
    /// What all its runs cost.
    pub spend: PageSpend,
}

/// `GET /api/v1/repos/{name}`: a repository's page.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RepoPage {
    /// The repository, with the devices that have it.
    pub repo: RepoView,
    /// Runs in it: live ones first, then newest first (at most [`PAGE_SESSIONS`]).
    pub sessions: Vec<SessionView>,
    /// True when it has more runs than shown.
    pub more_sessions: bool,
    /// Its tasks, newest first.
    pub tasks: Vec<TaskView>,
    /// What all its runs cost.
    pub spend: PageSpend,
}

/// The most runs an agent's or a repository's page lists.
pub const PAGE_SESSIONS: usize = 200;

/// One stage of a workflow.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StageView {
    /// Its name.
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
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkflowView {
    /// The stages, in order.
    pub stages: Vec<StageView>,
}

/// `POST /api/v1/tasks`: file a task.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CreateTask {
    /// Type (`story`, `bug`, `chore`, …; default `story`).
    pub kind: Option<String>,
    /// Title.
    pub title: String,
    /// Body.
    #[serde(default)]
    pub body: String,
    /// The repository.
    pub repo: String,
    /// Stages (default plan, code, review, merge, verify), with assignees.
    pub workflow: Option<Vec<StageView>>,
    /// Pin this agent to every stage that has no assignee.
    pub agent: Option<String>,
    /// Stop its runs once its lifetime spend reaches this many USD.
    #[serde(default)]
    pub spend_cap_usd: Option<f64>,
}

/// `PUT /api/v1/spend/cap` and `PUT /api/v1/tasks/{id}/spend-cap`: a cap in USD, or null
/// for none.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SpendCap {
    /// The cap, USD (the workspace's per calendar month, a task's over its life).
    pub usd: Option<f64>,
}

/// A model's price in USD per million tokens, as people write prices.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PriceView {
    /// The model id (or the start of dated ids: `claude-sonnet-4-5` prices `claude-sonnet-4-5-20250929`).
    pub model: String,
    /// Uncached input.
    pub input: f64,
    /// Output.
    pub output: f64,
    /// Cache writes, 5-minute (default: the input price).
    pub cache_write_5m: Option<f64>,
    /// Cache writes, 1-hour (default: the 5-minute price).
    pub cache_write_1h: Option<f64>,
    /// Cache reads (default: the input price).
    pub cache_read: Option<f64>,
    /// Above this many prompt tokens in one response, `long` prices apply to all of it.
    #[serde(default)]
    pub long_context_above: Option<u64>,
    /// The long-context prices: [input, output, cache write 5 m, cache write 1 h, cache read].
    #[serde(default)]
    pub long: Option<[f64; 5]>,
}

/// `GET /api/v1/prices` and `PUT /api/v1/prices`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Prices {
    /// The workspace's own prices (they win over the shipped ones).
    pub overrides: Vec<PriceView>,
    /// The shipped table (read-only).
    #[serde(default)]
    pub shipped: Vec<PriceView>,
}

/// A skill's file, as sent to and from the API (text: skills are instructions).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SkillFile {
    /// Its path inside the skill's folder (`SKILL.md`, `refs/style.md`).
    pub path: String,
    /// Its text.
    pub content: String,
}

/// `PUT /api/v1/skills/{name}`: a skill's files.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PutSkill {
    /// Its files; one is `SKILL.md`.
    pub files: Vec<SkillFile>,
}

/// `GET /api/v1/skills`: one enabled skill.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SkillView {
    /// Its name.
    pub name: String,
    /// Its files' paths.
    pub files: Vec<String>,
    /// Its size, bytes.
    pub bytes: usize,
    /// Who added or last changed it.
    pub created_by: String,
    /// When.
    pub updated_at: String,
}

/// One row of the spend view.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SpendRowView {
    /// The agent, model or day (`2026-11-30`).
    pub key: String,
    /// USD of priced responses.
    pub usd: f64,
    /// True when some responses were on models with no price (the cost is then a floor).
    pub unknown: bool,
    /// Model responses.
    pub turns: u64,
    /// Tokens.
    pub tokens: u64,
    /// Runs.
    pub runs: u64,
}

/// `GET /api/v1/spend`: the workspace's spend by agent, model and day.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SpendReport {
    /// From when (RFC 3339).
    pub since: String,
    /// The workspace's monthly cap, USD.
    pub cap_usd: Option<f64>,
    /// What this calendar month's runs cost, USD.
    pub month_usd: f64,
    /// By agent, dearest first.
    pub by_agent: Vec<SpendRowView>,
    /// By model, most tokens first.
    pub by_model: Vec<SpendRowView>,
    /// By day, oldest first.
    pub by_day: Vec<SpendRowView>,
}

/// A task as shown.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TaskView {
    /// Its id.
    pub id: drover_core::TaskId,
    /// Type.
    pub kind: String,
    /// Title.
    pub title: String,
    /// Body.
    pub body: String,
    /// `open`, `done`, `cancelled`, `abandoned`.
    pub status: String,
    /// The repository.
    pub repo: String,
    /// Its stages.
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
    /// Its sandbox.
    pub sandbox: Option<SandboxId>,
    /// The sandbox's lifecycle state (`ready`, `active`, `completing`, `done`, …).
    pub sandbox_state: Option<String>,
    /// Its live run.
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
    /// When.
    pub created_at: String,
}

/// Whose turn it is on a task (`drover_core::turn`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct TurnView {
    /// `person`, `answer`, `blocked`, `flagged`, `stalled`, `queued`, `starting`,
    /// `running` or `finished`.
    pub kind: String,
    /// What a list says: `needs a person: review`, `waiting for an answer: …`.
    pub label: String,
    /// Whether a person must act before the task moves on.
    pub needs_person: bool,
}

/// A blocker or a question.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NoteView {
    /// Its id.
    pub id: String,
    /// `blocker` or `question`.
    pub kind: String,
    /// What it says.
    pub text: String,
    /// The answer (questions).
    pub answer: Option<String>,
    /// Who resolved or answered it.
    pub closed_by: Option<String>,
    /// When.
    pub closed_at: Option<String>,
    /// Who filed it.
    pub created_by: String,
}

/// `GET /api/v1/tasks/{id}`: a task with its runs, notes and activity.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TaskDetail {
    /// The task.
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
}

/// Which task controls the caller may use (the UI shows only these).
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct TaskControls {
    /// Finish session (the stage's pinned assignee's operator, or an admin).
    pub finish: bool,
    /// Mark done, Abandon (owners and admins).
    pub retire: bool,
    /// Cancel task (who filed it, or an admin).
    pub cancel: bool,
}

/// A text body (hand-off note, comment, blocker, question, answer).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TextBody {
    /// The text.
    #[serde(default)]
    pub text: String,
}

/// `POST /api/v1/webhooks`: register an endpoint.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CreateWebhook {
    /// Where deliveries go (http or https).
    pub url: String,
    /// The event types it receives (`session.started`, `session.ended`, `session.lost`,
    /// `task.stage_advanced`, `task.input_requested`, `task.finished`).
    pub events: Vec<String>,
}

/// A webhook endpoint as listed (its secrets are shown only when made).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WebhookView {
    /// Its id.
    pub id: drover_core::WebhookId,
    /// Where deliveries go.
    pub url: String,
    /// The event types it receives.
    pub events: Vec<String>,
    /// Why it is disabled, if it is (a 410 answer).
    pub disabled_reason: Option<String>,
    /// Secrets signing now (more than one during a rotation).
    pub signing_secrets: u32,
    /// Who registered it.
    pub created_by: String,
    /// When.
    pub created_at: String,
}

/// An endpoint with a secret just made (on creation or rotation): the only time the
/// secret is shown.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WebhookSecretView {
    /// The endpoint.
    pub webhook: WebhookView,
    /// The new secret (`whsec_…`), for the receiver's verification.
    pub secret: String,
}

/// One delivery in an endpoint's log.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DeliveryView {
    /// The message id (`webhook-id`, the receiver's idempotency key).
    pub id: drover_core::MessageId,
    /// The event type.
    pub event_type: String,
    /// `pending`, `delivered` or `failed`.
    pub state: String,
    /// Attempts so far.
    pub attempts: u32,
    /// When the next attempt is due.
    pub next_attempt_at: Option<String>,
    /// The receiver's last HTTP status.
    pub last_status: Option<u16>,
    /// The last failure.
    pub last_error: Option<String>,
    /// When it was queued.
    pub created_at: String,
    /// When it was delivered.
    pub delivered_at: Option<String>,
    /// The body sent.
    pub payload: serde_json::Value,
}

/// `GET /api/v1/members`: one member of the workspace.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MemberView {
    /// Their id.
    pub id: drover_core::MemberId,
    /// The name they sign in with.
    pub name: String,
    /// Their role (`owner`, `admin`, `member`).
    pub role: String,
    /// When they joined.
    pub created_at: String,
    /// Whether they have set a password (can sign in with `drover login` or the web form).
    pub has_password: bool,
}

/// `PUT /api/v1/members/{name}/role`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SetRole {
    /// The new role (`owner`, `admin`, `member`).
    pub role: String,
}

/// `POST /api/v1/invites`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CreateInvite {
    /// The role the new member gets (default `member`).
    pub role: Option<String>,
    /// How long the invitation works, in hours (default 72, at most 720).
    pub hours: Option<u32>,
}

/// An invitation, with its code (shown once).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct InviteView {
    /// Its id.
    pub id: drover_core::InviteId,
    /// The role the new member gets.
    pub role: String,
    /// The secret code.
    pub code: String,
    /// The invitation page's path on the server (`/invite/…`); join it to the server's URL.
    pub path: String,
    /// When it stops working (RFC 3339).
    pub expires_at: String,
}

/// `GET /api/v1/invites`: an invitation not yet used (never its code).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PendingInviteView {
    /// Its id.
    pub id: drover_core::InviteId,
    /// The role it gives.
    pub role: String,
    /// Who sent it.
    pub created_by: String,
    /// When.
    pub created_at: String,
    /// Until when it works.
    pub expires_at: String,
}

/// `GET /api/v1/invites/{code}`: what an invitation offers (for the invitation page).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct InviteInfo {
    /// The role the new member gets.
    pub role: String,
}

/// `POST /api/v1/invites/{code}/accept`: joins the workspace.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AcceptInvite {
    /// The invitation's code (`dri_…`), as its page read it from the link's fragment.
    pub code: String,
    /// The name to sign in with.
    pub name: String,
    /// The password to sign in with.
    pub password: String,
}

/// `POST /api/v1/login` (browser) and `POST /api/v1/login/token` (`drover login`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Login {
    /// The member's name.
    pub name: String,
    /// Their password.
    pub password: String,
    /// For a token: what it is for (shown in `drover token list`).
    pub label: Option<String>,
}

/// `PUT /api/v1/me/password`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SetPassword {
    /// The current password (needed once one is set).
    pub current: Option<String>,
    /// The new password.
    pub password: String,
    /// Revoke every personal API token too (all but the one making the change).
    #[serde(default)]
    pub revoke_tokens: bool,
}

/// `POST /api/v1/invites/lookup`: an invitation's code, to learn the role it gives.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct InviteCode {
    /// The code (`dri_…`).
    pub code: String,
}

/// `POST /api/v1/login/link`: a one-time sign-in link's code, as its page read it from the
/// link's fragment.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RedeemLoginLink {
    /// The code (`drl_…`).
    pub code: String,
}

/// `POST /api/v1/tokens`: a new personal token for the caller.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CreateToken {
    /// What it is for.
    pub label: String,
}

/// A personal API token (never the token itself, except once in [`IssuedToken`]).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TokenView {
    /// Its id.
    pub id: drover_core::TokenId,
    /// What it is for.
    pub label: String,
    /// When it was issued.
    pub created_at: String,
    /// When it was last used (to the minute).
    pub last_used_at: Option<String>,
    /// When it was revoked.
    pub revoked_at: Option<String>,
}

/// A newly issued personal token (the token is shown once).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IssuedToken {
    /// The token as listed.
    pub info: TokenView,
    /// The secret, for `Authorization: Bearer`.
    pub token: String,
    /// Who it signs in.
    pub member: MeView,
}

/// A run's model spend (seed 001's Cost row).
#[derive(Debug, Clone, Serialize, Deserialize)]
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
    pub tokens: drover_core::spend::Tokens,
    /// The model of the latest response (the current route).
    pub model: Option<String>,
    /// Per model: tokens and responses.
    pub models: Vec<crate::device::ModelUsage>,
}

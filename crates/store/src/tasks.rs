//! Tasks, their stages and the runs that staff them; repositories and agents.

use drover_core::activity::EventKind;
use drover_core::harness::Earlier;
use drover_core::sandbox::{SandboxEvent, SandboxTransitionError};
use drover_core::task::{after_hand_off, stage_agent, AfterHandOff, TaskStatus};
use drover_core::turn::{turn, Turn, TurnFacts};
use drover_core::{AgentId, DeviceId, MemberId, NoteId, RepoId, SandboxId, SandboxState, SessionId, TaskId, WorkspaceId};
use serde::{Deserialize, Serialize};
use sqlx::Row;

use crate::events::{insert, NewEvent};
use crate::sessions::{session_row, SESSION_SELECT};
use crate::{now, parse_id, Result, SessionRow, Store, StoreError};

/// One stage of a task's workflow and who it is pinned to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StageSpec {
    /// The stage's name (`plan`, `code`, …).
    pub stage: String,
    /// The agent pinned to it (by name); `human` ([`drover_core::task::HUMAN`]): people
    /// work it, always; None: nobody was put on it (a person works it).
    pub assignee: Option<String>,
    /// Handing it off merges the task's branch into the repository's base branch.
    #[serde(default)]
    pub merge: bool,
    /// Its run is prepared (worktree made, skills placed) but starts only when a person
    /// activates it (seed 001's Activate).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub activate: bool,
}

impl StageSpec {
    /// The agent that works it, if an agent does.
    pub fn agent(&self) -> Option<&str> {
        drover_core::task::stage_agent(self.assignee.as_deref())
    }
}

/// A task to file.
#[derive(Debug, Clone)]
pub struct NewTask {
    /// The workspace.
    pub workspace: WorkspaceId,
    /// Its type (`story`, `bug`, `chore`, …).
    pub kind: String,
    /// Title.
    pub title: String,
    /// Body, in plain language.
    pub body: String,
    /// The repository it works in.
    pub repo: RepoId,
    /// Its stages.
    pub workflow: Vec<StageSpec>,
    /// Who filed it.
    pub created_by: String,
}

/// A task as stored.
#[derive(Debug, Clone)]
pub struct TaskRow {
    /// Its id.
    pub id: TaskId,
    /// The workspace.
    pub workspace: WorkspaceId,
    /// Its type.
    pub kind: String,
    /// Title.
    pub title: String,
    /// Body.
    pub body: String,
    /// Status.
    pub status: TaskStatus,
    /// Its repository.
    pub repo: RepoId,
    /// The repository's name.
    pub repo_name: String,
    /// The branch it starts from and merges into: fixed when its first sandbox is made
    /// (the repository's at that time); None: the clone's checked-out branch.
    pub repo_base: Option<String>,
    /// Its stages.
    pub workflow: Vec<StageSpec>,
    /// The current stage, by index.
    pub stage_index: usize,
    /// Runs on the current stage so far.
    pub attempts: u32,
    /// Waiting for a slot since.
    pub queued_at: Option<String>,
    /// Why a human must look, if flagged.
    pub flagged: Option<String>,
    /// Its sandbox, once it has one.
    pub sandbox: Option<SandboxId>,
    /// The sandbox's device, once it has one.
    pub sandbox_device: Option<DeviceId>,
    /// The sandbox's branch.
    pub branch: Option<String>,
    /// The sandbox's lifecycle state.
    pub sandbox_state: Option<SandboxState>,
    /// Who filed it.
    pub created_by: String,
    /// When.
    pub created_at: String,
    /// What its runs cost, in every sandbox (nano-dollars): None without usage,
    /// Some(None) when unknown (a model with no price).
    pub cost: Option<Option<u64>>,
    /// Its lifetime spend cap (nano-dollars).
    pub spend_cap: Option<u64>,
    /// Its oldest open note: (`question` or `blocker`, its text).
    pub open_note: Option<(String, String)>,
    /// Its live run's outcome (`starting` or `running`) while it has not handed off.
    pub live_outcome: Option<String>,
    /// The stage a person last activated, by index.
    pub activated_stage: Option<usize>,
}

impl TaskRow {
    /// Whose turn it is on the task.
    pub fn turn(&self) -> Turn<'_> {
        let mut facts = turn_facts(self.status, self.stage(), &self.flagged, &self.open_note, self.queued_at.is_some(), &self.live_outcome);
        facts.awaiting_activation = self.awaits_activation();
        turn(&facts)
    }

    /// Whether its current stage starts only when a person activates it, and has not
    /// been: its run is prepared, not started.
    pub fn awaits_activation(&self) -> bool {
        awaits_activation(self.stage(), self.stage_index, self.activated_stage)
    }

    /// The current stage (None once the task is done).
    pub fn stage(&self) -> Option<&StageSpec> {
        if self.status == TaskStatus::Open {
            self.workflow.get(self.stage_index)
        } else {
            None
        }
    }
}

/// Whether the current stage (`stage`, at `stage_index`) starts only on Activate and
/// has not been activated (`activated`: the stage a person last activated).
fn awaits_activation(stage: Option<&StageSpec>, stage_index: usize, activated: Option<usize>) -> bool {
    stage.is_some_and(|s| s.activate) && activated != Some(stage_index)
}

/// What deciding whose turn it is needs, from a task's stored columns.
fn turn_facts<'a>(
    status: TaskStatus,
    stage: Option<&'a StageSpec>,
    flagged: &'a Option<String>,
    note: &'a Option<(String, String)>,
    queued: bool,
    live: &'a Option<String>,
) -> TurnFacts<'a> {
    TurnFacts {
        status,
        flagged: flagged.as_deref(),
        open_note: note.as_ref().map(|(k, t)| (k.as_str(), t.as_str())),
        stage: stage.map(|s| (s.stage.as_str(), stage_agent(s.assignee.as_deref()).is_some())),
        queued,
        live: live.as_deref().map(|o| o == "running"),
        awaiting_activation: false,
    }
}

/// Something earlier work on a task left for its next stage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EarlierNote {
    /// A stage's hand-off note.
    HandOff {
        /// The stage handed off.
        stage: String,
        /// Who handed it off.
        by: String,
        /// What they wrote.
        note: String,
    },
    /// A question a person answered.
    Answer {
        /// The question.
        question: String,
        /// The answer.
        answer: String,
    },
}

impl EarlierNote {
    /// The note as the first message of a stage carries it.
    pub fn as_earlier(&self) -> Earlier<'_> {
        match self {
            EarlierNote::HandOff { stage, by, note } => Earlier::HandOff { stage, by, note },
            EarlierNote::Answer { question, answer } => Earlier::Answer { question, answer },
        }
    }
}

/// A registered agent.
#[derive(Debug, Clone)]
pub struct AgentRow {
    /// Its id.
    pub id: AgentId,
    /// Its name.
    pub name: String,
    /// The member who created it.
    pub operator: MemberId,
    /// The operator's name.
    pub operator_name: String,
    /// Its harness (`claude`, …).
    pub harness: String,
    /// Execution route.
    pub route: drover_core::harness::Route,
    /// Command template (custom harness).
    pub template: Vec<String>,
}

/// A blocker or a question.
#[derive(Debug, Clone)]
pub struct NoteRow {
    /// Its id.
    pub id: NoteId,
    /// Its task.
    pub task: TaskId,
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
    /// When.
    pub created_at: String,
}

/// A run to start for a task's current stage.
#[derive(Debug, Clone)]
pub struct NewTaskSession {
    /// The task.
    pub task: TaskId,
    /// The device (its sandbox's, when it has one).
    pub device: DeviceId,
    /// The agent staffing the stage.
    pub agent: AgentId,
    /// The stage being staffed (by index): nothing is created if the task has moved on.
    pub stage_index: usize,
    /// Program and arguments.
    pub command: Vec<String>,
    /// The worktree it runs in.
    pub cwd: String,
    /// The task's branch.
    pub branch: String,
    /// Terminal size.
    pub cols: u16,
    /// Terminal size.
    pub rows: u16,
    /// It resumes the conversation of the stage's lost previous run.
    pub resumed: bool,
}

/// The columns whose turn it is needs beyond the task's own: its oldest open note and
/// its live run's outcome.
macro_rules! turn_columns {
    () => {
        concat!(
            "(SELECT n.kind FROM notes n WHERE n.task_id = t.id AND n.closed_at IS NULL ORDER BY n.created_at, n.id LIMIT 1) AS note_kind, ",
            "(SELECT n.text FROM notes n WHERE n.task_id = t.id AND n.closed_at IS NULL ORDER BY n.created_at, n.id LIMIT 1) AS note_text, ",
            "(SELECT s.outcome FROM sessions s WHERE s.task_id = t.id AND s.outcome IN ('starting', 'running') AND s.handed_off IS NULL ORDER BY s.created_at DESC LIMIT 1) AS live_outcome"
        )
    };
}

pub(crate) const TASK_SELECT: &str = concat!(
    "SELECT t.*, r.name AS repo_name, COALESCE(b.base_branch, t.base_branch, r.base_branch) AS repo_base, b.device_id AS sandbox_device, b.branch AS branch, b.state AS sandbox_state, ",
    cost_text!("x.task_id = t.id"),
    " AS t_cost, ",
    turn_columns!(),
    " FROM tasks t JOIN repos r ON r.id = t.repo_id LEFT JOIN sandboxes b ON b.id = t.sandbox_id"
);

pub(crate) fn task_row(r: &sqlx::any::AnyRow) -> Result<TaskRow> {
    let status: String = r.get("status");
    let workflow: String = r.get("workflow");
    Ok(TaskRow {
        id: parse_id(r.get("id"))?,
        workspace: parse_id(r.get("workspace_id"))?,
        kind: r.get("type"),
        title: r.get("title"),
        body: r.get("body"),
        status: TaskStatus::parse(&status).ok_or_else(|| StoreError::Corrupt(format!("task status {status}")))?,
        repo: parse_id(r.get("repo_id"))?,
        repo_name: r.get("repo_name"),
        repo_base: r.get("repo_base"),
        workflow: serde_json::from_str(&workflow).map_err(|e| StoreError::Corrupt(e.to_string()))?,
        stage_index: r.get::<i64, _>("stage_index") as usize,
        attempts: r.get::<i64, _>("attempts") as u32,
        queued_at: r.get("queued_at"),
        flagged: r.get("flagged"),
        sandbox: r.get::<Option<String>, _>("sandbox_id").as_deref().map(parse_id).transpose()?,
        sandbox_device: r.get::<Option<String>, _>("sandbox_device").as_deref().map(parse_id).transpose()?,
        branch: r.get("branch"),
        sandbox_state: r.get::<Option<String>, _>("sandbox_state").as_deref().and_then(SandboxState::parse),
        created_by: r.get("created_by"),
        created_at: r.get("created_at"),
        cost: crate::sandboxes::cost_sum(r.get("t_cost")),
        spend_cap: r.get::<Option<i64>, _>("spend_cap").filter(|c| *c >= 0).map(|c| c as u64),
        open_note: open_note(r),
        live_outcome: r.get("live_outcome"),
        activated_stage: r.get::<Option<i64>, _>("activated_stage").map(|i| i as usize),
    })
}

fn open_note(r: &sqlx::any::AnyRow) -> Option<(String, String)> {
    Some((r.get::<Option<String>, _>("note_kind")?, r.get::<Option<String>, _>("note_text").unwrap_or_default()))
}

fn agent_row(r: &sqlx::any::AnyRow) -> Result<AgentRow> {
    let template: String = r.get("template");
    Ok(AgentRow {
        id: parse_id(r.get("id"))?,
        name: r.get("name"),
        operator: parse_id(r.get("operator_id"))?,
        operator_name: r.get("operator_name"),
        harness: r.get("harness"),
        route: drover_core::harness::Route {
            model: r.get("model"),
            provider: r.get("provider"),
            account: r.get("account"),
            effort: r.get("effort"),
        },
        template: serde_json::from_str(&template).map_err(|e| StoreError::Corrupt(e.to_string()))?,
    })
}

fn note_row(r: &sqlx::any::AnyRow) -> Result<NoteRow> {
    Ok(NoteRow {
        id: parse_id(r.get("id"))?,
        task: parse_id(r.get("task_id"))?,
        kind: r.get("kind"),
        text: r.get("text"),
        answer: r.get("answer"),
        closed_by: r.get("closed_by"),
        closed_at: r.get("closed_at"),
        created_by: r.get("created_by"),
        created_at: r.get("created_at"),
    })
}

/// A repository with the devices that have it: (device name, clone path).
#[derive(Debug, Clone)]
pub struct RepoRow {
    /// Its id.
    pub id: RepoId,
    /// Its name.
    pub name: String,
    /// Devices that have it, with the path of their clone.
    pub devices: Vec<(String, String)>,
    /// The branch its tasks start from and merge into.
    pub base: Option<String>,
}

/// Why a task's base branch cannot be changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BaseRefused {
    /// The task has finished.
    Finished,
    /// A run of it has started: its branch was made from the old base.
    Started,
}

/// Why a hand-off was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HandOffRefused {
    /// The task is not open.
    TaskFinished(TaskStatus),
    /// The session is not the live run of the task's current stage.
    NotCurrent,
}

/// Makes a new `ready` sandbox for the task on `device`, on `branch`, starting from the
/// task's base; returns its id.
async fn insert_task_sandbox(
    conn: &mut sqlx::AnyConnection,
    task: &TaskRow,
    device: DeviceId,
    cwd: &str,
    branch: &str,
    at: &str,
) -> Result<SandboxId> {
    let b = SandboxId::new();
    sqlx::query(
        "INSERT INTO sandboxes (id, workspace_id, device_id, kind, title, cwd, state, created_at, updated_at, task_id, repo_id, branch, base_branch)
         VALUES ($1, $2, $3, 'task', $4, $5, 'ready', $6, $6, $7, $8, $9, $10)",
    )
    .bind(b.to_string())
    .bind(task.workspace.to_string())
    .bind(device.to_string())
    .bind(&task.title)
    .bind(cwd)
    .bind(at)
    .bind(task.id.to_string())
    .bind(task.repo.to_string())
    .bind(branch)
    .bind(&task.repo_base)
    .execute(&mut *conn)
    .await?;
    Ok(b)
}

/// Whether stage `stage_index` of the task is its current stage and may be handed off
/// by `session` (its live, not yet handed-off run) or, with None, by a person (no run
/// is live).
async fn hand_off_check(
    conn: &mut sqlx::AnyConnection,
    t: &TaskRow,
    stage_index: usize,
    session: Option<SessionId>,
) -> Result<std::result::Result<(), HandOffRefused>> {
    if t.status != TaskStatus::Open {
        return Ok(Err(HandOffRefused::TaskFinished(t.status)));
    }
    if t.stage_index != stage_index {
        return Ok(Err(HandOffRefused::NotCurrent));
    }
    let stage = &t.workflow[t.stage_index].stage;
    let current = match session {
        Some(session) => {
            sqlx::query_scalar::<_, i64>(
                "SELECT COUNT(*) FROM sessions
             WHERE id = $1 AND task_id = $2 AND stage = $3 AND outcome IN ('starting', 'running') AND handed_off IS NULL",
            )
            .bind(session.to_string())
            .bind(t.id.to_string())
            .bind(stage)
            .fetch_one(&mut *conn)
            .await?
                == 1
        }
        None => {
            sqlx::query_scalar::<_, i64>("SELECT COUNT(*) FROM sessions WHERE task_id = $1 AND outcome IN ('starting', 'running')")
                .bind(t.id.to_string())
                .fetch_one(&mut *conn)
                .await?
                == 0
        }
    };
    Ok(if current { Ok(()) } else { Err(HandOffRefused::NotCurrent) })
}

impl Store {
    /// Registers a repository (or returns the one with that name); a `base` given sets
    /// the branch its tasks start from and merge into.
    pub async fn add_repo(&self, workspace: WorkspaceId, name: &str, base: Option<&str>) -> Result<RepoId> {
        let mut tx = self.write().await?;
        let id = match sqlx::query("SELECT id FROM repos WHERE workspace_id = $1 AND name = $2")
            .bind(workspace.to_string())
            .bind(name)
            .fetch_optional(&mut *tx)
            .await?
        {
            Some(r) => parse_id(r.get("id"))?,
            None => {
                let id = RepoId::new();
                sqlx::query("INSERT INTO repos (id, workspace_id, name, created_at) VALUES ($1, $2, $3, $4)")
                    .bind(id.to_string())
                    .bind(workspace.to_string())
                    .bind(name)
                    .bind(now())
                    .execute(&mut *tx)
                    .await?;
                id
            }
        };
        if let Some(base) = base {
            sqlx::query("UPDATE repos SET base_branch = $1 WHERE id = $2").bind(base).bind(id.to_string()).execute(&mut *tx).await?;
        }
        tx.commit().await?;
        Ok(id)
    }

    /// The workspace's default workflow, if one was set.
    pub async fn workspace_workflow(&self, workspace: WorkspaceId) -> Result<Option<Vec<StageSpec>>> {
        let w: Option<String> = sqlx::query_scalar("SELECT workflow FROM workspaces WHERE id = $1")
            .bind(workspace.to_string())
            .fetch_optional(&self.pool)
            .await?
            .flatten();
        w.map(|w| serde_json::from_str(&w).map_err(|e| StoreError::Corrupt(e.to_string()))).transpose()
    }

    /// Sets the workspace's default workflow (for tasks filed from now on).
    pub async fn set_workspace_workflow(&self, workspace: WorkspaceId, stages: &[StageSpec]) -> Result<()> {
        sqlx::query("UPDATE workspaces SET workflow = $1 WHERE id = $2")
            .bind(serde_json::to_string(stages).expect("serialises"))
            .bind(workspace.to_string())
            .execute(&self.writes)
            .await?;
        Ok(())
    }

    /// A repository by name.
    pub async fn repo_by_name(&self, workspace: WorkspaceId, name: &str) -> Result<Option<RepoId>> {
        let r = sqlx::query("SELECT id FROM repos WHERE workspace_id = $1 AND name = $2")
            .bind(workspace.to_string())
            .bind(name)
            .fetch_optional(&self.pool)
            .await?;
        r.map(|r| parse_id(r.get("id"))).transpose()
    }

    /// Repositories with the devices that have them: (id, name, [(device name, path)]).
    pub async fn list_repos(&self, workspace: WorkspaceId) -> Result<Vec<RepoRow>> {
        let rows = sqlx::query(
            "SELECT r.id, r.name, r.base_branch, d.name AS device, dr.path FROM repos r
             LEFT JOIN device_repos dr ON dr.repo_id = r.id LEFT JOIN devices d ON d.id = dr.device_id
             WHERE r.workspace_id = $1 ORDER BY r.name, d.name",
        )
        .bind(workspace.to_string())
        .fetch_all(&self.pool)
        .await?;
        let mut out: Vec<RepoRow> = Vec::new();
        for r in rows {
            let id: RepoId = parse_id(r.get("id"))?;
            if out.last().map(|l| l.id) != Some(id) {
                out.push(RepoRow { id, name: r.get("name"), devices: Vec::new(), base: r.get("base_branch") });
            }
            if let (Some(d), Some(p)) = (r.get::<Option<String>, _>("device"), r.get::<Option<String>, _>("path")) {
                out.last_mut().expect("pushed").devices.push((d, p));
            }
        }
        Ok(out)
    }

    /// Declares that `device` has `repo` cloned at `path`.
    pub async fn set_device_repo(&self, device: DeviceId, repo: RepoId, path: &str) -> Result<()> {
        sqlx::query("INSERT INTO device_repos (device_id, repo_id, path) VALUES ($1, $2, $3) ON CONFLICT (device_id, repo_id) DO UPDATE SET path = excluded.path")
            .bind(device.to_string())
            .bind(repo.to_string())
            .bind(path)
            .execute(&self.writes)
            .await?;
        Ok(())
    }

    /// Where `device` has `repo`, if it has it.
    pub async fn device_repo_path(&self, device: DeviceId, repo: RepoId) -> Result<Option<String>> {
        let r = sqlx::query("SELECT path FROM device_repos WHERE device_id = $1 AND repo_id = $2")
            .bind(device.to_string())
            .bind(repo.to_string())
            .fetch_optional(&self.pool)
            .await?;
        Ok(r.map(|r| r.get("path")))
    }

    /// Registers an agent.
    pub async fn create_agent(
        &self,
        workspace: WorkspaceId,
        name: &str,
        operator: MemberId,
        harness: &str,
        route: &drover_core::harness::Route,
        template: &[String],
    ) -> Result<Option<AgentId>> {
        let id = AgentId::new();
        let done = sqlx::query(
            "INSERT INTO agents (id, workspace_id, name, operator_id, harness, provider, account, model, effort, template, created_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) ON CONFLICT (workspace_id, name) DO NOTHING",
        )
        .bind(id.to_string())
        .bind(workspace.to_string())
        .bind(name)
        .bind(operator.to_string())
        .bind(harness)
        .bind(&route.provider)
        .bind(&route.account)
        .bind(&route.model)
        .bind(&route.effort)
        .bind(serde_json::to_string(template).expect("strings serialise"))
        .bind(now())
        .execute(&self.writes)
        .await?;
        Ok((done.rows_affected() == 1).then_some(id))
    }

    /// An agent by name.
    pub async fn agent_by_name(&self, workspace: WorkspaceId, name: &str) -> Result<Option<AgentRow>> {
        let r = sqlx::query(
            "SELECT a.*, m.name AS operator_name FROM agents a JOIN members m ON m.id = a.operator_id WHERE a.workspace_id = $1 AND a.name = $2",
        )
        .bind(workspace.to_string())
        .bind(name)
        .fetch_optional(&self.pool)
        .await?;
        r.as_ref().map(agent_row).transpose()
    }

    /// The workspace's agents.
    pub async fn list_agents(&self, workspace: WorkspaceId) -> Result<Vec<AgentRow>> {
        let rows = sqlx::query(
            "SELECT a.*, m.name AS operator_name FROM agents a JOIN members m ON m.id = a.operator_id WHERE a.workspace_id = $1 ORDER BY a.name",
        )
        .bind(workspace.to_string())
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(agent_row).collect()
    }

    /// Files a task; its first stage waits for a slot when an agent is pinned to it.
    pub async fn create_task(&self, t: &NewTask) -> Result<TaskId> {
        let (id, at) = (TaskId::new(), now());
        let queued = t.workflow.first().is_some_and(|s| s.agent().is_some()).then(|| at.clone());
        let mut tx = self.write().await?;
        sqlx::query(
            "INSERT INTO tasks (id, workspace_id, type, title, body, status, repo_id, workflow, queued_at, created_by, created_at, updated_at)
             VALUES ($1, $2, $3, $4, $5, 'open', $6, $7, $8, $9, $10, $11)",
        )
        .bind(id.to_string())
        .bind(t.workspace.to_string())
        .bind(&t.kind)
        .bind(&t.title)
        .bind(&t.body)
        .bind(t.repo.to_string())
        .bind(serde_json::to_string(&t.workflow).expect("serialises"))
        .bind(&queued)
        .bind(&t.created_by)
        .bind(&at)
        .bind(&at)
        .execute(&mut *tx)
        .await?;
        let detail = serde_json::json!({ "title": t.title, "type": t.kind });
        let e = NewEvent {
            workspace: t.workspace,
            session: None,
            task: Some(id),
            kind: EventKind::TaskCreated,
            actor: t.created_by.clone(),
            detail,
        };
        self.commit_with_event(tx, &e).await?;
        Ok(id)
    }

    /// One task.
    pub async fn task(&self, id: TaskId) -> Result<Option<TaskRow>> {
        let r = sqlx::query(&format!("{TASK_SELECT} WHERE t.id = $1")).bind(id.to_string()).fetch_optional(&self.pool).await?;
        r.as_ref().map(task_row).transpose()
    }

    /// A workspace's tasks, newest first.
    pub async fn list_tasks(&self, workspace: WorkspaceId, limit: i64) -> Result<Vec<TaskRow>> {
        let rows = sqlx::query(&format!("{TASK_SELECT} WHERE t.workspace_id = $1 ORDER BY t.created_at DESC, t.id DESC LIMIT $2"))
            .bind(workspace.to_string())
            .bind(limit)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(task_row).collect()
    }

    /// Tasks whose current stage waits for a slot, first queued first: a batch of
    /// `limit` after the (queued at, id) position `after`.
    pub async fn queued_tasks(&self, after: Option<(&str, TaskId)>, limit: i64) -> Result<Vec<TaskRow>> {
        let (at, id) = after.map(|(a, i)| (a.to_string(), i.to_string())).unwrap_or_default();
        let rows = sqlx::query(&format!(
            "{TASK_SELECT} WHERE t.queued_at IS NOT NULL AND t.status = 'open' AND (t.queued_at, t.id) > ($1, $2)
             ORDER BY t.queued_at, t.id LIMIT $3"
        ))
        .bind(at)
        .bind(id)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(task_row).collect()
    }

    /// Counts for the Sessions page header: (queued for a slot, live sessions on finished tasks).
    pub async fn task_counts(&self, workspace: WorkspaceId) -> Result<(u32, u32)> {
        let q: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM tasks WHERE workspace_id = $1 AND queued_at IS NOT NULL AND status = 'open'")
            .bind(workspace.to_string())
            .fetch_one(&self.pool)
            .await?;
        let f: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM sessions s JOIN tasks t ON t.id = s.task_id
             WHERE s.workspace_id = $1 AND s.outcome IN ('starting', 'running') AND t.status != 'open'",
        )
        .bind(workspace.to_string())
        .fetch_one(&self.pool)
        .await?;
        Ok((q as u32, f as u32))
    }

    /// How many of a workspace's open tasks wait on a person (the sidebar's count).
    pub async fn tasks_needing_a_person(&self, workspace: WorkspaceId) -> Result<u32> {
        let rows = sqlx::query(concat!(
            "SELECT t.workflow, t.stage_index, t.queued_at, t.flagged, t.activated_stage, ",
            turn_columns!(),
            " FROM tasks t WHERE t.workspace_id = $1 AND t.status = 'open'"
        ))
        .bind(workspace.to_string())
        .fetch_all(&self.pool)
        .await?;
        let mut n = 0;
        for r in &rows {
            let workflow: Vec<StageSpec> =
                serde_json::from_str(&r.get::<String, _>("workflow")).map_err(|e| StoreError::Corrupt(e.to_string()))?;
            let stage = workflow.get(r.get::<i64, _>("stage_index") as usize);
            let (flagged, note, live) = (r.get::<Option<String>, _>("flagged"), open_note(r), r.get::<Option<String>, _>("live_outcome"));
            let queued = r.get::<Option<String>, _>("queued_at").is_some();
            let mut facts = turn_facts(TaskStatus::Open, stage, &flagged, &note, queued, &live);
            let activated = r.get::<Option<i64>, _>("activated_stage").map(|i| i as usize);
            facts.awaiting_activation = awaits_activation(stage, r.get::<i64, _>("stage_index") as usize, activated);
            n += u32::from(turn(&facts).needs_person());
        }
        Ok(n)
    }

    /// Puts the task's stage `stage_index` in the queue for a slot again, if the task is
    /// still open, unflagged and at that stage. Unless `counted`, the run that ended
    /// does not count among the stage's runs (its device lost it).
    pub async fn queue_task(&self, id: TaskId, stage_index: usize, counted: bool) -> Result<()> {
        sqlx::query(
            "UPDATE tasks SET queued_at = COALESCE(queued_at, $1), updated_at = $2,
                 attempts = CASE WHEN $5 = 1 OR attempts = 0 THEN attempts ELSE attempts - 1 END
             WHERE id = $3 AND status = 'open' AND stage_index = $4 AND flagged IS NULL",
        )
        .bind(now())
        .bind(now())
        .bind(id.to_string())
        .bind(stage_index as i64)
        .bind(i64::from(counted))
        .execute(&self.writes)
        .await?;
        Ok(())
    }

    /// Takes the task's stage off the queue for a slot.
    pub async fn unqueue_task(&self, id: TaskId) -> Result<()> {
        sqlx::query("UPDATE tasks SET queued_at = NULL, updated_at = $1 WHERE id = $2")
            .bind(now())
            .bind(id.to_string())
            .execute(&self.writes)
            .await?;
        Ok(())
    }

    /// Launch session: a fresh run for the current stage (clears a flag and the count of
    /// attempts).
    pub async fn relaunch_task(&self, id: TaskId) -> Result<()> {
        sqlx::query("UPDATE tasks SET queued_at = $1, flagged = NULL, attempts = 0, updated_at = $2 WHERE id = $3 AND status = 'open'")
            .bind(now())
            .bind(now())
            .bind(id.to_string())
            .execute(&self.writes)
            .await?;
        Ok(())
    }

    /// Flags the task for a human (no more automatic restaffing of this stage).
    pub async fn flag_task(&self, id: TaskId, why: &str, actor: &str) -> Result<()> {
        let mut tx = self.write().await?;
        let r = sqlx::query("UPDATE tasks SET flagged = $1, queued_at = NULL, updated_at = $2 WHERE id = $3 RETURNING workspace_id")
            .bind(why)
            .bind(now())
            .bind(id.to_string())
            .fetch_optional(&mut *tx)
            .await?;
        let Some(r) = r else { return Ok(()) };
        let workspace: WorkspaceId = parse_id(r.get("workspace_id"))?;
        let e = NewEvent {
            workspace,
            session: None,
            task: Some(id),
            kind: EventKind::TaskFlagged,
            actor: actor.into(),
            detail: serde_json::json!({ "reason": why }),
        };
        self.commit_with_event(tx, &e).await?;
        Ok(())
    }

    /// Creates the run for a task's current stage: its sandbox (created on first use, on
    /// `device`, on the task's branch), the session, and takes the task off the queue.
    /// None (nothing created) unless the task is still open, waiting, unflagged, at
    /// `n.stage_index` and without a live run: the check and the writes share one lock.
    pub async fn create_task_session(&self, n: &NewTaskSession, actor: &str) -> Result<Option<(SessionId, SandboxId)>> {
        let mut tx = self.write().await?;
        // The device's slot is claimed here, under the write lock: two schedulers (or a
        // scheduler and a Launch, on any replicas) cannot both take its last free slot.
        let claimed = sqlx::query(
            "UPDATE tasks SET queued_at = NULL, attempts = attempts + 1 WHERE id = $1 AND status = 'open' AND stage_index = $2
             AND queued_at IS NOT NULL AND flagged IS NULL
             AND NOT EXISTS (SELECT 1 FROM sessions WHERE task_id = $1 AND outcome IN ('starting', 'running'))
             AND (SELECT COUNT(*) FROM sessions WHERE device_id = $3 AND outcome IN ('starting', 'running'))
                 < (SELECT slots FROM devices WHERE id = $3)",
        )
        .bind(n.task.to_string())
        .bind(n.stage_index as i64)
        .bind(n.device.to_string())
        .execute(&mut *tx)
        .await?;
        if claimed.rows_affected() != 1 {
            return Ok(None);
        }
        let t = sqlx::query(&format!("{TASK_SELECT} WHERE t.id = $1")).bind(n.task.to_string()).fetch_one(&mut *tx).await?;
        let task = task_row(&t)?;
        let stage = task.stage().map(|s| s.stage.clone()).ok_or_else(|| StoreError::Corrupt("staffing a finished task".into()))?;
        let (id, at) = (SessionId::new(), now());
        let open_sandbox = match task.sandbox {
            Some(b) => {
                let state: String =
                    sqlx::query_scalar("SELECT state FROM sandboxes WHERE id = $1").bind(b.to_string()).fetch_one(&mut *tx).await?;
                match SandboxState::parse(&state).map(|s| s.apply(SandboxEvent::RunStarted)) {
                    Some(Ok(_)) => Some(b),
                    // Closed for good (Mark done): a new run gets a fresh sandbox on the same branch.
                    Some(Err(e)) if e.from.is_finished() => None,
                    _ => {
                        let why = format!("the task's sandbox is {state} (after Finish session): Mark done closes it, then Launch session starts a fresh one");
                        sqlx::query("UPDATE tasks SET flagged = $1, attempts = attempts - 1 WHERE id = $2")
                            .bind(&why)
                            .bind(task.id.to_string())
                            .execute(&mut *tx)
                            .await?;
                        let e = NewEvent {
                            workspace: task.workspace,
                            session: None,
                            task: Some(task.id),
                            kind: EventKind::TaskFlagged,
                            actor: actor.into(),
                            detail: serde_json::json!({ "reason": why }),
                        };
                        self.commit_with_event(tx, &e).await?;
                        return Ok(None);
                    }
                }
            }
            None => None,
        };
        let sandbox = match open_sandbox {
            Some(b) => b,
            None => insert_task_sandbox(&mut tx, &task, n.device, &n.cwd, &n.branch, &at).await?,
        };
        sqlx::query(
            "INSERT INTO sessions (id, workspace_id, sandbox_id, device_id, command, cwd, cols, rows, outcome, created_by, created_at, task_id, stage, agent_id, operator_id)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'starting', $9, $10, $11, $12, $13, (SELECT operator_id FROM agents WHERE id = $13))",
        )
        .bind(id.to_string())
        .bind(task.workspace.to_string())
        .bind(sandbox.to_string())
        .bind(n.device.to_string())
        .bind(serde_json::to_string(&n.command).expect("strings serialise"))
        .bind(&n.cwd)
        .bind(n.cols as i64)
        .bind(n.rows as i64)
        .bind(actor)
        .bind(&at)
        .bind(task.id.to_string())
        .bind(&stage)
        .bind(n.agent.to_string())
        .execute(&mut *tx)
        .await?;
        Store::add_start_size(&mut tx, id, n.cols, n.rows).await?;
        sqlx::query(
            "UPDATE sandboxes SET state = 'active', live = 1, runs = runs + 1, last_session_id = $1, updated_at = $2 WHERE id = $3",
        )
        .bind(id.to_string())
        .bind(&at)
        .bind(sandbox.to_string())
        .execute(&mut *tx)
        .await?;
        sqlx::query("UPDATE tasks SET sandbox_id = $1, updated_at = $2 WHERE id = $3")
            .bind(sandbox.to_string())
            .bind(&at)
            .bind(task.id.to_string())
            .execute(&mut *tx)
            .await?;
        // The execution route the run starts on (seed 002), from its agent.
        let route = sqlx::query("SELECT harness, provider, account, model, effort FROM agents WHERE id = $1")
            .bind(n.agent.to_string())
            .fetch_optional(&mut *tx)
            .await?
            .map(|r| {
                serde_json::json!({
                    "harness": r.get::<String, _>("harness"),
                    "provider": r.get::<Option<String>, _>("provider"),
                    "account": r.get::<Option<String>, _>("account"),
                    "model": r.get::<Option<String>, _>("model"),
                    "effort": r.get::<Option<String>, _>("effort"),
                })
            });
        let detail = serde_json::json!({
            "command": n.command, "cwd": n.cwd, "stage": stage, "attempt": task.attempts, "resumed": n.resumed, "route": route,
        });
        let e = NewEvent {
            workspace: task.workspace,
            session: Some(id),
            task: Some(task.id),
            kind: EventKind::SessionStarted,
            actor: actor.into(),
            detail,
        };
        self.commit_with_event(tx, &e).await?;
        Ok(Some((id, sandbox)))
    }

    /// The live run of a task, if any.
    pub async fn live_task_session(&self, task: TaskId) -> Result<Option<SessionRow>> {
        let r = sqlx::query(&format!(
            "{SESSION_SELECT} WHERE s.task_id = $1 AND s.outcome IN ('starting', 'running') ORDER BY s.created_at DESC LIMIT 1"
        ))
        .bind(task.to_string())
        .fetch_optional(&self.pool)
        .await?;
        r.as_ref().map(session_row).transpose()
    }

    /// Every run of a task, oldest first (its Workflow view).
    pub async fn task_sessions(&self, task: TaskId) -> Result<Vec<SessionRow>> {
        let rows = sqlx::query(&format!("{SESSION_SELECT} WHERE s.task_id = $1 ORDER BY s.created_at, s.id"))
            .bind(task.to_string())
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(session_row).collect()
    }

    /// Whether `hand_off(task, stage_index, session, …)` would be accepted now (checked
    /// before a merge stage merges, so a refused hand-off merges nothing).
    pub async fn can_hand_off(
        &self,
        task: TaskId,
        stage_index: usize,
        session: Option<SessionId>,
    ) -> Result<std::result::Result<(), HandOffRefused>> {
        let mut conn = self.pool.acquire().await?;
        let t = task_row(&sqlx::query(&format!("{TASK_SELECT} WHERE t.id = $1")).bind(task.to_string()).fetch_one(&mut *conn).await?)?;
        hand_off_check(&mut conn, &t, stage_index, session).await
    }

    /// Hands stage `stage_index` off with `note`, from its live run `session` (which will
    /// end `completed`) or, with None, by a person when no run is live (a human-worked
    /// stage); refused unless it is still the current stage, so a repeated or stale
    /// hand-off never moves a later stage. The task moves to its next stage (queued for
    /// a slot when an agent is pinned to it) or is done. Returns where it went.
    pub async fn hand_off(
        &self,
        task: TaskId,
        stage_index: usize,
        session: Option<SessionId>,
        note: &str,
        actor: &str,
    ) -> Result<std::result::Result<AfterHandOff, HandOffRefused>> {
        let mut tx = self.write().await?;
        let t = task_row(&sqlx::query(&format!("{TASK_SELECT} WHERE t.id = $1")).bind(task.to_string()).fetch_one(&mut *tx).await?)?;
        if let Err(refused) = hand_off_check(&mut tx, &t, stage_index, session).await? {
            return Ok(Err(refused));
        }
        let stage = t.workflow[t.stage_index].stage.clone();
        if let Some(session) = session {
            sqlx::query("UPDATE sessions SET handed_off = 'the stage was handed off' WHERE id = $1")
                .bind(session.to_string())
                .execute(&mut *tx)
                .await?;
        }
        let next = after_hand_off(t.stage_index, t.workflow.len());
        let at = now();
        match next {
            AfterHandOff::Stage(i) => {
                let queued = t.workflow[i].agent().is_some().then(|| at.clone());
                sqlx::query(
                    "UPDATE tasks SET stage_index = $1, attempts = 0, flagged = NULL, queued_at = $2, updated_at = $3 WHERE id = $4",
                )
                .bind(i as i64)
                .bind(queued)
                .bind(&at)
                .bind(task.to_string())
                .execute(&mut *tx)
                .await?;
            }
            AfterHandOff::Done => {
                sqlx::query("UPDATE tasks SET status = 'done', stage_index = $1, queued_at = NULL, updated_at = $2 WHERE id = $3")
                    .bind(t.workflow.len() as i64)
                    .bind(&at)
                    .bind(task.to_string())
                    .execute(&mut *tx)
                    .await?;
            }
        }
        let to = match next {
            AfterHandOff::Stage(i) => serde_json::Value::String(t.workflow[i].stage.clone()),
            AfterHandOff::Done => serde_json::Value::Null,
        };
        let detail = serde_json::json!({ "stage": stage, "next": to, "note": note });
        let e = NewEvent { workspace: t.workspace, session, task: Some(task), kind: EventKind::StageAdvanced, actor: actor.into(), detail };
        insert(&mut tx, &e).await?;
        if next == AfterHandOff::Done {
            let e = NewEvent {
                workspace: t.workspace,
                session: None,
                task: Some(task),
                kind: EventKind::TaskFinished,
                actor: actor.into(),
                detail: serde_json::json!({ "status": "done" }),
            };
            insert(&mut tx, &e).await?;
        }
        tx.commit().await?;
        self.changed(t.workspace, session);
        Ok(Ok(next))
    }

    /// Moves a sandbox through its lifecycle (Finish, Mark done, Abandon, its task
    /// ending), checked against the state machine under the write lock. A person's move
    /// (with `actor`) is recorded as an event in the same transaction. Returns the new
    /// state, or why the move is not possible from where it is.
    pub async fn sandbox_event(
        &self,
        sandbox: SandboxId,
        event: SandboxEvent,
        actor: Option<&str>,
    ) -> Result<std::result::Result<SandboxState, SandboxTransitionError>> {
        let mut tx = self.write().await?;
        let r = sqlx::query("SELECT state, workspace_id, task_id, last_session_id FROM sandboxes WHERE id = $1")
            .bind(sandbox.to_string())
            .fetch_one(&mut *tx)
            .await?;
        let state: String = r.get("state");
        let from = SandboxState::parse(&state).ok_or_else(|| StoreError::Corrupt(format!("sandbox state {state}")))?;
        let next = match from.apply(event) {
            Ok(next) => next,
            Err(e) => return Ok(Err(e)),
        };
        sqlx::query("UPDATE sandboxes SET state = $1, updated_at = $2 WHERE id = $3")
            .bind(next.as_str())
            .bind(now())
            .bind(sandbox.to_string())
            .execute(&mut *tx)
            .await?;
        let workspace: WorkspaceId = parse_id(r.get("workspace_id"))?;
        if let (Some(actor), Some(kind)) = (actor, event.audited()) {
            let e = NewEvent {
                workspace,
                session: r.get::<Option<String>, _>("last_session_id").as_deref().map(parse_id).transpose()?,
                task: r.get::<Option<String>, _>("task_id").as_deref().map(parse_id).transpose()?,
                kind,
                actor: actor.into(),
                detail: serde_json::json!({ "sandbox": sandbox.to_string(), "from": from.as_str(), "to": next.as_str() }),
            };
            insert(&mut tx, &e).await?;
        }
        tx.commit().await?;
        self.changed(workspace, None);
        Ok(Ok(next))
    }

    /// Ends a task by a person's decision (cancelled or abandoned).
    pub async fn finish_task(&self, task: TaskId, status: TaskStatus, actor: &str) -> Result<bool> {
        let mut tx = self.write().await?;
        let r = sqlx::query(
            "UPDATE tasks SET status = $1, queued_at = NULL, updated_at = $2 WHERE id = $3 AND status = 'open' RETURNING workspace_id",
        )
        .bind(status.as_str())
        .bind(now())
        .bind(task.to_string())
        .fetch_optional(&mut *tx)
        .await?;
        let Some(r) = r else { return Ok(false) };
        let workspace: WorkspaceId = parse_id(r.get("workspace_id"))?;
        let e = NewEvent {
            workspace,
            session: None,
            task: Some(task),
            kind: EventKind::TaskFinished,
            actor: actor.into(),
            detail: serde_json::json!({ "status": status }),
        };
        self.commit_with_event(tx, &e).await?;
        Ok(true)
    }

    /// Marks a session to complete when it ends (Mark done), with `why`.
    pub async fn mark_completing(&self, session: SessionId, why: &str) -> Result<()> {
        sqlx::query("UPDATE sessions SET handed_off = COALESCE(handed_off, $1) WHERE id = $2")
            .bind(why)
            .bind(session.to_string())
            .execute(&self.writes)
            .await?;
        Ok(())
    }

    /// Stores a session-scoped credential.
    pub async fn add_session_token(&self, session: SessionId, digest: &str) -> Result<()> {
        sqlx::query("INSERT INTO session_tokens (hash, session_id, created_at) VALUES ($1, $2, $3)")
            .bind(digest)
            .bind(session.to_string())
            .bind(now())
            .execute(&self.writes)
            .await?;
        Ok(())
    }

    /// The session a session-scoped credential belongs to, while that session is live.
    pub async fn session_for_token(&self, digest: &str) -> Result<Option<SessionRow>> {
        let r = sqlx::query(&format!(
            "{SESSION_SELECT} JOIN session_tokens k ON k.session_id = s.id
             WHERE k.hash = $1 AND k.revoked_at IS NULL AND s.outcome IN ('starting', 'running')"
        ))
        .bind(digest)
        .fetch_optional(&self.pool)
        .await?;
        r.as_ref().map(session_row).transpose()
    }

    /// Files a blocker or a question.
    pub async fn add_note(&self, task: &TaskRow, session: Option<SessionId>, kind: &str, text: &str, actor: &str) -> Result<NoteId> {
        let id = NoteId::new();
        let mut tx = self.write().await?;
        sqlx::query("INSERT INTO notes (id, task_id, session_id, kind, text, created_by, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)")
            .bind(id.to_string())
            .bind(task.id.to_string())
            .bind(session.map(|s| s.to_string()))
            .bind(kind)
            .bind(text)
            .bind(actor)
            .bind(now())
            .execute(&mut *tx)
            .await?;
        let ev = if kind == "blocker" { EventKind::BlockerFiled } else { EventKind::QuestionAsked };
        let e = NewEvent {
            workspace: task.workspace,
            session,
            task: Some(task.id),
            kind: ev,
            actor: actor.into(),
            detail: serde_json::json!({ "note": id, "text": text }),
        };
        self.commit_with_event(tx, &e).await?;
        Ok(id)
    }

    /// Resolves a blocker or answers a question; false if it was already closed.
    pub async fn close_note(&self, task: &TaskRow, note: NoteId, answer: Option<&str>, actor: &str) -> Result<bool> {
        let mut tx = self.write().await?;
        let r = sqlx::query("UPDATE notes SET answer = $1, closed_by = $2, closed_at = $3 WHERE id = $4 AND task_id = $5 AND closed_at IS NULL RETURNING kind, session_id")
            .bind(answer)
            .bind(actor)
            .bind(now())
            .bind(note.to_string())
            .bind(task.id.to_string())
            .fetch_optional(&mut *tx)
            .await?;
        let Some(r) = r else { return Ok(false) };
        let kind: String = r.get("kind");
        let ev = if kind == "blocker" { EventKind::BlockerResolved } else { EventKind::QuestionAnswered };
        let session: Option<SessionId> = r.get::<Option<String>, _>("session_id").as_deref().map(parse_id).transpose()?;
        let e = NewEvent {
            workspace: task.workspace,
            session,
            task: Some(task.id),
            kind: ev,
            actor: actor.into(),
            detail: serde_json::json!({ "note": note, "text": answer }),
        };
        self.commit_with_event(tx, &e).await?;
        Ok(true)
    }

    /// One note.
    pub async fn note(&self, id: NoteId) -> Result<Option<NoteRow>> {
        let r = sqlx::query("SELECT * FROM notes WHERE id = $1").bind(id.to_string()).fetch_optional(&self.pool).await?;
        r.as_ref().map(note_row).transpose()
    }

    /// A task's blockers and questions, oldest first.
    pub async fn task_notes(&self, task: TaskId) -> Result<Vec<NoteRow>> {
        let rows = sqlx::query("SELECT * FROM notes WHERE task_id = $1 ORDER BY created_at, id")
            .bind(task.to_string())
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(note_row).collect()
    }

    /// Prepares the task's current stage on `device` without starting it: takes the
    /// task off the queue and makes (or keeps) its open sandbox, `ready`, for Activate.
    /// None if the task moved on meanwhile (or a run of it is live).
    pub async fn prepare_task_sandbox(
        &self,
        task: TaskId,
        stage_index: usize,
        device: DeviceId,
        branch: &str,
        actor: &str,
    ) -> Result<Option<SandboxId>> {
        let mut tx = self.write().await?;
        let claimed = sqlx::query(
            "UPDATE tasks SET queued_at = NULL, updated_at = $3 WHERE id = $1 AND status = 'open' AND stage_index = $2
             AND queued_at IS NOT NULL AND flagged IS NULL
             AND NOT EXISTS (SELECT 1 FROM sessions WHERE task_id = $1 AND outcome IN ('starting', 'running'))",
        )
        .bind(task.to_string())
        .bind(stage_index as i64)
        .bind(now())
        .execute(&mut *tx)
        .await?;
        if claimed.rows_affected() != 1 {
            return Ok(None);
        }
        let t = task_row(&sqlx::query(&format!("{TASK_SELECT} WHERE t.id = $1")).bind(task.to_string()).fetch_one(&mut *tx).await?)?;
        let at = now();
        let sandbox = match (t.sandbox, t.sandbox_state) {
            (Some(b), Some(state)) if !state.is_finished() => b,
            _ => {
                let b = insert_task_sandbox(&mut tx, &t, device, "", branch, &at).await?;
                sqlx::query("UPDATE tasks SET sandbox_id = $1 WHERE id = $2")
                    .bind(b.to_string())
                    .bind(t.id.to_string())
                    .execute(&mut *tx)
                    .await?;
                b
            }
        };
        let stage = t.stage().map(|s| s.stage.clone()).unwrap_or_default();
        let e = NewEvent {
            workspace: t.workspace,
            session: None,
            task: Some(t.id),
            kind: EventKind::SandboxPrepared,
            actor: actor.into(),
            detail: serde_json::json!({ "stage": stage, "sandbox": sandbox.to_string(), "branch": branch }),
        };
        self.commit_with_event(tx, &e).await?;
        Ok(Some(sandbox))
    }

    /// How many of the task's runs at `stage` ended lost (with their devices, or
    /// stalled): the bound on runs its devices may lose without costing an attempt.
    pub async fn device_losses(&self, task: TaskId, stage: &str) -> Result<u32> {
        let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM sessions WHERE task_id = $1 AND stage = $2 AND outcome = 'lost'")
            .bind(task.to_string())
            .bind(stage)
            .fetch_one(&self.pool)
            .await?;
        Ok(n as u32)
    }

    /// The task a sandbox belongs to, with the sandbox's device.
    pub async fn sandbox_task(&self, sandbox: SandboxId) -> Result<Option<(TaskId, DeviceId)>> {
        let r = sqlx::query("SELECT task_id, device_id FROM sandboxes WHERE id = $1")
            .bind(sandbox.to_string())
            .fetch_optional(&self.pool)
            .await?;
        let Some(r) = r else { return Ok(None) };
        let Some(task) = r.get::<Option<String>, _>("task_id") else { return Ok(None) };
        Ok(Some((parse_id(&task)?, parse_id(r.get("device_id"))?)))
    }

    /// Activate: the task's current stage, prepared and waiting, may start; it is queued
    /// for a slot. False if it does not wait for Activate.
    pub async fn activate_task(&self, task: &TaskRow, actor: &str) -> Result<bool> {
        let mut tx = self.write().await?;
        let done = sqlx::query(
            "UPDATE tasks SET activated_stage = stage_index, queued_at = COALESCE(queued_at, $1), updated_at = $1
             WHERE id = $2 AND status = 'open' AND stage_index = $3 AND flagged IS NULL
             AND (activated_stage IS NULL OR activated_stage != stage_index)",
        )
        .bind(now())
        .bind(task.id.to_string())
        .bind(task.stage_index as i64)
        .execute(&mut *tx)
        .await?;
        if done.rows_affected() != 1 {
            return Ok(false);
        }
        let stage = task.stage().map(|s| s.stage.clone()).unwrap_or_default();
        let e = NewEvent {
            workspace: task.workspace,
            session: None,
            task: Some(task.id),
            kind: EventKind::Activated,
            actor: actor.into(),
            detail: serde_json::json!({ "stage": stage }),
        };
        self.commit_with_event(tx, &e).await?;
        Ok(true)
    }

    /// Sets the branch the task starts from and merges into, before its first run: a
    /// task filed on a wrong base (or flagged because its base does not exist) is put
    /// right. Refused once a run of it has started (its branch exists by then).
    pub async fn set_task_base(&self, task: &TaskRow, base: &str, actor: &str) -> Result<std::result::Result<(), BaseRefused>> {
        let mut tx = self.write().await?;
        let status: Option<String> =
            sqlx::query_scalar("SELECT status FROM tasks WHERE id = $1").bind(task.id.to_string()).fetch_optional(&mut *tx).await?;
        if status.as_deref() != Some("open") {
            return Ok(Err(BaseRefused::Finished));
        }
        let runs: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM sessions WHERE task_id = $1 AND (started_at IS NOT NULL OR outcome IN ('starting', 'running'))",
        )
        .bind(task.id.to_string())
        .fetch_one(&mut *tx)
        .await?;
        if runs > 0 {
            return Ok(Err(BaseRefused::Started));
        }
        let at = now();
        sqlx::query("UPDATE tasks SET base_branch = $1, updated_at = $2 WHERE id = $3")
            .bind(base)
            .bind(&at)
            .bind(task.id.to_string())
            .execute(&mut *tx)
            .await?;
        sqlx::query(
            "UPDATE sandboxes SET base_branch = $1, updated_at = $2 WHERE task_id = $3 AND state NOT IN ('done', 'abandoned', 'stopped')",
        )
        .bind(base)
        .bind(&at)
        .bind(task.id.to_string())
        .execute(&mut *tx)
        .await?;
        let e = NewEvent {
            workspace: task.workspace,
            session: None,
            task: Some(task.id),
            kind: EventKind::TaskBaseChanged,
            actor: actor.into(),
            detail: serde_json::json!({ "from": task.repo_base, "to": base }),
        };
        self.commit_with_event(tx, &e).await?;
        Ok(Ok(()))
    }

    /// What earlier work on the task left for its next stage, oldest first: every
    /// hand-off note and every answered question.
    pub async fn earlier_notes(&self, task: TaskId) -> Result<Vec<EarlierNote>> {
        let hand_offs = sqlx::query("SELECT actor, detail, at FROM events WHERE task_id = $1 AND kind = 'stage_advanced' ORDER BY seq")
            .bind(task.to_string())
            .fetch_all(&self.pool)
            .await?;
        let mut out: Vec<(String, EarlierNote)> = Vec::new();
        for r in &hand_offs {
            let detail: serde_json::Value = serde_json::from_str(&r.get::<String, _>("detail")).unwrap_or_default();
            let text = |k: &str| detail.get(k).and_then(|v| v.as_str()).unwrap_or_default().to_string();
            let note = EarlierNote::HandOff { stage: text("stage"), by: r.get("actor"), note: text("note") };
            out.push((r.get("at"), note));
        }
        for n in self.task_notes(task).await? {
            if let (Some(answer), Some(at), "question") = (n.answer, n.closed_at, n.kind.as_str()) {
                out.push((at, EarlierNote::Answer { question: n.text, answer }));
            }
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out.into_iter().map(|(_, n)| n).collect())
    }

    /// Whether the task has an open question or blocker (a run waiting on a person).
    pub async fn waiting_on_person(&self, task: TaskId) -> Result<bool> {
        let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM notes WHERE task_id = $1 AND closed_at IS NULL")
            .bind(task.to_string())
            .fetch_one(&self.pool)
            .await?;
        Ok(n > 0)
    }

    /// When a person last answered a question or resolved a blocker on the task.
    pub async fn last_note_closed_at(&self, task: TaskId) -> Result<Option<String>> {
        Ok(sqlx::query_scalar("SELECT MAX(closed_at) FROM notes WHERE task_id = $1").bind(task.to_string()).fetch_one(&self.pool).await?)
    }

    /// Records a comment on a task.
    pub async fn comment(&self, task: &TaskRow, session: Option<SessionId>, text: &str, actor: &str) -> Result<()> {
        let e = NewEvent {
            workspace: task.workspace,
            session,
            task: Some(task.id),
            kind: EventKind::Comment,
            actor: actor.into(),
            detail: serde_json::json!({ "text": text }),
        };
        self.record_event(&e).await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::store;

    /// Task `t{i}`: one `code` stage for the agent `bot`.
    fn chore(workspace: WorkspaceId, repo: RepoId, i: usize) -> NewTask {
        NewTask {
            workspace,
            kind: "chore".into(),
            title: format!("t{i}"),
            body: String::new(),
            repo,
            workflow: vec![StageSpec { stage: "code".into(), assignee: Some("bot".into()), merge: false, activate: false }],
            created_by: "alice".into(),
        }
    }

    #[tokio::test]
    async fn the_queue_is_read_in_batches_first_queued_first() {
        let (s, _d) = store().await;
        let (ws, owner) = s.bootstrap("w", "alice").await.unwrap();
        let repo = s.add_repo(ws, "app", None).await.unwrap();
        s.create_agent(ws, "bot", owner, "custom", &Default::default(), &["x".into()]).await.unwrap().unwrap();
        let mut filed = Vec::new();
        for i in 0..5 {
            filed.push(s.create_task(&chore(ws, repo, i)).await.unwrap());
        }
        let mut seen = Vec::new();
        let mut after: Option<(String, TaskId)> = None;
        loop {
            let batch = s.queued_tasks(after.as_ref().map(|(a, i)| (a.as_str(), *i)), 2).await.unwrap();
            if batch.is_empty() {
                break;
            }
            let last = batch.last().unwrap();
            after = Some((last.queued_at.clone().unwrap(), last.id));
            seen.extend(batch.iter().map(|t| t.id));
        }
        let mut expected = filed.clone();
        let queued = s.queued_tasks(None, 100).await.unwrap();
        expected.sort_by_key(|id| queued.iter().position(|t| t.id == *id));
        assert_eq!(seen, expected);
        assert_eq!(seen.len(), 5);
    }

    #[tokio::test]
    async fn two_servers_staffing_at_once_never_take_more_slots_than_a_device_has() {
        let dir = tempfile::tempdir().unwrap();
        let database = crate::testing::database(&dir);
        // Two stores on one database: two replicas' schedulers.
        let (a, b) = (Store::open(&database).await.unwrap(), Store::open(&database).await.unwrap());
        let (ws, owner) = a.bootstrap("w", "alice").await.unwrap();
        let dev = a.upsert_device(ws, "box", 2).await.unwrap();
        let repo = a.add_repo(ws, "app", None).await.unwrap();
        let agent = a.create_agent(ws, "bot", owner, "custom", &Default::default(), &["x".into()]).await.unwrap().unwrap();
        let mut tries = Vec::new();
        for i in 0..8 {
            let task = a.create_task(&chore(ws, repo, i)).await.unwrap();
            let n = NewTaskSession {
                task,
                device: dev.id,
                agent,
                stage_index: 0,
                command: vec!["x".into()],
                cwd: "/wt".into(),
                branch: format!("drover/t{i}"),
                cols: 80,
                rows: 24,
                resumed: false,
            };
            // Each task is tried by both servers at the same moment.
            for s in [a.clone(), b.clone()] {
                let n = n.clone();
                tries.push(tokio::spawn(async move { s.create_task_session(&n, "scheduler").await.unwrap().is_some() }));
            }
        }
        let mut started = 0;
        for t in tries {
            started += t.await.unwrap() as usize;
        }
        assert_eq!(started, 2, "a device with 2 slots runs 2 stages");
        assert_eq!(b.live_sessions_on(dev.id).await.unwrap().len(), 2);
        assert_eq!(b.queued_tasks(None, 100).await.unwrap().len(), 6, "the rest still wait for a slot");
    }

    #[tokio::test]
    async fn a_task_is_queued_staffed_handed_off_and_done() {
        let (s, _d) = store().await;
        let (ws, owner) = s.bootstrap("w", "alice").await.unwrap();
        let dev = s.upsert_device(ws, "box", 2).await.unwrap();
        let repo = s.add_repo(ws, "app", None).await.unwrap();
        assert_eq!(s.add_repo(ws, "app", Some("main")).await.unwrap(), repo, "same name, same repo");
        assert_eq!(s.list_repos(ws).await.unwrap()[0].base.as_deref(), Some("main"));
        assert_eq!(s.add_repo(ws, "app", None).await.unwrap(), repo);
        assert_eq!(s.list_repos(ws).await.unwrap()[0].base.as_deref(), Some("main"), "kept when not given");
        s.set_device_repo(dev.id, repo, "/src/app").await.unwrap();
        assert_eq!(s.device_repo_path(dev.id, repo).await.unwrap().as_deref(), Some("/src/app"));
        let agent = s.create_agent(ws, "bot", owner, "custom", &Default::default(), &["x".into()]).await.unwrap().unwrap();
        assert_eq!(s.create_agent(ws, "bot", owner, "custom", &Default::default(), &[]).await.unwrap(), None, "names are unique");
        let workflow = vec![
            StageSpec { stage: "code".into(), assignee: Some("bot".into()), merge: false, activate: false },
            StageSpec { stage: "review".into(), assignee: None, merge: true, activate: false },
        ];
        assert_eq!(s.workspace_workflow(ws).await.unwrap(), None);
        s.set_workspace_workflow(ws, &workflow).await.unwrap();
        assert_eq!(s.workspace_workflow(ws).await.unwrap().as_ref(), Some(&workflow));
        let t = NewTask {
            workspace: ws,
            kind: "bug".into(),
            title: "Fix it".into(),
            body: "b".into(),
            repo,
            workflow,
            created_by: "alice".into(),
        };
        let id = s.create_task(&t).await.unwrap();
        assert_eq!(s.queued_tasks(None, 10).await.unwrap().len(), 1);
        assert_eq!(s.task_counts(ws).await.unwrap(), (1, 0));
        let n = NewTaskSession {
            task: id,
            device: dev.id,
            agent,
            stage_index: 0,
            command: vec!["x".into()],
            cwd: "/wt".into(),
            branch: "drover/x-fix-it".into(),
            cols: 80,
            rows: 24,
            resumed: false,
        };
        let (ses, sbx) = s.create_task_session(&n, "scheduler").await.unwrap().unwrap();
        assert_eq!(s.create_task_session(&n, "scheduler").await.unwrap(), None, "a stage is staffed once");
        let task = s.task(id).await.unwrap().unwrap();
        assert_eq!((task.queued_at.as_deref(), task.attempts, task.sandbox), (None, 1, Some(sbx)));
        assert_eq!(s.live_task_session(id).await.unwrap().unwrap().id, ses);
        // Only the live run of the current stage can hand off.
        assert_eq!(s.hand_off(id, 0, Some(SessionId::new()), "n", "bot").await.unwrap(), Err(HandOffRefused::NotCurrent));
        assert_eq!(s.can_hand_off(id, 0, None).await.unwrap(), Err(HandOffRefused::NotCurrent));
        assert_eq!(s.hand_off(id, 0, None, "a person, while a run is live", "alice").await.unwrap(), Err(HandOffRefused::NotCurrent));
        assert_eq!(s.can_hand_off(id, 0, Some(ses)).await.unwrap(), Ok(()));
        assert_eq!(s.can_hand_off(id, 1, Some(ses)).await.unwrap(), Err(HandOffRefused::NotCurrent), "not the current stage");
        assert_eq!(s.hand_off(id, 0, Some(ses), "done coding", "bot").await.unwrap(), Ok(AfterHandOff::Stage(1)));
        // The run's end arrives as "exited 0 without handing off" (it was on its way when
        // the hand-off committed): the hand-off still decides, under the same lock.
        let ending = drover_core::outcome::on_end(
            drover_core::Outcome::Running,
            &drover_core::RunEnd::Exited { status: drover_core::ExitStatus::code(0), stop_requested: false },
        )
        .unwrap();
        let stored =
            s.end_session(ses, &ending, crate::RunTimes { started_at: None, ended_at: &now() }, 0, "device box").await.unwrap().unwrap();
        assert_eq!((stored.outcome, stored.reason.as_str()), (drover_core::Outcome::Completed, "the stage was handed off"));
        assert_eq!(s.hand_off(id, 0, Some(ses), "again", "bot").await.unwrap(), Err(HandOffRefused::NotCurrent));
        assert_eq!(s.can_hand_off(id, 0, Some(ses)).await.unwrap(), Err(HandOffRefused::NotCurrent));
        // A person's repeated hand-off of stage 0 does not hand off stage 1 (review).
        assert_eq!(s.hand_off(id, 0, None, "double click", "alice").await.unwrap(), Err(HandOffRefused::NotCurrent));
        let task = s.task(id).await.unwrap().unwrap();
        assert_eq!(task.stage().unwrap().stage, "review");
        assert_eq!(task.queued_at, None, "a human works review: nothing is queued");
        let kinds: Vec<String> = s.task_events(id, 100).await.unwrap().into_iter().map(|e| e.kind).collect();
        assert_eq!(kinds, ["task_created", "session_started", "stage_advanced", "session_ended"]);
        // Notes.
        let q = s.add_note(&task, Some(ses), "question", "which db?", "bot").await.unwrap();
        assert!(s.close_note(&task, q, Some("sqlite"), "alice").await.unwrap());
        assert!(!s.close_note(&task, q, Some("pg"), "alice").await.unwrap());
        assert_eq!(s.note(q).await.unwrap().unwrap().answer.as_deref(), Some("sqlite"));
        assert!(s.finish_task(id, TaskStatus::Cancelled, "alice").await.unwrap());
        assert!(!s.finish_task(id, TaskStatus::Cancelled, "alice").await.unwrap());
    }
}

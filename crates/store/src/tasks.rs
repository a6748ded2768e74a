//! Tasks: filing them, reading them (with whose turn it is), their queue for a slot,
//! flags, activation, base branch and end.

use drover_core::activity::EventKind;
use drover_core::attention::AttentionKind;
use drover_core::task::{stage_agent, TaskStatus};
use drover_core::turn::{turn, Turn, TurnFacts};
use drover_core::{DeviceId, RepoId, SandboxId, SandboxState, TaskId, WorkspaceId};
use serde::{Deserialize, Serialize};
use sqlx::Row;

use crate::events::NewEvent;
use crate::{now, parse_id, Result, Store, StoreError};

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
    /// The workspace it is filed in.
    pub workspace: WorkspaceId,
    /// Its type (`story`, `bug`, `chore`, …).
    pub kind: String,
    /// Its one-line summary, shown in lists and in its branch's name.
    pub title: String,
    /// Body, in plain language.
    pub body: String,
    /// The repository it works in.
    pub repo: RepoId,
    /// The stages it goes through, in order, each with who works it.
    pub workflow: Vec<StageSpec>,
    /// Who filed it: the actor of its "task created" activity.
    pub created_by: String,
}

/// A task as stored.
#[derive(Debug, Clone)]
pub struct TaskRow {
    /// Its id, as the API and the CLI name it.
    pub id: TaskId,
    /// The workspace it is filed in.
    pub workspace: WorkspaceId,
    /// Its type (`story`, `bug`, `chore`, …).
    pub kind: String,
    /// Its one-line summary, shown in lists and in its branch's name.
    pub title: String,
    /// What to do, in plain language: the first message of its stages' runs.
    pub body: String,
    /// Whether it is open or how it finished.
    pub status: TaskStatus,
    /// The repository its runs work in.
    pub repo: RepoId,
    /// Its repository's name, for display.
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
    /// The branch its sandbox works on, once it has one.
    pub branch: Option<String>,
    /// The sandbox's lifecycle state.
    pub sandbox_state: Option<SandboxState>,
    /// Who filed it.
    pub created_by: String,
    /// When it was filed (stored format).
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
    /// What its runs wait on a person for, newest: the kind, and a held call's tool.
    pub waiting: Option<(String, Option<String>)>,
    /// The stage a person last activated, by index.
    pub activated_stage: Option<usize>,
}

impl TaskRow {
    /// Whose turn it is on the task.
    pub fn turn(&self) -> Turn<'_> {
        let mut facts = turn_facts(self.status, self.stage(), &self.flagged, &self.open_note, self.queued_at.is_some(), &self.live_outcome);
        facts.waiting = waiting_facts(&self.waiting);
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

/// What a run waits on, as whose turn it is needs it.
fn waiting_facts(w: &Option<(String, Option<String>)>) -> Option<(AttentionKind, Option<&str>)> {
    let (kind, tool) = w.as_ref()?;
    Some((AttentionKind::parse(kind)?, tool.as_deref()))
}

fn waiting(r: &sqlx::any::AnyRow) -> Option<(String, Option<String>)> {
    Some((r.get::<Option<String>, _>("wait_kind")?, r.get("wait_tool")))
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
        waiting: None,
        stage: stage.map(|s| (s.stage.as_str(), stage_agent(s.assignee.as_deref()).is_some())),
        queued,
        live: live.as_deref().map(|o| o == "running"),
        awaiting_activation: false,
    }
}

/// The columns whose turn it is needs beyond the task's own: its oldest open note and
/// its live run's outcome.
macro_rules! turn_columns {
    () => {
        concat!(
            "(SELECT n.kind FROM notes n WHERE n.task_id = t.id AND n.closed_at IS NULL ORDER BY n.created_at, n.id LIMIT 1) AS note_kind, ",
            "(SELECT n.text FROM notes n WHERE n.task_id = t.id AND n.closed_at IS NULL ORDER BY n.created_at, n.id LIMIT 1) AS note_text, ",
            "(SELECT a.kind FROM attention a WHERE a.task_id = t.id AND a.closed_at IS NULL ORDER BY a.raised_at DESC, a.id DESC LIMIT 1) AS wait_kind, ",
            "(SELECT a.tool FROM attention a WHERE a.task_id = t.id AND a.closed_at IS NULL ORDER BY a.raised_at DESC, a.id DESC LIMIT 1) AS wait_tool, ",
            "(SELECT s.outcome FROM sessions s WHERE s.task_id = t.id AND s.outcome IN ", live_outcomes!(), " AND s.handed_off IS NULL ORDER BY s.created_at DESC LIMIT 1) AS live_outcome"
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
        waiting: waiting(r),
        activated_stage: r.get::<Option<i64>, _>("activated_stage").map(|i| i as usize),
    })
}

fn open_note(r: &sqlx::any::AnyRow) -> Option<(String, String)> {
    Some((r.get::<Option<String>, _>("note_kind")?, r.get::<Option<String>, _>("note_text").unwrap_or_default()))
}

/// Why a task's base branch cannot be changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BaseRefused {
    /// The task has finished.
    Finished,
    /// A run of it has started: its branch was made from the old base.
    Started,
}

impl Store {
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

    /// How many of the workspace's queued tasks were queued before `task` (the queue's
    /// order: queued time, then id).
    pub async fn queued_ahead(&self, task: &TaskRow) -> Result<usize> {
        let Some(at) = &task.queued_at else { return Ok(0) };
        let n: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM tasks WHERE workspace_id = $1 AND queued_at IS NOT NULL AND status = 'open' AND (queued_at, id) < ($2, $3)",
        )
        .bind(task.workspace.to_string())
        .bind(at)
        .bind(task.id.to_string())
        .fetch_one(&self.pool)
        .await?;
        Ok(n as usize)
    }

    /// Counts for the Sessions page header: (queued for a slot, live sessions on finished tasks).
    pub async fn task_counts(&self, workspace: WorkspaceId) -> Result<(u32, u32)> {
        let q: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM tasks WHERE workspace_id = $1 AND queued_at IS NOT NULL AND status = 'open'")
            .bind(workspace.to_string())
            .fetch_one(&self.pool)
            .await?;
        let f: i64 = sqlx::query_scalar(concat!(
            "SELECT COUNT(*) FROM sessions s JOIN tasks t ON t.id = s.task_id
             WHERE s.workspace_id = $1 AND s.outcome IN ",
            live_outcomes!(),
            " AND t.status != 'open'"
        ))
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
            let wait = waiting(r);
            facts.waiting = waiting_facts(&wait);
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
        let e = NewEvent::for_task(task, None, EventKind::Activated, actor, serde_json::json!({ "stage": stage }));
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
        let runs: i64 = sqlx::query_scalar(concat!(
            "SELECT COUNT(*) FROM sessions WHERE task_id = $1 AND (started_at IS NOT NULL OR outcome IN ",
            live_outcomes!(),
            ")"
        ))
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
        let e =
            NewEvent::for_task(task, None, EventKind::TaskBaseChanged, actor, serde_json::json!({ "from": task.repo_base, "to": base }));
        self.commit_with_event(tx, &e).await?;
        Ok(Ok(()))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::testing::store;

    /// Task `t{i}`: one `code` stage for the agent `bot`.
    pub(crate) fn chore(workspace: WorkspaceId, repo: RepoId, i: usize) -> NewTask {
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
}

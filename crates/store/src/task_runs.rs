//! A task's runs: staffing its current stage (sandbox, session, slot claimed under one
//! lock), preparing a stage for Activate, and reading its runs.

use drover_core::activity::EventKind;
use drover_core::sandbox::SandboxEvent;
use drover_core::task::busy_sandbox_flag;
use drover_core::{AgentId, DeviceId, Outcome, SandboxId, SandboxState, SessionId, TaskId};
use sqlx::Row;

use crate::events::NewEvent;
use crate::sessions::{session_row, SESSION_SELECT};
use crate::tasks::{task_row, TASK_SELECT};
use crate::{now, parse_id, Result, SessionRow, Store, StoreError, TaskRow, LIVE};

/// A run to start for a task's current stage.
#[derive(Debug, Clone)]
pub struct NewTaskSession {
    /// The task whose current stage it staffs.
    pub task: TaskId,
    /// The device (its sandbox's, when it has one).
    pub device: DeviceId,
    /// The agent staffing the stage.
    pub agent: AgentId,
    /// The stage being staffed (by index): nothing is created if the task has moved on.
    pub stage_index: usize,
    /// The program to start, with its arguments.
    pub command: Vec<String>,
    /// The worktree it runs in.
    pub cwd: String,
    /// The task's branch: a fresh sandbox is made on it.
    pub branch: String,
    /// The terminal's width to start with, in columns.
    pub cols: u16,
    /// The terminal's height to start with, in rows.
    pub rows: u16,
    /// It resumes the conversation of the stage's lost previous run.
    pub resumed: bool,
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

/// Claims a slot on `n.device` for the task's stage `n.stage_index` and takes the task off
/// the queue, under the write lock (two schedulers, or a scheduler and a Launch, on any
/// replicas, cannot both take a device's last free slot); false, changing nothing,
/// unless the task is open, waiting, unflagged, at that stage, without a live run.
async fn claim_slot(conn: &mut sqlx::AnyConnection, n: &NewTaskSession) -> Result<bool> {
    let claimed = sqlx::query(concat!(
        "UPDATE tasks SET queued_at = NULL, attempts = attempts + 1 WHERE id = $1 AND status = 'open' AND stage_index = $2
         AND queued_at IS NOT NULL AND flagged IS NULL
         AND NOT EXISTS (SELECT 1 FROM sessions WHERE task_id = $1 AND outcome IN ",
        live_outcomes!(),
        ")
         AND (SELECT COUNT(*) FROM sessions WHERE device_id = $3 AND outcome IN ",
        live_outcomes!(),
        ")
             < (SELECT slots FROM devices WHERE id = $3)"
    ))
    .bind(n.task.to_string())
    .bind(n.stage_index as i64)
    .bind(n.device.to_string())
    .execute(&mut *conn)
    .await?;
    Ok(claimed.rows_affected() == 1)
}

/// Where a task's next run goes, given its sandbox.
enum NextSandbox {
    /// Its open sandbox takes the run.
    Open(SandboxId),
    /// A fresh one: it has none, or its sandbox closed for good (Mark done) and a new run
    /// gets a fresh sandbox on the same branch.
    Fresh,
    /// None yet: its sandbox is in this state, wrapping up (after Finish session).
    Busy(SandboxState),
}

/// Where the task's next run goes (see [`NextSandbox`]).
async fn next_sandbox(conn: &mut sqlx::AnyConnection, task: &TaskRow) -> Result<NextSandbox> {
    let Some(b) = task.sandbox else { return Ok(NextSandbox::Fresh) };
    let state: String = sqlx::query_scalar("SELECT state FROM sandboxes WHERE id = $1").bind(b.to_string()).fetch_one(&mut *conn).await?;
    let state = SandboxState::parse(&state).ok_or_else(|| StoreError::Corrupt(format!("sandbox state {state}")))?;
    Ok(match state.apply(SandboxEvent::RunStarted) {
        Ok(_) => NextSandbox::Open(b),
        Err(e) if e.from.is_finished() => NextSandbox::Fresh,
        Err(_) => NextSandbox::Busy(state),
    })
}

/// Writes a new run `id` of `task`'s `stage` in `sandbox` as `n` describes it: its
/// session (`starting`), its starting size, its sandbox active, the task's sandbox set.
async fn insert_task_run(
    conn: &mut sqlx::AnyConnection,
    n: &NewTaskSession,
    task: &TaskRow,
    stage: &str,
    sandbox: SandboxId,
    at: &str,
    actor: &str,
) -> Result<SessionId> {
    let id = SessionId::new();
    sqlx::query(
        "INSERT INTO sessions (id, workspace_id, sandbox_id, device_id, command, cwd, cols, rows, outcome, created_by, created_at, task_id, stage, agent_id, operator_id)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $14, $9, $10, $11, $12, $13, (SELECT operator_id FROM agents WHERE id = $13))",
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
    .bind(at)
    .bind(task.id.to_string())
    .bind(stage)
    .bind(n.agent.to_string())
    .bind(Outcome::Starting.as_str())
    .execute(&mut *conn)
    .await?;
    Store::add_start_size(&mut *conn, id, n.cols, n.rows).await?;
    sqlx::query("UPDATE sandboxes SET state = 'active', live = 1, runs = runs + 1, last_session_id = $1, updated_at = $2 WHERE id = $3")
        .bind(id.to_string())
        .bind(at)
        .bind(sandbox.to_string())
        .execute(&mut *conn)
        .await?;
    sqlx::query("UPDATE tasks SET sandbox_id = $1, updated_at = $2 WHERE id = $3")
        .bind(sandbox.to_string())
        .bind(at)
        .bind(task.id.to_string())
        .execute(&mut *conn)
        .await?;
    Ok(id)
}

/// The execution route a run of `agent` starts on (seed 002), as its "session started"
/// activity records it.
async fn agent_route(conn: &mut sqlx::AnyConnection, agent: AgentId) -> Result<Option<serde_json::Value>> {
    let r = sqlx::query("SELECT harness, provider, account, model, effort FROM agents WHERE id = $1")
        .bind(agent.to_string())
        .fetch_optional(&mut *conn)
        .await?;
    Ok(r.map(|r| {
        serde_json::json!({
            "harness": r.get::<String, _>("harness"),
            "provider": r.get::<Option<String>, _>("provider"),
            "account": r.get::<Option<String>, _>("account"),
            "model": r.get::<Option<String>, _>("model"),
            "effort": r.get::<Option<String>, _>("effort"),
        })
    }))
}

impl Store {
    /// Creates the run for a task's current stage: its sandbox (created on first use, on
    /// `device`, on the task's branch), the session, and takes the task off the queue.
    /// None (nothing created) unless the task is still open, waiting, unflagged, at
    /// `n.stage_index` and without a live run: the check and the writes share one lock.
    pub async fn create_task_session(&self, n: &NewTaskSession, actor: &str) -> Result<Option<(SessionId, SandboxId)>> {
        let mut tx = self.write().await?;
        if !claim_slot(&mut tx, n).await? {
            return Ok(None);
        }
        let task = task_row(&sqlx::query(&format!("{TASK_SELECT} WHERE t.id = $1")).bind(n.task.to_string()).fetch_one(&mut *tx).await?)?;
        let stage = task.stage().map(|s| s.stage.clone()).ok_or_else(|| StoreError::Corrupt("staffing a finished task".into()))?;
        let at = now();
        let sandbox = match next_sandbox(&mut tx, &task).await? {
            NextSandbox::Open(b) => b,
            NextSandbox::Fresh => insert_task_sandbox(&mut tx, &task, n.device, &n.cwd, &n.branch, &at).await?,
            NextSandbox::Busy(state) => {
                // Not a run of the stage after all: the slot's attempt is given back.
                let why = busy_sandbox_flag(state);
                sqlx::query("UPDATE tasks SET flagged = $1, attempts = attempts - 1 WHERE id = $2")
                    .bind(&why)
                    .bind(task.id.to_string())
                    .execute(&mut *tx)
                    .await?;
                let e = NewEvent::for_task(&task, None, EventKind::TaskFlagged, actor, serde_json::json!({ "reason": why }));
                self.commit_with_event(tx, &e).await?;
                return Ok(None);
            }
        };
        let id = insert_task_run(&mut tx, n, &task, &stage, sandbox, &at, actor).await?;
        let route = agent_route(&mut tx, n.agent).await?;
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
        let r = sqlx::query(&format!("{SESSION_SELECT} WHERE s.task_id = $1 AND s.outcome IN {LIVE} ORDER BY s.created_at DESC LIMIT 1"))
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
        let claimed = sqlx::query(concat!(
            "UPDATE tasks SET queued_at = NULL, updated_at = $3 WHERE id = $1 AND status = 'open' AND stage_index = $2
             AND queued_at IS NOT NULL AND flagged IS NULL
             AND NOT EXISTS (SELECT 1 FROM sessions WHERE task_id = $1 AND outcome IN ",
            live_outcomes!(),
            ")"
        ))
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

    /// Marks a session to complete when it ends (Mark done), with `why`.
    pub async fn mark_completing(&self, session: SessionId, why: &str) -> Result<()> {
        sqlx::query("UPDATE sessions SET handed_off = COALESCE(handed_off, $1) WHERE id = $2")
            .bind(why)
            .bind(session.to_string())
            .execute(&self.writes)
            .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tasks::tests::chore;

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
}

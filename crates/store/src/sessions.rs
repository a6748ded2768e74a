//! Sessions (runs) and their sandboxes.

use drover_core::activity::{ending_kind, EventKind};
use drover_core::outcome::{decide_end, on_started, EndDecision, EndEvidence, Ending};
use drover_core::{DeviceId, Outcome, RunEnd, SandboxId, SandboxState, SessionId, WorkspaceId};
use sqlx::Row;

use crate::events::{insert, NewEvent};
use crate::{now, parse_id, Result, Store, StoreError, LIVE};

/// A session to create (with its task-free "Remote" sandbox).
#[derive(Debug, Clone)]
pub struct NewSession {
    /// The workspace it runs in.
    pub workspace: WorkspaceId,
    /// The device it runs on.
    pub device: DeviceId,
    /// The program to start, with its arguments.
    pub command: Vec<String>,
    /// The directory it starts in on its device.
    pub cwd: String,
    /// The title of its Remote sandbox, as lists show it.
    pub title: String,
    /// The terminal's width to start with, in columns.
    pub cols: u16,
    /// The terminal's height to start with, in rows.
    pub rows: u16,
    /// Who started it (the activity's actor).
    pub created_by: String,
    /// The member it answers to (who may drop in besides admins): whoever started it.
    pub operator: Option<drover_core::MemberId>,
}

/// A model switch in a run, as its device reported it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteChange {
    /// The model the run used until the switch.
    pub from: String,
    /// The model the run switched to.
    pub to: String,
    /// When the switch happened, as the device reported it.
    pub at: Option<String>,
}

/// When a run started and ended (stored format).
#[derive(Debug, Clone, Copy)]
pub struct RunTimes<'a> {
    /// When its program started, if known (kept if already recorded).
    pub started_at: Option<&'a str>,
    /// When it ended (stored format).
    pub ended_at: &'a str,
}

/// A session as stored, with its sandbox and device.
#[derive(Debug, Clone)]
pub struct SessionRow {
    /// Its id, as the API, the CLI and its recording name it.
    pub id: SessionId,
    /// The workspace it runs in.
    pub workspace: WorkspaceId,
    /// The sandbox it runs in.
    pub sandbox: SandboxId,
    /// Its sandbox's lifecycle state (seed 001).
    pub sandbox_state: SandboxState,
    /// Its sandbox's title, as lists show it.
    pub title: String,
    /// The device it runs on.
    pub device: DeviceId,
    /// Its device's name, for display and the end's actor.
    pub device_name: String,
    /// The program it runs, with its arguments.
    pub command: Vec<String>,
    /// The directory it runs in on its device.
    pub cwd: String,
    /// The terminal's width now, in columns.
    pub cols: u16,
    /// The terminal's height now, in rows.
    pub rows: u16,
    /// Whether it is live, or how it ended (seed 001).
    pub outcome: Outcome,
    /// Its process's exit code (128 + signal when killed), once it exited.
    pub exit_code: Option<i32>,
    /// Why it ended.
    pub reason: Option<String>,
    /// Who started it: a person, or the scheduler for a task run.
    pub created_by: String,
    /// When it was created (stored format): lists are newest first.
    pub created_at: String,
    /// When its program started.
    pub started_at: Option<String>,
    /// When it ended.
    pub ended_at: Option<String>,
    /// Output stored (the committed length: what the server acknowledges).
    pub output_bytes: u64,
    /// Output length reported at the end.
    pub final_offset: Option<u64>,
    /// Who asked for a Stop, if anyone did: a Stop that ends it is theirs.
    pub stop_requested_by: Option<String>,
    /// The task it works, if any.
    pub task: Option<drover_core::TaskId>,
    /// The stage it was staffed for.
    pub stage: Option<String>,
    /// The agent whose run it is (task runs).
    pub agent: Option<drover_core::AgentId>,
    /// Its agent's name, for display.
    pub agent_name: Option<String>,
    /// The name of its sandbox's repository (task runs).
    pub repo_name: Option<String>,
    /// The member it answers to: its agent's operator, or who started a task-free one.
    pub operator: Option<drover_core::MemberId>,
    /// Why it completes, once its work was handed off or retired with Mark done.
    pub handed_off: Option<String>,
    /// The stale monitor's warning on it, while live and flagged.
    pub stale_flag: Option<drover_core::liveness::StaleFlag>,
    /// When its recording and events were pruned (retention), if they were.
    pub pruned_at: Option<String>,
    /// Its model usage as last reported (JSON), if any was.
    pub usage: Option<String>,
    /// Why a stop was requested when not by a person (e.g. "spend cap: …").
    pub stop_reason: Option<String>,
    /// Which skills reached it (JSON), as its device reported.
    pub skills: Option<String>,
    /// When its output last arrived (stored time); None before any.
    pub last_output_at: Option<String>,
}

pub(crate) const SESSION_SELECT: &str = session_select!();

pub(crate) fn session_row(r: &sqlx::any::AnyRow) -> Result<SessionRow> {
    let outcome: String = r.get("outcome");
    let state: String = r.get("sandbox_state");
    let command: String = r.get("command");
    Ok(SessionRow {
        id: parse_id(r.get("id"))?,
        workspace: parse_id(r.get("workspace_id"))?,
        sandbox: parse_id(r.get("sandbox_id"))?,
        sandbox_state: SandboxState::parse(&state).ok_or_else(|| StoreError::Corrupt(format!("sandbox state {state}")))?,
        title: r.get("title"),
        device: parse_id(r.get("device_id"))?,
        device_name: r.get("device_name"),
        command: serde_json::from_str(&command).map_err(|e| StoreError::Corrupt(e.to_string()))?,
        cwd: r.get("cwd"),
        cols: r.get::<i64, _>("cols") as u16,
        rows: r.get::<i64, _>("rows") as u16,
        outcome: Outcome::parse(&outcome).ok_or_else(|| StoreError::Corrupt(format!("outcome {outcome}")))?,
        exit_code: r.get::<Option<i64>, _>("exit_code").map(|c| c as i32),
        reason: r.get("reason"),
        created_by: r.get("created_by"),
        created_at: r.get("created_at"),
        started_at: r.get("started_at"),
        ended_at: r.get("ended_at"),
        output_bytes: r.get::<i64, _>("committed_length") as u64,
        final_offset: r.get::<Option<i64>, _>("final_offset").map(|c| c as u64),
        stop_requested_by: r.get("stop_requested_by"),
        task: r.get::<Option<String>, _>("task_id").as_deref().map(parse_id).transpose()?,
        stage: r.get("stage"),
        agent: r.get::<Option<String>, _>("agent_id").as_deref().map(parse_id).transpose()?,
        agent_name: r.get("agent_name"),
        repo_name: r.get("repo_name"),
        operator: r.get::<Option<String>, _>("operator_id").as_deref().map(parse_id).transpose()?,
        handed_off: r.get("handed_off"),
        stale_flag: r.get::<Option<String>, _>("stale_flag").as_deref().and_then(drover_core::liveness::StaleFlag::parse),
        pruned_at: r.get("pruned_at"),
        usage: r.get("usage"),
        stop_reason: r.get("stop_reason"),
        skills: r.get("skills"),
        last_output_at: r.get::<Option<i64>, _>("live_output_at").and_then(crate::micros_time).or_else(|| r.get("last_output_at")),
    })
}

impl Store {
    /// Creates a session in state `starting` with an active Remote sandbox, and records
    /// "session started", in one transaction.
    pub async fn create_session(&self, s: &NewSession) -> Result<SessionId> {
        let (id, sandbox, at) = (SessionId::new(), SandboxId::new(), now());
        let mut tx = self.write().await?;
        sqlx::query(
            "INSERT INTO sandboxes (id, workspace_id, device_id, kind, title, cwd, state, created_at, updated_at, last_session_id, runs, live)
             VALUES ($1, $2, $3, 'remote', $4, $5, 'active', $6, $7, $8, 1, 1)",
        )
        .bind(sandbox.to_string())
            .bind(s.workspace.to_string())
            .bind(s.device.to_string())
            .bind(&s.title)
            .bind(&s.cwd)
            .bind(&at)
            .bind(&at)
            .bind(id.to_string())
            .execute(&mut *tx)
            .await?;
        sqlx::query(
            "INSERT INTO sessions (id, workspace_id, sandbox_id, device_id, command, cwd, cols, rows, outcome, created_by, created_at, operator_id)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $12, $9, $10, $11)",
        )
        .bind(id.to_string())
        .bind(s.workspace.to_string())
        .bind(sandbox.to_string())
        .bind(s.device.to_string())
        .bind(serde_json::to_string(&s.command).expect("strings serialise"))
        .bind(&s.cwd)
        .bind(s.cols as i64)
        .bind(s.rows as i64)
        .bind(&s.created_by)
        .bind(&at)
        .bind(s.operator.map(|m| m.to_string()))
        .bind(Outcome::Starting.as_str())
        .execute(&mut *tx)
        .await?;
        Store::add_start_size(&mut tx, id, s.cols, s.rows).await?;
        let detail = serde_json::json!({ "command": s.command, "cwd": s.cwd, "title": s.title });
        insert(
            &mut tx,
            &NewEvent {
                workspace: s.workspace,
                session: Some(id),
                task: None,
                kind: EventKind::SessionStarted,
                actor: s.created_by.clone(),
                detail,
            },
        )
        .await?;
        tx.commit().await?;
        self.changed(s.workspace, Some(id));
        Ok(id)
    }

    /// Stores a run's latest usage report (`usage`, JSON) with its cost in nano-dollars,
    /// and records each route change not yet recorded ("route changed", by the agent).
    /// Returns the run's agent and the report it replaced (None: no such session).
    pub async fn record_usage(
        &self,
        id: SessionId,
        usage: &str,
        cost: drover_core::spend::Cost,
        unpriced: u64,
        routes: &[RouteChange],
    ) -> Result<Option<RecordedUsage>> {
        let mut tx = self.write().await?;
        let row = sqlx::query(
            "SELECT s.workspace_id, s.route_changes, s.usage, a.name AS agent FROM sessions s LEFT JOIN agents a ON a.id = s.agent_id WHERE s.id = $1",
        )
        .bind(id.to_string())
        .fetch_optional(&mut *tx)
        .await?;
        let Some(row) = row else { return Ok(None) };
        let recorded_usage = RecordedUsage { agent: row.get("agent"), previous: row.get("usage") };
        let workspace: WorkspaceId = parse_id(row.get("workspace_id"))?;
        let recorded = row.get::<i64, _>("route_changes").max(0) as usize;
        let actor = row.get::<Option<String>, _>("agent").map(|a| format!("agent {a}")).unwrap_or_else(|| "harness".into());
        for change in routes.iter().skip(recorded) {
            let detail = serde_json::json!({ "from": change.from, "to": change.to, "at": change.at });
            insert(
                &mut tx,
                &NewEvent { workspace, session: Some(id), task: None, kind: EventKind::RouteChanged, actor: actor.clone(), detail },
            )
            .await?;
        }
        sqlx::query("UPDATE sessions SET usage = $1, cost_generation = $2, cost_cache_read = $3, cost_unpriced = $4, route_changes = CASE WHEN route_changes > $5 THEN route_changes ELSE $5 END WHERE id = $6")
            .bind(usage)
            .bind(cost.generation as i64)
            .bind(cost.cache_read as i64)
            .bind(unpriced as i64)
            .bind(routes.len() as i64)
            .bind(id.to_string())
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        self.changed(workspace, Some(id));
        Ok(Some(recorded_usage))
    }

    /// One session.
    pub async fn session(&self, id: SessionId) -> Result<Option<SessionRow>> {
        let row = sqlx::query(&format!("{SESSION_SELECT} WHERE s.id = $1")).bind(id.to_string()).fetch_optional(&self.pool).await?;
        row.as_ref().map(session_row).transpose()
    }

    /// Sessions of a workspace, newest first; only live ones unless `all`.
    pub async fn list_sessions(&self, workspace: WorkspaceId, all: bool, limit: i64) -> Result<Vec<SessionRow>> {
        let filter = if all { "" } else { concat!("AND s.outcome IN ", live_outcomes!()) };
        let rows =
            sqlx::query(&format!("{SESSION_SELECT} WHERE s.workspace_id = $1 {filter} ORDER BY s.created_at DESC, s.id DESC LIMIT $2"))
                .bind(workspace.to_string())
                .bind(limit)
                .fetch_all(&self.pool)
                .await?;
        rows.iter().map(session_row).collect()
    }

    /// Live sessions on a device (uses the partial index).
    pub async fn live_sessions_on(&self, device: DeviceId) -> Result<Vec<SessionRow>> {
        let rows = sqlx::query(&format!("{SESSION_SELECT} WHERE s.device_id = $1 AND s.outcome IN {LIVE}"))
            .bind(device.to_string())
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(session_row).collect()
    }

    /// `starting → running`, as core's run state machine allows ([`on_started`]),
    /// decided and written under the write lock; false if the session was not starting.
    pub async fn mark_running(&self, id: SessionId, pid: u32, cwd: &str) -> Result<bool> {
        let mut tx = self.write().await?;
        let row =
            sqlx::query("SELECT workspace_id, outcome FROM sessions WHERE id = $1").bind(id.to_string()).fetch_optional(&mut *tx).await?;
        let Some(row) = row else { return Ok(false) };
        let Ok(to) = on_started(stored_outcome(&row)?) else { return Ok(false) };
        sqlx::query("UPDATE sessions SET outcome = $1, pid = $2, cwd = $3, started_at = $4 WHERE id = $5")
            .bind(to.as_str())
            .bind(pid as i64)
            .bind(cwd)
            .bind(now())
            .bind(id.to_string())
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        self.changed(parse_id(row.get("workspace_id"))?, Some(id));
        Ok(true)
    }

    /// A device's sessions, newest first, created before `before` (created_at, id).
    pub async fn list_device_sessions(&self, device: DeviceId, before: Option<(&str, SessionId)>, limit: i64) -> Result<Vec<SessionRow>> {
        let rows = sqlx::query(&format!(
            "{SESSION_SELECT} WHERE s.device_id = $1 AND ($2 IS NULL OR (s.created_at, s.id) < ($2, $3)) ORDER BY s.created_at DESC, s.id DESC LIMIT $4"
        ))
        .bind(device.to_string())
        .bind(before.map(|b| b.0.to_string()))
        .bind(before.map(|b| b.1.to_string()))
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(session_row).collect()
    }

    /// Notes who asked for a Stop (the outcome is decided when the process ends).
    pub async fn mark_stop_requested(&self, id: SessionId, by: &str) -> Result<()> {
        sqlx::query("UPDATE sessions SET stop_requested_by = $1 WHERE id = $2 AND stop_requested_by IS NULL")
            .bind(by)
            .bind(id.to_string())
            .execute(&self.writes)
            .await?;
        Ok(())
    }

    /// Records the terminal's current size.
    pub async fn set_size(&self, id: SessionId, cols: u16, rows: u16) -> Result<()> {
        sqlx::query("UPDATE sessions SET cols = $1, rows = $2 WHERE id = $3")
            .bind(cols as i64)
            .bind(rows as i64)
            .bind(id.to_string())
            .execute(&self.writes)
            .await?;
        Ok(())
    }

    /// Ends a live session as core decides ([`decide_end`]) from `end` and what its row
    /// says under the write lock (a hand-off or a Stop committed while the end was on its
    /// way still counts): stores the outcome, exit code, reason and end time, stops its
    /// Remote sandbox and records "session ended/killed/connection lost", in one
    /// transaction. `reporter` saw the end (`device box`). Returns the ending stored, or
    /// None (changing nothing) if the session had already ended.
    pub async fn end_session(
        &self,
        id: SessionId,
        end: &RunEnd,
        times: RunTimes<'_>,
        final_offset: u64,
        reporter: &str,
    ) -> Result<Option<Ending>> {
        let mut tx = self.write().await?;
        let row =
            sqlx::query("SELECT workspace_id, sandbox_id, outcome, handed_off, stop_requested_by, stop_reason FROM sessions WHERE id = $1")
                .bind(id.to_string())
                .fetch_optional(&mut *tx)
                .await?;
        let Some(row) = row else { return Ok(None) };
        let (handed_off, stop_requested_by, stop_reason): (Option<String>, Option<String>, Option<String>) =
            (row.get("handed_off"), row.get("stop_requested_by"), row.get("stop_reason"));
        let evidence = EndEvidence {
            outcome: stored_outcome(&row)?,
            handed_off: handed_off.as_deref(),
            stop_requested_by: stop_requested_by.as_deref(),
            stop_reason: stop_reason.as_deref(),
            reporter,
        };
        let Ok(EndDecision { ending, actor }) = decide_end(&evidence, end) else { return Ok(None) };
        let workspace: WorkspaceId = parse_id(row.get("workspace_id"))?;
        store_ending(&mut tx, id, &ending, times, final_offset).await?;
        release_sandbox(&mut tx, row.get("sandbox_id")).await?;
        crate::attention::close_for_end(&mut tx, id).await?;
        let detail = serde_json::json!({ "outcome": ending.outcome, "exit_code": ending.exit_code, "reason": ending.reason });
        let kind = ending_kind(ending.outcome, ending.killed);
        insert(&mut tx, &NewEvent { workspace, session: Some(id), task: None, kind, actor, detail }).await?;
        tx.commit().await?;
        self.changed(workspace, Some(id));
        Ok(Some(ending))
    }
}

/// What [`Store::record_usage`] replaced: whose run it was and its report before.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecordedUsage {
    /// The run's agent (None: a task-free session).
    pub agent: Option<String>,
    /// The usage report (JSON) the new one replaced, if the run had one.
    pub previous: Option<String>,
}

/// A session row's `outcome` column.
fn stored_outcome(row: &sqlx::any::AnyRow) -> Result<Outcome> {
    let outcome: String = row.get("outcome");
    Outcome::parse(&outcome).ok_or_else(|| StoreError::Corrupt(format!("outcome {outcome}")))
}

/// Writes an ended session's row: its ending and times, and its output's length and last
/// output time, kept in its row from now on (while live they are read from its last
/// chunk, and its output may be pruned later).
async fn store_ending(tx: &mut sqlx::AnyConnection, id: SessionId, ending: &Ending, times: RunTimes<'_>, final_offset: u64) -> Result<()> {
    let last = sqlx::query(concat!(
        "SELECT ",
        committed_length!(),
        " AS output_end, o.stored_at FROM sessions s",
        last_chunk_join!(),
        " WHERE s.id = $1"
    ))
    .bind(id.to_string())
    .fetch_one(&mut *tx)
    .await?;
    let output_end: i64 = last.get("output_end");
    let last_output_at = last.get::<Option<i64>, _>("stored_at").and_then(crate::micros_time);
    sqlx::query(
        "UPDATE sessions SET outcome = $1, exit_code = $2, reason = $3, started_at = COALESCE(started_at, $4), ended_at = $5, final_offset = $6,
         output_bytes = $8, last_output_at = COALESCE($9, last_output_at) WHERE id = $7",
    )
    .bind(ending.outcome.as_str())
    .bind(ending.exit_code.map(i64::from))
    .bind(&ending.reason)
    .bind(times.started_at)
    .bind(times.ended_at)
    .bind(final_offset as i64)
    .bind(id.to_string())
    .bind(output_end)
    .bind(last_output_at)
    .execute(&mut *tx)
    .await?;
    Ok(())
}

/// A run of `sandbox` ended: a Remote sandbox stops with it, and the sandbox is live only
/// while another of its runs is.
async fn release_sandbox(tx: &mut sqlx::AnyConnection, sandbox: String) -> Result<()> {
    sqlx::query("UPDATE sandboxes SET state = 'stopped', updated_at = $1 WHERE id = $2 AND kind = 'remote' AND state = 'active'")
        .bind(now())
        .bind(&sandbox)
        .execute(&mut *tx)
        .await?;
    sqlx::query(concat!(
        "UPDATE sandboxes SET live = CASE WHEN EXISTS (SELECT 1 FROM sessions s WHERE s.sandbox_id = sandboxes.id AND s.outcome IN ",
        live_outcomes!(),
        ") THEN 1 ELSE 0 END WHERE id = $1"
    ))
    .bind(&sandbox)
    .execute(&mut *tx)
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::store;
    use crate::OutputChunk;
    use drover_core::outcome::RunEnd;
    use drover_core::ExitStatus;

    async fn session(s: &Store) -> (WorkspaceId, SessionId) {
        let (ws, _) = s.bootstrap("w", "alice").await.unwrap();
        let dev = s.upsert_device(ws, "box", 4).await.unwrap();
        let new = NewSession {
            workspace: ws,
            device: dev.id,
            command: vec!["cat".into()],
            cwd: "/".into(),
            title: "t".into(),
            cols: 80,
            rows: 24,
            created_by: "alice".into(),
            operator: None,
        };
        (ws, s.create_session(&new).await.unwrap())
    }

    #[tokio::test]
    async fn lifecycle_records_outcome_sandbox_state_and_events() {
        let (s, _d) = store().await;
        let (ws, id) = session(&s).await;
        assert_eq!(s.live_sessions_on(s.session(id).await.unwrap().unwrap().device).await.unwrap().len(), 1);
        assert!(s.mark_running(id, 42, "/").await.unwrap());
        assert!(!s.mark_running(id, 42, "/").await.unwrap());
        let ending = RunEnd::Exited { status: ExitStatus::code(0), stop_requested: false };
        assert!(s.end_session(id, &ending, RunTimes { started_at: None, ended_at: &now() }, 0, "device box").await.unwrap().is_some());
        assert!(s.end_session(id, &ending, RunTimes { started_at: None, ended_at: &now() }, 0, "device box").await.unwrap().is_none());
        let row = s.session(id).await.unwrap().unwrap();
        assert_eq!(row.outcome, Outcome::Incomplete);
        assert_eq!(row.sandbox_state, SandboxState::Stopped);
        assert_eq!(row.exit_code, Some(0));
        let events = s.list_events(ws, Some(id), 0, 10).await.unwrap();
        let kinds: Vec<_> = events.iter().map(|e| e.kind.as_str()).collect();
        assert_eq!(kinds, ["session_started", "session_ended"]);
        assert!(s.list_sessions(ws, false, 10).await.unwrap().is_empty());
        assert_eq!(s.list_sessions(ws, true, 10).await.unwrap().len(), 1);
    }

    #[tokio::test]
    async fn many_sessions_ending_at_once_all_end() {
        let (s, _d) = store().await;
        let (ws, _) = session(&s).await;
        let dev = s.upsert_device(ws, "box", 4).await.unwrap();
        let mut ids = Vec::new();
        for _ in 0..24 {
            let new = NewSession {
                workspace: ws,
                device: dev.id,
                command: vec!["true".into()],
                cwd: "/".into(),
                title: String::new(),
                cols: 80,
                rows: 24,
                created_by: "alice".into(),
                operator: None,
            };
            ids.push(s.create_session(&new).await.unwrap());
        }
        let ending = RunEnd::Exited { status: ExitStatus::code(0), stop_requested: false };
        let ends = ids.iter().map(|id| {
            let (s, ending) = (s.clone(), ending.clone());
            let id = *id;
            tokio::spawn(async move { s.end_session(id, &ending, RunTimes { started_at: None, ended_at: &now() }, 0, "device box").await })
        });
        for r in futures_join(ends).await {
            assert!(r.unwrap().unwrap().is_some(), "every end is stored (none fails with \"database is locked\")");
        }
        assert_eq!(s.count_live_sessions(ws).await.unwrap(), 1);
    }

    async fn futures_join<T>(
        handles: impl Iterator<Item = tokio::task::JoinHandle<T>>,
    ) -> Vec<std::result::Result<T, tokio::task::JoinError>> {
        let mut out = Vec::new();
        for h in handles.collect::<Vec<_>>() {
            out.push(h.await);
        }
        out
    }

    #[tokio::test]
    async fn output_is_appended_by_offset_without_doubling() {
        let (s, _d) = store().await;
        let (_, id) = session(&s).await;
        let c = |offset: u64, data: &[u8]| OutputChunk { session: id, offset, t_micros: offset, data: bytes::Bytes::copy_from_slice(data) };
        let held = s.append_output(vec![c(0, b"hello "), c(6, b"world")]).await.unwrap();
        assert_eq!(held[&id], 11);
        // A resend overlapping what is held is trimmed, not stored twice.
        let held = s.append_output(vec![c(3, b"lo world!"), c(0, b"he")]).await.unwrap();
        assert_eq!(held[&id], 12);
        let all: Vec<u8> = s.read_output(id, 0, 1 << 20).await.unwrap().into_iter().flat_map(|c| c.data).collect();
        assert_eq!(all, b"hello world!");
        let tail: Vec<u8> = s.read_output(id, 8, 1 << 20).await.unwrap().into_iter().flat_map(|c| c.data).collect();
        assert_eq!(tail, b"rld!");
        assert_eq!(s.session(id).await.unwrap().unwrap().output_bytes, 12);
        // Bytes lost before reaching the server leave a NUL-filled gap; offsets hold.
        let held = s.append_output(vec![c(15, b"late")]).await.unwrap();
        assert_eq!(held[&id], 19);
        let all: Vec<u8> = s.read_output(id, 10, 1 << 20).await.unwrap().into_iter().flat_map(|c| c.data).collect();
        assert_eq!(all, b"d!\0\0\0late");
    }
}

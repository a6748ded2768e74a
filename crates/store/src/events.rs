//! The activity record: append-only, numbered, read back in order.

use drover_core::activity::EventKind;
use drover_core::webhook::WebhookEvent;
use drover_core::{EventId, SessionId, TaskId, WorkspaceId};
use sqlx::{AnyConnection, Row};

use crate::{now, Result, Store};

/// An event to record.
#[derive(Debug, Clone)]
pub struct NewEvent {
    /// The workspace whose activity it is in.
    pub workspace: WorkspaceId,
    /// The session it concerns, if any.
    pub session: Option<SessionId>,
    /// The task it concerns, if any (else the session's task, if it has one).
    pub task: Option<TaskId>,
    /// What happened.
    pub kind: EventKind,
    /// Who did it.
    pub actor: String,
    /// Details (JSON object).
    pub detail: serde_json::Value,
}

impl NewEvent {
    /// An event about `task` (and, when it concerns one of its runs, `session`).
    pub fn for_task(
        task: &crate::TaskRow,
        session: Option<SessionId>,
        kind: EventKind,
        actor: impl Into<String>,
        detail: serde_json::Value,
    ) -> NewEvent {
        NewEvent { workspace: task.workspace, session, task: Some(task.id), kind, actor: actor.into(), detail }
    }
}

/// A recorded event.
#[derive(Debug, Clone)]
pub struct EventRow {
    /// Sequence number: the order of the record.
    pub seq: i64,
    /// Its id, as the API names it (the sequence number orders events).
    pub id: String,
    /// The session it concerns, if any: the session's activity lists it.
    pub session: Option<String>,
    /// The task it concerns, if any: the task's activity lists it.
    pub task: Option<String>,
    /// The title of the session's sandbox, when it concerns a session.
    pub session_title: Option<String>,
    /// The task's title, when it concerns a task.
    pub task_title: Option<String>,
    /// What happened, as its snake_case word (`session_started`, …).
    pub kind: String,
    /// Who did it.
    pub actor: String,
    /// What the event carries beyond its kind (JSON object).
    pub detail: serde_json::Value,
    /// When it was recorded (stored format).
    pub at: String,
    /// The operator of the session it concerns (who may drop in to it besides owners and
    /// admins), if it has one.
    pub session_operator: Option<String>,
}

/// Columns of an [`EventRow`], from `events`, with the titles of what it concerns.
const EVENT_SELECT: &str = "SELECT seq, id, session_id, task_id, kind, actor, detail, at,
    (SELECT b.title FROM sessions s JOIN sandboxes b ON b.id = s.sandbox_id WHERE s.id = events.session_id) AS session_title,
    (SELECT t.title FROM tasks t WHERE t.id = events.task_id) AS task_title,
    (SELECT s.operator_id FROM sessions s WHERE s.id = events.session_id) AS session_operator
    FROM events";

/// Inserts an event inside an open transaction; returns its id. The webhook deliveries
/// it fires and the push notices it makes are written in the same transaction, before
/// anything is sent.
pub(crate) async fn insert(conn: &mut AnyConnection, e: &NewEvent) -> Result<EventId> {
    let id = EventId::new();
    let at = now();
    let r = sqlx::query(
        "INSERT INTO events (id, workspace_id, session_id, task_id, kind, actor, detail, at)
         VALUES ($1, $2, $3, COALESCE($4, (SELECT task_id FROM sessions WHERE id = $3)), $5, $6, $7, $8)
         RETURNING seq, task_id",
    )
    .bind(id.to_string())
    .bind(e.workspace.to_string())
    .bind(e.session.map(|s| s.to_string()))
    .bind(e.task.map(|t| t.to_string()))
    .bind(e.kind.as_str())
    .bind(&e.actor)
    .bind(e.detail.to_string())
    .bind(&at)
    .fetch_one(&mut *conn)
    .await?;
    if let Some(hook) = WebhookEvent::for_event(e.kind) {
        // A webhook carries what every member may see: typed text and held commands
        // stay with those who may drop in.
        let mut detail = e.detail.clone();
        drover_core::activity::need_to_know::conceal(e.kind.as_str(), &mut detail);
        let payload = serde_json::json!({
            "type": hook.as_str(),
            "timestamp": at,
            "data": {
                "event": id.to_string(),
                "seq": r.get::<i64, _>("seq"),
                "kind": e.kind.as_str(),
                "workspace": e.workspace.to_string(),
                "session": e.session.map(|s| s.to_string()),
                "task": r.get::<Option<String>, _>("task_id"),
                "actor": e.actor,
                "detail": detail,
            }
        });
        crate::webhooks::enqueue(conn, e.workspace, hook, &payload.to_string(), &at).await?;
    }
    crate::push::fan_out(conn, e, &at).await?;
    Ok(id)
}

impl Store {
    /// Records `e` in `tx`, commits, then tells live views (after the commit, so
    /// nobody hears of a change that did not happen).
    pub(crate) async fn commit_with_event(&self, mut tx: sqlx::Transaction<'static, sqlx::Any>, e: &NewEvent) -> Result<()> {
        insert(&mut tx, e).await?;
        tx.commit().await?;
        self.changed(e.workspace, e.session);
        Ok(())
    }

    /// The workspace's events at or after `since` (and before `until`, when given), after
    /// sequence number `after_seq`, oldest first: the audit export, page by page.
    pub async fn events_between(
        &self,
        workspace: WorkspaceId,
        since: &str,
        until: Option<&str>,
        after_seq: i64,
        limit: i64,
    ) -> Result<Vec<EventRow>> {
        let rows = sqlx::query(&format!(
            "{EVENT_SELECT}
             WHERE workspace_id = $1 AND at >= $2 AND ($3 IS NULL OR at < $4) AND seq > $5 ORDER BY seq LIMIT $6",
        ))
        .bind(workspace.to_string())
        .bind(since)
        .bind(until)
        .bind(until)
        .bind(after_seq)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.iter().map(event_row).collect())
    }

    /// Records one event durably, with the webhook deliveries it fires, atomically.
    pub async fn record_event(&self, e: &NewEvent) -> Result<EventId> {
        let mut tx = self.write().await?;
        let id = insert(&mut tx, e).await?;
        tx.commit().await?;
        self.changed(e.workspace, e.session);
        Ok(id)
    }

    /// A run's latest evidence of progress (seed 002: a live process is not progress):
    /// its newest hand-off, commit, comment, blocker or question, as (kind, when).
    pub async fn last_progress(&self, session: SessionId) -> Result<Option<(String, String)>> {
        let r = sqlx::query(
            "SELECT kind, at FROM events WHERE session_id = $1
             AND kind IN ('stage_advanced', 'commit', 'comment', 'blocker_filed', 'blocker_resolved', 'question_asked')
             ORDER BY seq DESC LIMIT 1",
        )
        .bind(session.to_string())
        .fetch_optional(&self.pool)
        .await?;
        Ok(r.map(|r| (r.get("kind"), r.get("at"))))
    }

    /// A task's events (its Activity timeline), oldest first.
    pub async fn task_events(&self, task: TaskId, limit: i64) -> Result<Vec<EventRow>> {
        let rows = sqlx::query(&format!("{EVENT_SELECT} WHERE task_id = $1 ORDER BY seq LIMIT $2",))
            .bind(task.to_string())
            .bind(limit)
            .fetch_all(&self.pool)
            .await?;
        Ok(rows.iter().map(event_row).collect())
    }

    /// A workspace's events, newest first, before `before_seq` (all when None).
    pub async fn list_events_before(&self, workspace: WorkspaceId, before_seq: Option<i64>, limit: i64) -> Result<Vec<EventRow>> {
        let rows = sqlx::query(&format!(
            "{EVENT_SELECT}
             WHERE workspace_id = $1 AND ($2 IS NULL OR seq < $3) ORDER BY seq DESC LIMIT $4",
        ))
        .bind(workspace.to_string())
        .bind(before_seq)
        .bind(before_seq)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.iter().map(event_row).collect())
    }

    /// The newest event's sequence number in a workspace (0 when none).
    pub async fn latest_event_seq(&self, workspace: WorkspaceId) -> Result<i64> {
        let seq: Option<i64> = sqlx::query_scalar("SELECT MAX(seq) FROM events WHERE workspace_id = $1")
            .bind(workspace.to_string())
            .fetch_one(&self.pool)
            .await?;
        Ok(seq.unwrap_or(0))
    }

    /// Events of a workspace (or of one session) after `after_seq`, oldest first.
    pub async fn list_events(
        &self,
        workspace: WorkspaceId,
        session: Option<SessionId>,
        after_seq: i64,
        limit: i64,
    ) -> Result<Vec<EventRow>> {
        let rows = sqlx::query(&format!(
            "{EVENT_SELECT}
             WHERE workspace_id = $1 AND seq > $2 AND ($3 IS NULL OR session_id = $4) ORDER BY seq LIMIT $5",
        ))
        .bind(workspace.to_string())
        .bind(after_seq)
        .bind(session.map(|s| s.to_string()))
        .bind(session.map(|s| s.to_string()))
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.iter().map(event_row).collect())
    }
}

fn event_row(r: &sqlx::any::AnyRow) -> EventRow {
    EventRow {
        seq: r.get("seq"),
        id: r.get("id"),
        task: r.get("task_id"),
        session: r.get("session_id"),
        session_title: r.get("session_title"),
        task_title: r.get("task_title"),
        kind: r.get("kind"),
        actor: r.get("actor"),
        detail: serde_json::from_str(r.get::<&str, _>("detail")).unwrap_or(serde_json::Value::Null),
        at: r.get("at"),
        session_operator: r.get("session_operator"),
    }
}

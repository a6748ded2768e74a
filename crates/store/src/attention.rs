//! What runs wait on a person for (`attention`), and the allow rules people kept for a
//! task (`task_allow_rules`). An item is open until a person decides it, the harness
//! moves on, a newer item of its kind replaces it, or its run ends.

use drover_core::activity::EventKind;
use drover_core::attention::{AttentionKind, Decision, HeldCall};
use drover_core::{AttentionId, SessionId, TaskId, WorkspaceId};
use sqlx::Row;

use crate::events::NewEvent;
use crate::{now, parse_id, Result, SessionRow, Store, StoreError};

/// Most inbox items listed at once.
const INBOX_LIMIT: i64 = 200;

/// One thing a run waits (or waited) on a person for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttentionRow {
    /// Its id: what deciding it names.
    pub id: AttentionId,
    /// The workspace of its run.
    pub workspace: WorkspaceId,
    /// The run that waits.
    pub session: SessionId,
    /// The task the run works, if any.
    pub task: Option<TaskId>,
    /// What it waits for.
    pub kind: AttentionKind,
    /// A held call's tool, when it is a name.
    pub tool: Option<String>,
    /// A held call's command, file or input; a prompt's words; a guess's line.
    pub subject: String,
    /// An edit's change, when it is one.
    pub diff: Option<String>,
    /// The allow rules "Approve always" would keep.
    pub always: Vec<String>,
    /// The subject or diff was cut to fit (not approvable from Drover).
    pub clipped: bool,
    /// A hook holds the call for a decision.
    pub held: bool,
    /// When it was raised (stored format).
    pub raised_at: String,
    /// The decision taken, once one was.
    pub decision: Option<String>,
    /// The message sent with a denial.
    pub message: Option<String>,
    /// Who decided.
    pub decided_by: Option<String>,
    /// When it closed; None while it waits.
    pub closed_at: Option<String>,
    /// Why it closed: `decided`, `moved_on`, `replaced` or `ended`.
    pub closed_reason: Option<String>,
}

fn attention_row(r: &sqlx::any::AnyRow) -> Result<AttentionRow> {
    let kind: String = r.get("kind");
    Ok(AttentionRow {
        id: parse_id(r.get("id"))?,
        workspace: parse_id(r.get("workspace_id"))?,
        session: parse_id(r.get("session_id"))?,
        task: r.get::<Option<String>, _>("task_id").as_deref().map(parse_id).transpose()?,
        kind: AttentionKind::parse(&kind).ok_or_else(|| StoreError::Corrupt(format!("attention kind {kind:?}")))?,
        tool: r.get("tool"),
        subject: r.get("subject"),
        diff: r.get("diff"),
        always: serde_json::from_str(&r.get::<String, _>("always_rules")).unwrap_or_default(),
        clipped: r.get::<i64, _>("clipped") != 0,
        held: r.get::<i64, _>("held") != 0,
        raised_at: r.get("raised_at"),
        decision: r.get("decision"),
        message: r.get("message"),
        decided_by: r.get("decided_by"),
        closed_at: r.get("closed_at"),
        closed_reason: r.get("closed_reason"),
    })
}

/// What a run is raised as waiting on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NewAttention {
    /// A tool call a hook holds for a decision.
    Held(HeldCall),
    /// A permission prompt the harness shows in its own terminal.
    Prompt(String),
    /// A finished turn.
    Idle,
    /// A guess from a still screen, with the line it shows.
    Guess(String),
}

impl NewAttention {
    fn kind(&self) -> AttentionKind {
        match self {
            NewAttention::Held(_) | NewAttention::Prompt(_) => AttentionKind::Permission,
            NewAttention::Idle => AttentionKind::Idle,
            NewAttention::Guess(_) => AttentionKind::ProbablyWaiting,
        }
    }
}

/// Closes a session's open items (all, or those matching `only`), in `tx`.
async fn close_open(tx: &mut sqlx::AnyConnection, session: SessionId, only: &str, reason: &str) -> Result<u64> {
    let sql = format!("UPDATE attention SET closed_at = $1, closed_reason = $2 WHERE session_id = $3 AND closed_at IS NULL {only}");
    let done = sqlx::query(&sql).bind(now()).bind(reason).bind(session.to_string()).execute(&mut *tx).await?;
    Ok(done.rows_affected())
}

/// Ends what a run waited on, in the transaction that ends the run.
pub(crate) async fn close_for_end(tx: &mut sqlx::AnyConnection, session: SessionId) -> Result<()> {
    close_open(tx, session, "", "ended").await.map(|_| ())
}

impl Store {
    /// Raises what `run` now waits on, and records it (firing `session.needs_input`).
    /// A held call stands beside others; a prompt, a finished turn or a guess replaces
    /// the run's open items that no hook holds. None if the run is no longer live.
    pub async fn raise_attention(&self, run: &SessionRow, item: &NewAttention, actor: &str) -> Result<Option<AttentionId>> {
        let id = AttentionId::new();
        let mut tx = self.write().await?;
        let live: Option<String> =
            sqlx::query_scalar(&format!("SELECT outcome FROM sessions WHERE id = $1 AND outcome IN {}", crate::LIVE))
                .bind(run.id.to_string())
                .fetch_optional(&mut *tx)
                .await?;
        if live.is_none() {
            return Ok(None);
        }
        if !matches!(item, NewAttention::Held(_)) {
            close_open(&mut tx, run.id, "AND held = 0", "replaced").await?;
        }
        let (tool, subject, diff, always, clipped) = match item {
            NewAttention::Held(h) => (h.tool.clone(), h.subject.clone(), h.diff.clone(), h.always.clone(), h.clipped),
            NewAttention::Prompt(s) | NewAttention::Guess(s) => (None, s.clone(), None, Vec::new(), false),
            NewAttention::Idle => (None, String::new(), None, Vec::new(), false),
        };
        let kind = item.kind();
        sqlx::query(
            "INSERT INTO attention (id, workspace_id, session_id, task_id, kind, tool, subject, diff, always_rules, clipped, held, raised_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
        )
        .bind(id.to_string())
        .bind(run.workspace.to_string())
        .bind(run.id.to_string())
        .bind(run.task.map(|t| t.to_string()))
        .bind(kind.as_str())
        .bind(tool.clone())
        .bind(subject.clone())
        .bind(diff)
        .bind(serde_json::to_string(&always).expect("strings serialise"))
        .bind(clipped as i64)
        .bind(matches!(item, NewAttention::Held(_)) as i64)
        .bind(now())
        .execute(&mut *tx)
        .await?;
        let detail = serde_json::json!({ "attention": id, "kind": kind.as_str(), "tool": tool, "subject": subject });
        let e = NewEvent {
            workspace: run.workspace,
            session: Some(run.id),
            task: run.task,
            kind: EventKind::AttentionRaised,
            actor: actor.into(),
            detail,
        };
        self.commit_with_event(tx, &e).await?;
        Ok(Some(id))
    }

    /// Closes the run's open items no hook holds (the harness moved on, its output
    /// resumed); with `held`, held calls too (its turn is over, so no hook waits). The
    /// number closed.
    pub async fn clear_attention(&self, run: &SessionRow, held: bool, reason: &str) -> Result<u64> {
        let mut tx = self.write().await?;
        let only = if held { "" } else { "AND held = 0" };
        let n = close_open(&mut tx, run.id, only, reason).await?;
        tx.commit().await?;
        if n > 0 {
            self.changed(run.workspace, Some(run.id));
        }
        Ok(n)
    }

    /// Closes the run's open guesses (its output resumed).
    pub async fn clear_guesses(&self, session: SessionId) -> Result<u64> {
        let mut tx = self.write().await?;
        let n = close_open(&mut tx, session, "AND kind = 'probably_waiting'", "moved_on").await?;
        let workspace: Option<String> = sqlx::query_scalar("SELECT workspace_id FROM sessions WHERE id = $1")
            .bind(session.to_string())
            .fetch_optional(&mut *tx)
            .await?;
        tx.commit().await?;
        if let (true, Some(ws)) = (n > 0, workspace) {
            self.changed(parse_id(&ws)?, Some(session));
        }
        Ok(n)
    }

    /// The harness of the agent a run works for (None for a task-free session).
    pub async fn run_harness(&self, session: SessionId) -> Result<Option<String>> {
        let h = sqlx::query_scalar("SELECT a.harness FROM sessions s JOIN agents a ON a.id = s.agent_id WHERE s.id = $1")
            .bind(session.to_string())
            .fetch_optional(&self.pool)
            .await?;
        Ok(h)
    }

    /// Records a person's decision on an open item (and, for "approve always", keeps
    /// its rules on the task); false if it had closed meanwhile.
    pub async fn decide_attention(&self, item: &AttentionRow, decision: &Decision, actor: &str) -> Result<bool> {
        let message = match decision {
            Decision::Deny(m) => Some(m.clone()),
            Decision::Approve | Decision::ApproveAlways => None,
        };
        let mut tx = self.write().await?;
        let done = sqlx::query(
            "UPDATE attention SET decision = $1, message = $2, decided_by = $3, closed_at = $4, closed_reason = 'decided'
             WHERE id = $5 AND closed_at IS NULL",
        )
        .bind(decision.as_str())
        .bind(message.clone())
        .bind(actor)
        .bind(now())
        .bind(item.id.to_string())
        .execute(&mut *tx)
        .await?;
        if done.rows_affected() == 0 {
            return Ok(false);
        }
        if let (Decision::ApproveAlways, Some(task)) = (decision, item.task) {
            keep_rules(&mut tx, task, &item.always, actor).await?;
        }
        let detail = serde_json::json!({ "attention": item.id, "decision": decision.as_str(), "tool": item.tool, "message": message });
        let e = NewEvent {
            workspace: item.workspace,
            session: Some(item.session),
            task: item.task,
            kind: EventKind::AttentionDecided,
            actor: actor.into(),
            detail,
        };
        self.commit_with_event(tx, &e).await?;
        Ok(true)
    }

    /// One item.
    pub async fn attention(&self, id: AttentionId) -> Result<Option<AttentionRow>> {
        let r = sqlx::query("SELECT * FROM attention WHERE id = $1").bind(id.to_string()).fetch_optional(&self.pool).await?;
        r.as_ref().map(attention_row).transpose()
    }

    /// What runs in the workspace wait on now, newest first (at most 200).
    pub async fn open_attention(&self, workspace: WorkspaceId) -> Result<Vec<AttentionRow>> {
        let rows =
            sqlx::query("SELECT * FROM attention WHERE workspace_id = $1 AND closed_at IS NULL ORDER BY raised_at DESC, id DESC LIMIT $2")
                .bind(workspace.to_string())
                .bind(INBOX_LIMIT)
                .fetch_all(&self.pool)
                .await?;
        rows.iter().map(attention_row).collect()
    }

    /// How many things wait on a person in the workspace: open items and open
    /// questions (the inbox's length, uncapped).
    pub async fn needs_you(&self, workspace: WorkspaceId) -> Result<u32> {
        let n: i64 = sqlx::query_scalar(
            "SELECT (SELECT COUNT(*) FROM attention WHERE workspace_id = $1 AND closed_at IS NULL)
                  + (SELECT COUNT(*) FROM notes n JOIN tasks t ON t.id = n.task_id
                     WHERE t.workspace_id = $1 AND n.kind = 'question' AND n.closed_at IS NULL)",
        )
        .bind(workspace.to_string())
        .fetch_one(&self.pool)
        .await?;
        Ok(n as u32)
    }

    /// What one run waits on now, newest first.
    pub async fn session_attention(&self, session: SessionId) -> Result<Vec<AttentionRow>> {
        let rows = sqlx::query("SELECT * FROM attention WHERE session_id = $1 AND closed_at IS NULL ORDER BY raised_at DESC, id DESC")
            .bind(session.to_string())
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(attention_row).collect()
    }

    /// What the live runs of `task` wait on now, newest first.
    pub async fn task_attention(&self, task: TaskId) -> Result<Vec<AttentionRow>> {
        let rows = sqlx::query("SELECT * FROM attention WHERE task_id = $1 AND closed_at IS NULL ORDER BY raised_at DESC, id DESC")
            .bind(task.to_string())
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(attention_row).collect()
    }

    /// How many items `session` raised in the last `window`, and how many of its
    /// held calls are open: what a run may raise is bounded.
    pub async fn attention_load(&self, session: SessionId, window: std::time::Duration) -> Result<(i64, i64)> {
        let since = crate::format_time(chrono::Utc::now() - chrono::Duration::from_std(window).unwrap_or_default());
        let r = sqlx::query(
            "SELECT (SELECT COUNT(*) FROM attention WHERE session_id = $1 AND raised_at >= $2) AS recent,
                    (SELECT COUNT(*) FROM attention WHERE session_id = $1 AND held = 1 AND closed_at IS NULL) AS held",
        )
        .bind(session.to_string())
        .bind(since)
        .fetch_one(&self.pool)
        .await?;
        Ok((r.get("recent"), r.get("held")))
    }

    /// The allow rules people kept for `task`, oldest first.
    pub async fn task_allow_rules(&self, task: TaskId) -> Result<Vec<String>> {
        let rules = sqlx::query_scalar("SELECT rule FROM task_allow_rules WHERE task_id = $1 ORDER BY added_at, rule")
            .bind(task.to_string())
            .fetch_all(&self.pool)
            .await?;
        Ok(rules)
    }
}

/// Keeps `rules` on `task` (those it has already are left as they are).
async fn keep_rules(tx: &mut sqlx::AnyConnection, task: TaskId, rules: &[String], actor: &str) -> Result<()> {
    for rule in rules {
        sqlx::query(
            "INSERT INTO task_allow_rules (task_id, rule, added_by, added_at) VALUES ($1, $2, $3, $4) ON CONFLICT (task_id, rule) DO NOTHING",
        )
        .bind(task.to_string())
        .bind(rule)
        .bind(actor)
        .bind(now())
        .execute(&mut *tx)
        .await?;
    }
    Ok(())
}

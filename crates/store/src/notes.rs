//! A task's blockers, questions and comments, and what earlier stages left for the next.

use drover_core::activity::EventKind;
use drover_core::harness::Earlier;
use drover_core::{NoteId, SessionId, TaskId};
use sqlx::Row;

use crate::events::NewEvent;
use crate::{now, parse_id, Result, Store, TaskRow};

/// Something earlier work on a task left for its next stage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EarlierNote {
    /// A stage's hand-off note.
    HandOff {
        /// The stage that was handed off.
        stage: String,
        /// Who handed it off (its run's agent, or a person).
        by: String,
        /// The hand-off note they wrote for the next stage.
        note: String,
    },
    /// A question a person answered.
    Answer {
        /// The question that was asked.
        question: String,
        /// The answer a person gave.
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

/// A blocker or a question.
#[derive(Debug, Clone)]
pub struct NoteRow {
    /// Its id: what answering or resolving it names.
    pub id: NoteId,
    /// The task it holds up.
    pub task: TaskId,
    /// The run that filed it, if a run did.
    pub session: Option<SessionId>,
    /// `blocker` or `question`.
    pub kind: String,
    /// What the agent or person asks or is blocked on.
    pub text: String,
    /// A question's answer, once a person gave one: passed to the next stage.
    pub answer: Option<String>,
    /// Who resolved or answered it.
    pub closed_by: Option<String>,
    /// When it was resolved or answered; None while it is open.
    pub closed_at: Option<String>,
    /// Who filed it (an agent, or a person).
    pub created_by: String,
    /// When it was filed (stored format): notes are listed oldest first.
    pub created_at: String,
}

fn note_row(r: &sqlx::any::AnyRow) -> Result<NoteRow> {
    Ok(NoteRow {
        id: parse_id(r.get("id"))?,
        task: parse_id(r.get("task_id"))?,
        session: r.get::<Option<String>, _>("session_id").as_deref().map(parse_id).transpose()?,
        kind: r.get("kind"),
        text: r.get("text"),
        answer: r.get("answer"),
        closed_by: r.get("closed_by"),
        closed_at: r.get("closed_at"),
        created_by: r.get("created_by"),
        created_at: r.get("created_at"),
    })
}

impl Store {
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
        let e = NewEvent::for_task(task, session, ev, actor, serde_json::json!({ "note": id, "text": text }));
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
        let e = NewEvent::for_task(task, session, ev, actor, serde_json::json!({ "note": note, "text": answer }));
        self.commit_with_event(tx, &e).await?;
        Ok(true)
    }

    /// One note.
    pub async fn note(&self, id: NoteId) -> Result<Option<NoteRow>> {
        let r = sqlx::query("SELECT * FROM notes WHERE id = $1").bind(id.to_string()).fetch_optional(&self.pool).await?;
        r.as_ref().map(note_row).transpose()
    }

    /// The workspace's open questions, newest first (at most 200), each with its task's
    /// title.
    pub async fn open_questions(&self, workspace: drover_core::WorkspaceId) -> Result<Vec<(NoteRow, String)>> {
        let rows = sqlx::query(
            "SELECT n.*, t.title AS task_title FROM notes n JOIN tasks t ON t.id = n.task_id
             WHERE t.workspace_id = $1 AND n.kind = 'question' AND n.closed_at IS NULL
             ORDER BY n.created_at DESC, n.id DESC LIMIT 200",
        )
        .bind(workspace.to_string())
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(|r| Ok((note_row(r)?, r.get("task_title")))).collect()
    }

    /// A task's blockers and questions, oldest first.
    pub async fn task_notes(&self, task: TaskId) -> Result<Vec<NoteRow>> {
        let rows = sqlx::query("SELECT * FROM notes WHERE task_id = $1 ORDER BY created_at, id")
            .bind(task.to_string())
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(note_row).collect()
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

    /// Whether the task waits on a person: an open question or blocker, or something one
    /// of its runs waits on (a held call, a finished turn, a guess).
    pub async fn waiting_on_person(&self, task: TaskId) -> Result<bool> {
        let n: i64 = sqlx::query_scalar(
            "SELECT (SELECT COUNT(*) FROM notes WHERE task_id = $1 AND closed_at IS NULL)
                  + (SELECT COUNT(*) FROM attention WHERE task_id = $1 AND closed_at IS NULL)",
        )
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
        let e = NewEvent::for_task(task, session, EventKind::Comment, actor, serde_json::json!({ "text": text }));
        self.record_event(&e).await?;
        Ok(())
    }
}

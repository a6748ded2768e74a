//! Handing a stage off: checked against the task's current stage and live run, then
//! the task moves to its next stage or is done.

use drover_core::activity::EventKind;
use drover_core::task::{after_hand_off, AfterHandOff, TaskStatus};
use drover_core::SessionId;
use drover_core::TaskId;

use crate::events::{insert, NewEvent};
use crate::tasks::{task_row, TASK_SELECT};
use crate::{now, Result, Store, TaskRow};

/// Why a hand-off was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HandOffRefused {
    /// The task is not open.
    TaskFinished(TaskStatus),
    /// The session is not the live run of the task's current stage.
    NotCurrent,
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
            sqlx::query_scalar::<_, i64>(concat!(
                "SELECT COUNT(*) FROM sessions
             WHERE id = $1 AND task_id = $2 AND stage = $3 AND outcome IN ",
                live_outcomes!(),
                " AND handed_off IS NULL"
            ))
            .bind(session.to_string())
            .bind(t.id.to_string())
            .bind(stage)
            .fetch_one(&mut *conn)
            .await?
                == 1
        }
        None => {
            sqlx::query_scalar::<_, i64>(concat!("SELECT COUNT(*) FROM sessions WHERE task_id = $1 AND outcome IN ", live_outcomes!()))
                .bind(t.id.to_string())
                .fetch_one(&mut *conn)
                .await?
                == 0
        }
    };
    Ok(if current { Ok(()) } else { Err(HandOffRefused::NotCurrent) })
}

/// Moves the task `t` past its current stage: to stage `next` (queued for a slot when an
/// agent is pinned to it), or done.
async fn advance(conn: &mut sqlx::AnyConnection, t: &TaskRow, next: AfterHandOff) -> Result<()> {
    let at = now();
    match next {
        AfterHandOff::Stage(i) => {
            let queued = t.workflow[i].agent().is_some().then(|| at.clone());
            sqlx::query("UPDATE tasks SET stage_index = $1, attempts = 0, flagged = NULL, queued_at = $2, updated_at = $3 WHERE id = $4")
                .bind(i as i64)
                .bind(queued)
                .bind(&at)
                .bind(t.id.to_string())
                .execute(&mut *conn)
                .await?;
        }
        AfterHandOff::Done => {
            sqlx::query("UPDATE tasks SET status = 'done', stage_index = $1, queued_at = NULL, updated_at = $2 WHERE id = $3")
                .bind(t.workflow.len() as i64)
                .bind(&at)
                .bind(t.id.to_string())
                .execute(&mut *conn)
                .await?;
        }
    }
    Ok(())
}

impl Store {
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
            // Its end, when it comes, completes it for this reason (`decide_end`).
            sqlx::query("UPDATE sessions SET handed_off = $1 WHERE id = $2")
                .bind(drover_core::outcome::HANDED_OFF)
                .bind(session.to_string())
                .execute(&mut *tx)
                .await?;
        }
        let next = after_hand_off(t.stage_index, t.workflow.len());
        advance(&mut tx, &t, next).await?;
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::store;
    use crate::{NewTask, NewTaskSession, StageSpec};

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
        let ending = drover_core::RunEnd::Exited { status: drover_core::ExitStatus::code(0), stop_requested: false };
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

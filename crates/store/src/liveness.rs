//! What the stale monitor reads and writes: every live session with its device's last
//! contact and its sandbox's state, and the flag it raised on each.

use drover_core::liveness::StaleFlag;
use drover_core::{SandboxState, SessionId, WorkspaceId};
use sqlx::Row;

use crate::sessions::session_row;
use crate::{now, parse_id, Result, SessionRow, Store, StoreError, LIVE};

/// A live session as the monitor sees it.
#[derive(Debug, Clone)]
pub struct LiveCheck {
    /// The session (with its current flag).
    pub session: SessionRow,
    /// When its device last reported in.
    pub last_contact_at: Option<String>,
    /// Its device's credential was revoked.
    pub device_revoked: bool,
    /// When its sandbox last changed state (when it finished, for a finished one).
    pub sandbox_changed_at: String,
}

/// What the monitor's sweep reads of every live session: enough to tell whether it
/// needs a closer look ([`Store::live_check`]). A fleet has thousands of live sessions,
/// nearly all of them fine, so this is a few columns, not their whole rows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveGlance {
    /// The live session checked.
    pub session: SessionId,
    /// When it was created (stored format).
    pub created_at: String,
    /// The stale monitor's flag it carries now, if any.
    pub stale_flag: Option<StaleFlag>,
    /// It is a task's run (which may stall: that takes the closer look).
    pub task_run: bool,
    /// Its sandbox has finished.
    pub sandbox_finished: bool,
    /// When its sandbox last changed state.
    pub sandbox_changed_at: String,
    /// When its device last reported in.
    pub last_contact_at: Option<String>,
    /// Its device's credential was revoked.
    pub device_revoked: bool,
}

impl LiveCheck {
    /// The same session as the sweep sees it.
    pub fn glance(&self) -> LiveGlance {
        LiveGlance {
            session: self.session.id,
            created_at: self.session.created_at.clone(),
            stale_flag: self.session.stale_flag,
            task_run: self.session.task.is_some(),
            sandbox_finished: self.session.sandbox_state.is_finished(),
            sandbox_changed_at: self.sandbox_changed_at.clone(),
            last_contact_at: self.last_contact_at.clone(),
            device_revoked: self.device_revoked,
        }
    }
}

/// A session's row, with its device's last contact and revocation and when its sandbox
/// last changed.
const CHECK_SELECT: &str =
    session_select!(", d.last_contact_at AS device_last_contact, d.revoked_at AS device_revoked_at, b.updated_at AS sandbox_changed_at");

fn check_row(r: &sqlx::any::AnyRow) -> Result<LiveCheck> {
    Ok(LiveCheck {
        session: session_row(r)?,
        last_contact_at: r.get("device_last_contact"),
        device_revoked: r.get::<Option<String>, _>("device_revoked_at").is_some(),
        sandbox_changed_at: r.get("sandbox_changed_at"),
    })
}

/// Sessions asked about per statement by [`Store::task_runs_among`].
const AMONG_BATCH: usize = 500;

impl Store {
    /// Every live session, in every workspace, as the monitor's sweep sees it.
    pub async fn live_glances(&self) -> Result<Vec<LiveGlance>> {
        let rows = sqlx::query(concat!(
            "SELECT s.id, s.created_at, s.stale_flag, s.task_id, b.state AS sandbox_state, b.updated_at AS sandbox_changed_at,
                    d.last_contact_at, d.revoked_at
             FROM sessions s JOIN sandboxes b ON b.id = s.sandbox_id JOIN devices d ON d.id = s.device_id
             WHERE s.outcome IN ",
            live_outcomes!(),
            " ORDER BY s.created_at, s.id"
        ))
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                let state: String = r.get("sandbox_state");
                let state = SandboxState::parse(&state).ok_or_else(|| StoreError::Corrupt(format!("sandbox state {state}")))?;
                Ok(LiveGlance {
                    session: parse_id(r.get("id"))?,
                    created_at: r.get("created_at"),
                    stale_flag: r.get::<Option<String>, _>("stale_flag").as_deref().and_then(StaleFlag::parse),
                    task_run: r.get::<Option<String>, _>("task_id").is_some(),
                    sandbox_finished: state.is_finished(),
                    sandbox_changed_at: r.get("sandbox_changed_at"),
                    last_contact_at: r.get("last_contact_at"),
                    device_revoked: r.get::<Option<String>, _>("revoked_at").is_some(),
                })
            })
            .collect()
    }

    /// Which of `sessions` work for a task (the rest are task-free): one read per few
    /// hundred sessions, for rounds that look at many sessions at once.
    pub async fn task_runs_among(&self, sessions: &[SessionId]) -> Result<std::collections::HashSet<SessionId>> {
        let mut out = std::collections::HashSet::new();
        for part in sessions.chunks(AMONG_BATCH) {
            let marks: Vec<String> = (1..=part.len()).map(|i| format!("${i}")).collect();
            let sql = format!("SELECT id FROM sessions WHERE task_id IS NOT NULL AND id IN ({})", marks.join(", "));
            let mut q = sqlx::query_scalar::<_, String>(&sql);
            for id in part {
                q = q.bind(id.to_string());
            }
            for id in q.fetch_all(&self.pool).await? {
                out.insert(parse_id(&id)?);
            }
        }
        Ok(out)
    }

    /// One live session as the monitor sees it, read now; None once it has ended.
    pub async fn live_check(&self, session: SessionId) -> Result<Option<LiveCheck>> {
        let r = sqlx::query(&format!("{CHECK_SELECT} WHERE s.id = $1 AND s.outcome IN {LIVE}"))
            .bind(session.to_string())
            .fetch_optional(&self.pool)
            .await?;
        r.as_ref().map(check_row).transpose()
    }

    /// The workspace's live sessions flagged stale, oldest flag first.
    pub async fn stale_sessions(&self, workspace: WorkspaceId) -> Result<Vec<LiveCheck>> {
        let rows = sqlx::query(&format!(
            "{CHECK_SELECT} WHERE s.workspace_id = $1 AND s.outcome IN {LIVE} AND s.stale_flag IS NOT NULL
             ORDER BY s.stale_since, s.id"
        ))
        .bind(workspace.to_string())
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(check_row).collect()
    }

    /// Raises or clears a live session's flag; false if it is no longer live or the
    /// flag was already so.
    pub async fn set_stale_flag(&self, session: SessionId, flag: Option<StaleFlag>) -> Result<bool> {
        let r = sqlx::query(concat!(
            "UPDATE sessions SET stale_flag = $1, stale_since = CASE WHEN $1 IS NULL THEN NULL ELSE COALESCE(stale_since, $2) END
             WHERE id = $3 AND outcome IN ",
            live_outcomes!(),
            " AND stale_flag IS DISTINCT FROM $1
             RETURNING workspace_id"
        ))
        .bind(flag.map(StaleFlag::as_str))
        .bind(now())
        .bind(session.to_string())
        .fetch_optional(&self.writes)
        .await?;
        let Some(r) = r else { return Ok(false) };
        self.changed(crate::parse_id(r.get("workspace_id"))?, Some(session));
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{session, store};

    #[tokio::test]
    async fn flags_are_raised_cleared_and_listed_for_live_sessions_only() {
        let (s, _d) = store().await;
        let (ws, _) = s.bootstrap("w", "alice").await.unwrap();
        let id = session(&s, ws).await;
        // The sweep's glance and the closer look agree on every field the glance has.
        let full = s.live_check(id).await.unwrap().expect("live");
        assert_eq!(s.live_glances().await.unwrap(), vec![full.glance()]);
        assert!(s.stale_sessions(ws).await.unwrap().is_empty());
        assert!(s.set_stale_flag(id, Some(StaleFlag::DeviceSilent)).await.unwrap());
        let glances = s.live_glances().await.unwrap();
        assert_eq!(glances[0].stale_flag, Some(StaleFlag::DeviceSilent));
        assert_eq!(glances, vec![s.live_check(id).await.unwrap().expect("live").glance()]);
        assert!(!s.set_stale_flag(id, Some(StaleFlag::DeviceSilent)).await.unwrap(), "already so");
        let stale = s.stale_sessions(ws).await.unwrap();
        assert_eq!(stale[0].session.stale_flag, Some(StaleFlag::DeviceSilent));
        assert!(s.set_stale_flag(id, None).await.unwrap());
        assert!(s.stale_sessions(ws).await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn task_runs_are_told_from_task_free_sessions_in_batches() {
        let (s, _d) = store().await;
        let (ws, _) = s.bootstrap("w", "alice").await.unwrap();
        let free: Vec<SessionId> = task_free_sessions(&s, ws, 3).await;
        let task = session(&s, ws).await;
        sqlx::query("UPDATE sessions SET task_id = 'tsk_0190a0b0c0d0e0f00000000000000001' WHERE id = $1")
            .bind(task.to_string())
            .execute(&s.pool)
            .await
            .unwrap();
        let mut asked: Vec<SessionId> = free.clone();
        asked.push(task);
        // More than a batch: ids that are no session at all are simply not task runs.
        asked.extend((0..AMONG_BATCH).map(|_| SessionId::new()));
        assert_eq!(s.task_runs_among(&asked).await.unwrap(), [task].into_iter().collect());
        assert!(s.task_runs_among(&free).await.unwrap().is_empty());
        assert!(s.task_runs_among(&[]).await.unwrap().is_empty());
    }

    async fn task_free_sessions(s: &Store, ws: WorkspaceId, n: usize) -> Vec<SessionId> {
        let mut out = Vec::new();
        for _ in 0..n {
            out.push(session(s, ws).await);
        }
        out
    }
}

//! Retention: finished sessions' recordings and events, old activity of finished tasks,
//! and settled webhook deliveries are pruned once older than the window. Nothing live is
//! touched: a session is pruned only once it has ended, and a task's activity only once
//! the task has finished.

use drover_core::SessionId;
use sqlx::Row;

use crate::{now, parse_id, Result, Store};

/// What one pass pruned.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pruned {
    /// Sessions whose recording and events were removed.
    pub sessions: u64,
    /// Events removed.
    pub events: u64,
    /// Webhook deliveries removed.
    pub deliveries: u64,
}

/// Sessions pruned per transaction (keeps the write lock short).
const BATCH: i64 = 200;

impl Store {
    /// Prunes what finished before `cutoff` (a stored time).
    pub async fn prune(&self, cutoff: &str) -> Result<Pruned> {
        let mut out = Pruned::default();
        loop {
            let ids: Vec<String> = sqlx::query_scalar(concat!(
                "SELECT id FROM sessions WHERE ended_at IS NOT NULL AND pruned_at IS NULL AND ended_at < $1
                 AND outcome NOT IN ",
                live_outcomes!(),
                " LIMIT $2"
            ))
            .bind(cutoff)
            .bind(BATCH)
            .fetch_all(&self.pool)
            .await?;
            if ids.is_empty() {
                break;
            }
            for id in &ids {
                let session: SessionId = parse_id(id)?;
                // Files go first: a crash before the commit leaves the session to be
                // pruned again, never a pruned session with its recording still there.
                let mut tx = self.write().await?;
                self.remove_output(&mut tx, session).await?;
                Store::remove_checkpoints_but_last(&mut tx, session).await?;
                out.events += sqlx::query("DELETE FROM events WHERE session_id = $1").bind(id).execute(&mut *tx).await?.rows_affected();
                sqlx::query("DELETE FROM recording_marks WHERE session_id = $1").bind(id).execute(&mut *tx).await?;
                sqlx::query("DELETE FROM attention WHERE session_id = $1").bind(id).execute(&mut *tx).await?;
                sqlx::query("UPDATE sessions SET pruned_at = $1 WHERE id = $2").bind(now()).bind(id).execute(&mut *tx).await?;
                tx.commit().await?;
                out.sessions += 1;
            }
        }
        let mut tx = self.write().await?;
        out.events += sqlx::query(
            "DELETE FROM events WHERE at < $1 AND session_id IS NULL
             AND (task_id IS NULL OR task_id IN (SELECT id FROM tasks WHERE status != 'open'))",
        )
        .bind(cutoff)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        out.deliveries += sqlx::query("DELETE FROM webhook_deliveries WHERE state != 'pending' AND created_at < $1")
            .bind(cutoff)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        tx.commit().await?;
        Ok(out)
    }

    /// When a session's recording and events were pruned, if they were.
    pub async fn pruned_at(&self, session: SessionId) -> Result<Option<String>> {
        let r = sqlx::query("SELECT pruned_at FROM sessions WHERE id = $1").bind(session.to_string()).fetch_optional(&self.pool).await?;
        Ok(r.and_then(|r| r.get("pruned_at")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{session, store};
    use crate::{NewEvent, OutputChunk};
    use drover_core::activity::EventKind;

    #[tokio::test]
    async fn finished_sessions_are_pruned_live_ones_never() {
        let (s, _d) = store().await;
        let (ws, _) = s.bootstrap("w", "alice").await.unwrap();
        let (done, live) = (session(&s, ws).await, session(&s, ws).await);
        for id in [done, live] {
            s.append_output(vec![OutputChunk { session: id, offset: 0, t_micros: 0, data: bytes::Bytes::from_static(b"hello") }])
                .await
                .unwrap();
        }
        let ending = drover_core::RunEnd::Exited { status: drover_core::ExitStatus::code(0), stop_requested: false };
        s.end_session(done, &ending, crate::RunTimes { started_at: None, ended_at: &now() }, 5, "device box").await.unwrap();
        for (offset, last) in [(2, false), (5, true)] {
            let c = crate::ScreenCheckpoint { offset, t_micros: 0, cols: 80, rows: 24, data: format!("at {offset}") };
            s.put_checkpoint(done, &c, last, 0).await.unwrap();
        }
        let e = NewEvent {
            workspace: ws,
            session: None,
            task: None,
            kind: EventKind::WebhookChanged,
            actor: "a".into(),
            detail: serde_json::json!({}),
        };
        s.record_event(&e).await.unwrap();
        s.record_event(&NewEvent { session: Some(live), kind: EventKind::InputSent, ..e }).await.unwrap();
        // Nothing is old enough yet.
        assert_eq!(s.prune("2000-01-01T00:00:00.000000Z").await.unwrap(), Pruned::default());
        let p = s.prune("9999-01-01T00:00:00.000000Z").await.unwrap();
        assert_eq!(p.sessions, 1, "only the finished one");
        assert!(p.events >= 2, "its own and the old workspace event: {p:?}");
        assert!(s.pruned_at(done).await.unwrap().is_some());
        assert!(s.read_output(done, 0, 1024).await.unwrap().is_empty());
        assert_eq!(s.checkpoint_points(done).await.unwrap(), [(5, 0)], "the Final screen's checkpoint is kept");
        // Its row kept its length and last output time from its end (the chunks they
        // were read from are gone); the live one's are read from its last chunk.
        let (kept, running) = (s.session(done).await.unwrap().unwrap(), s.session(live).await.unwrap().unwrap());
        assert_eq!((kept.output_bytes, running.output_bytes), (5, 5));
        assert!(kept.last_output_at.is_some() && running.last_output_at.is_some(), "{kept:?}");
        assert_eq!(s.pruned_at(live).await.unwrap(), None);
        assert_eq!(s.read_output(live, 0, 1024).await.unwrap()[0].data[..], b"hello"[..]);
        assert!(!s.list_events(ws, Some(live), 0, 10).await.unwrap().is_empty(), "a live session keeps its events");
        assert_eq!(s.prune("9999-01-01T00:00:00.000000Z").await.unwrap().sessions, 0, "once");
    }
}

//! Screen checkpoints (`screen_checkpoints`): a session's whole terminal state at points
//! of its output, so the screen at any point is the nearest checkpoint plus the bytes
//! after it. The session's row says how far they reach (`checkpointed_to`, when the last
//! was made, and whether the one at its end exists), which is how the server finds the
//! sessions that need one.

use drover_core::SessionId;
use sqlx::Row;

use crate::{now, parse_id, Result, Store};

/// A session's terminal state at a point of its output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScreenCheckpoint {
    /// The stream offset the state reflects: the output before it is in it.
    pub offset: u64,
    /// Every output before `offset` and every resize at or before this time (µs since
    /// the start) is in it.
    pub t_micros: u64,
    /// The screen's width then, in columns.
    pub cols: u16,
    /// The screen's height then, in rows.
    pub rows: u16,
    /// The escape sequences that rebuild the state on a blank terminal of that size.
    pub data: String,
}

/// A session that needs a checkpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScreenDue {
    /// The session.
    pub session: SessionId,
    /// It has ended: its last checkpoint is the one at its end.
    pub ended: bool,
    /// Its output length now.
    pub output_bytes: u64,
    /// The size it started at (or its size now, for sessions that did not keep it).
    pub start_size: (u16, u16),
}

/// Which checkpoint of a session: the last at or before an offset, or at or before a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckpointAt {
    /// The last whose offset is at or before this one.
    Offset(u64),
    /// The last made at or before this time (µs since the start).
    Time(u64),
}

/// Columns of a checkpoint row.
const COLUMNS: &str = "start_offset, t_micros, cols, rows, data";

fn checkpoint_from(r: &sqlx::any::AnyRow) -> ScreenCheckpoint {
    ScreenCheckpoint {
        offset: r.get::<i64, _>("start_offset") as u64,
        t_micros: r.get::<i64, _>("t_micros") as u64,
        cols: r.get::<i32, _>("cols").clamp(1, i32::from(u16::MAX)) as u16,
        rows: r.get::<i32, _>("rows").clamp(1, i32::from(u16::MAX)) as u16,
        data: r.get("data"),
    }
}

impl Store {
    /// Stores a checkpoint of `session` made knowing `resizes` of its resizes (replacing
    /// one at the same offset: the later one has seen as much output and perhaps a resize
    /// more), and moves the session's reach to it; `last` marks the one at its end. False,
    /// and nothing stored, when a resize came in since (see [`Store::add_mark`]).
    pub async fn put_checkpoint(&self, session: SessionId, c: &ScreenCheckpoint, last: bool, resizes: usize) -> Result<bool> {
        let mut tx = self.write().await?;
        lock_session(&mut tx, session).await?;
        let known: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM recording_marks WHERE session_id = $1 AND kind = 'r'")
            .bind(session.to_string())
            .fetch_one(&mut *tx)
            .await?;
        if known as usize != resizes {
            return Ok(false);
        }
        sqlx::query(
            "INSERT INTO screen_checkpoints (session_id, start_offset, t_micros, cols, rows, data) VALUES ($1, $2, $3, $4, $5, $6)
             ON CONFLICT (session_id, start_offset) DO UPDATE SET t_micros = excluded.t_micros, cols = excluded.cols,
             rows = excluded.rows, data = excluded.data",
        )
        .bind(session.to_string())
        .bind(c.offset as i64)
        .bind(c.t_micros as i64)
        .bind(i32::from(c.cols))
        .bind(i32::from(c.rows))
        .bind(&c.data)
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "UPDATE sessions SET checkpointed_to = CASE WHEN checkpointed_to > $1 THEN checkpointed_to ELSE $1 END,
             checkpointed_at = $2, screen_final = CASE WHEN $3 = 1 THEN 1 ELSE screen_final END WHERE id = $4",
        )
        .bind(c.offset as i64)
        .bind(now())
        .bind(i32::from(last))
        .bind(session.to_string())
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(true)
    }

    /// Drops the checkpoints of `session` made at or after `t_micros` (a resize then came
    /// in late), in `tx`: they are made again from the one before.
    pub(crate) async fn drop_checkpoints_since(tx: &mut sqlx::AnyConnection, session: SessionId, t_micros: u64) -> Result<()> {
        let dropped = sqlx::query("DELETE FROM screen_checkpoints WHERE session_id = $1 AND t_micros >= $2")
            .bind(session.to_string())
            .bind(t_micros as i64)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        if dropped > 0 {
            sqlx::query(
                "UPDATE sessions SET screen_final = 0, checkpointed_to =
                 COALESCE((SELECT MAX(start_offset) FROM screen_checkpoints WHERE session_id = $1), 0) WHERE id = $1",
            )
            .bind(session.to_string())
            .execute(&mut *tx)
            .await?;
        }
        Ok(())
    }

    /// Marks an ended session whose screen needs no checkpoint (it printed nothing, or
    /// its output is gone) as done.
    pub async fn screen_done(&self, session: SessionId) -> Result<()> {
        sqlx::query("UPDATE sessions SET screen_final = 1 WHERE id = $1").bind(session.to_string()).execute(&self.writes).await?;
        Ok(())
    }

    /// The checkpoint of `session` nearest before `at`, if it has one.
    pub async fn checkpoint(&self, session: SessionId, at: CheckpointAt) -> Result<Option<ScreenCheckpoint>> {
        let (column, value) = match at {
            CheckpointAt::Offset(o) => ("start_offset", o),
            CheckpointAt::Time(t) => ("t_micros", t),
        };
        let sql =
            format!("SELECT {COLUMNS} FROM screen_checkpoints WHERE session_id = $1 AND {column} <= $2 ORDER BY start_offset DESC LIMIT 1");
        let row = sqlx::query(&sql).bind(session.to_string()).bind(value.min(i64::MAX as u64) as i64).fetch_optional(&self.pool).await?;
        Ok(row.as_ref().map(checkpoint_from))
    }

    /// The offsets and times of a session's checkpoints, in order.
    pub async fn checkpoint_points(&self, session: SessionId) -> Result<Vec<(u64, u64)>> {
        let rows = sqlx::query("SELECT start_offset, t_micros FROM screen_checkpoints WHERE session_id = $1 ORDER BY start_offset")
            .bind(session.to_string())
            .fetch_all(&self.pool)
            .await?;
        Ok(rows.iter().map(|r| (r.get::<i64, _>("start_offset") as u64, r.get::<i64, _>("t_micros") as u64)).collect())
    }

    /// Sessions that need a checkpoint, up to `limit`: ended ones without the one at their
    /// end (newest first, so the sessions people look at come before old ones built for
    /// the first time), then live ones whose output went `every_bytes` past their last, or
    /// `quiet_bytes` past it when that was made before `stale_before` (a stored time).
    pub async fn screens_due(&self, every_bytes: u64, quiet_bytes: u64, stale_before: &str, limit: i64) -> Result<Vec<ScreenDue>> {
        let ended = sqlx::query(
            "SELECT s.id, s.output_bytes AS len, s.cols, s.rows, m.data AS start FROM sessions s
             LEFT JOIN recording_marks m ON m.session_id = s.id AND m.kind = 's'
             WHERE s.screen_final = 0 AND s.ended_at IS NOT NULL AND s.pruned_at IS NULL
             ORDER BY s.ended_at DESC LIMIT $1",
        )
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        let live_sql = format!(
            "SELECT s.id, {len} AS len, s.cols, s.rows, m.data AS start FROM sessions s {join}
             LEFT JOIN recording_marks m ON m.session_id = s.id AND m.kind = 's'
             WHERE s.outcome IN {live} AND ({len} >= s.checkpointed_to + $1
                OR ({len} >= s.checkpointed_to + $2 AND (s.checkpointed_at IS NULL OR s.checkpointed_at < $3)))
             LIMIT $4",
            len = committed_length!(),
            join = last_chunk_join!(),
            live = live_outcomes!(),
        );
        let live = sqlx::query(&live_sql)
            .bind(every_bytes as i64)
            .bind(quiet_bytes as i64)
            .bind(stale_before)
            .bind(limit)
            .fetch_all(&self.pool)
            .await?;
        let mut out = Vec::new();
        for (rows, ended) in [(ended, true), (live, false)] {
            for r in rows {
                let fallback = (r.get::<i64, _>("cols") as u16, r.get::<i64, _>("rows") as u16);
                let start: Option<String> = r.get("start");
                let start_size = start.as_deref().and_then(parse_size).unwrap_or(fallback);
                out.push(ScreenDue { session: parse_id(r.get("id"))?, ended, output_bytes: r.get::<i64, _>("len") as u64, start_size });
            }
        }
        Ok(out)
    }

    /// Deletes a session's checkpoints but the last (retention keeps the final screen with
    /// the summary), in `tx`.
    pub(crate) async fn remove_checkpoints_but_last(tx: &mut sqlx::AnyConnection, session: SessionId) -> Result<()> {
        sqlx::query(
            "DELETE FROM screen_checkpoints WHERE session_id = $1
             AND start_offset < (SELECT MAX(start_offset) FROM screen_checkpoints WHERE session_id = $1)",
        )
        .bind(session.to_string())
        .execute(&mut *tx)
        .await?;
        Ok(())
    }
}

/// Takes the session's row lock in `tx` (a no-op update), so a checkpoint being stored
/// and a late resize dropping checkpoints happen one after the other on PostgreSQL too.
pub(crate) async fn lock_session(tx: &mut sqlx::AnyConnection, session: SessionId) -> Result<()> {
    sqlx::query("UPDATE sessions SET checkpointed_to = checkpointed_to WHERE id = $1").bind(session.to_string()).execute(&mut *tx).await?;
    Ok(())
}

/// "COLSxROWS" as numbers.
fn parse_size(data: &str) -> Option<(u16, u16)> {
    let (c, r) = data.split_once('x')?;
    Some((c.parse::<u16>().ok()?.max(1), r.parse::<u16>().ok()?.max(1)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{session, store};

    fn cp(offset: u64, t: u64) -> ScreenCheckpoint {
        ScreenCheckpoint { offset, t_micros: t, cols: 80, rows: 24, data: format!("at {offset}") }
    }

    #[tokio::test]
    async fn the_nearest_checkpoint_before_an_offset_or_a_time() {
        let (s, _dir) = store().await;
        let (ws, _) = s.bootstrap("w", "alice").await.unwrap();
        let id = session(&s, ws).await;
        assert_eq!(s.checkpoint(id, CheckpointAt::Offset(10)).await.unwrap(), None);
        for (o, t) in [(0, 0), (100, 50), (200, 90)] {
            assert!(s.put_checkpoint(id, &cp(o, t), false, 0).await.unwrap());
        }
        // The same offset again: the later one holds.
        let later = ScreenCheckpoint { data: "later".into(), ..cp(100, 50) };
        s.put_checkpoint(id, &later, false, 0).await.unwrap();
        assert_eq!(s.checkpoint(id, CheckpointAt::Offset(150)).await.unwrap(), Some(later));
        assert_eq!(s.checkpoint(id, CheckpointAt::Offset(200)).await.unwrap().map(|c| c.offset), Some(200));
        assert_eq!(s.checkpoint(id, CheckpointAt::Time(89)).await.unwrap().map(|c| c.offset), Some(100));
        assert_eq!(s.checkpoint(id, CheckpointAt::Offset(u64::MAX)).await.unwrap().map(|c| c.offset), Some(200));
        assert_eq!(s.checkpoint_points(id).await.unwrap(), vec![(0, 0), (100, 50), (200, 90)]);
        // A resize at 60 µs that came in late: the checkpoints made since are dropped, and
        // one made without knowing of it is refused.
        s.add_mark(id, &crate::Mark { t_micros: 60, kind: "r".into(), data: "100x30".into() }).await.unwrap();
        assert_eq!(s.checkpoint_points(id).await.unwrap(), vec![(0, 0), (100, 50)]);
        assert!(!s.put_checkpoint(id, &cp(200, 90), false, 0).await.unwrap());
        assert!(s.put_checkpoint(id, &cp(200, 90), false, 1).await.unwrap());
        let mut tx = s.write().await.unwrap();
        Store::remove_checkpoints_but_last(&mut tx, id).await.unwrap();
        tx.commit().await.unwrap();
        assert_eq!(s.checkpoint_points(id).await.unwrap(), vec![(200, 90)]);
    }
}

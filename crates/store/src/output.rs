//! A session's output stream and recording marks. Output is appended by offset: bytes
//! already held are skipped, so a resent range is never stored twice.

use std::collections::HashMap;

use drover_core::SessionId;
use sqlx::Row;

use crate::{Result, Store};

/// A piece of output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputChunk {
    /// The session.
    pub session: SessionId,
    /// Offset of the first byte.
    pub offset: u64,
    /// µs since the session started.
    pub t_micros: u64,
    /// The bytes.
    pub data: Vec<u8>,
}

/// A non-output recording event: `r` resize ("COLSxROWS"), `m` marker (label).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mark {
    /// µs since the session started.
    pub t_micros: u64,
    /// `r` or `m`.
    pub kind: String,
    /// The data.
    pub data: String,
}

/// Largest row written; contiguous frames are merged up to this size.
const MAX_ROW: usize = 256 * 1024;
/// Frames further apart than this in time stay separate rows (keeps replay timing).
const MERGE_WINDOW_MICROS: u64 = 10_000;

impl Store {
    /// Appends a batch of output in one transaction. Returns, per session, the offset now
    /// held (what may be acknowledged).
    pub async fn append_output(&self, batch: Vec<OutputChunk>) -> Result<HashMap<SessionId, u64>> {
        let mut tx = self.pool.begin().await?;
        let mut held: HashMap<SessionId, u64> = HashMap::new();
        let mut rows: Vec<OutputChunk> = Vec::new();
        for mut c in batch {
            let have = match held.get(&c.session) {
                Some(h) => *h,
                None => {
                    let h: i64 = sqlx::query_scalar("SELECT output_bytes FROM sessions WHERE id = ?")
                        .bind(c.session.to_string())
                        .fetch_optional(&mut *tx)
                        .await?
                        .unwrap_or(0);
                    h as u64
                }
            };
            let end = c.offset + c.data.len() as u64;
            if end <= have {
                held.insert(c.session, have);
                continue;
            }
            if c.offset < have {
                c.data.drain(..(have - c.offset) as usize);
                c.offset = have;
            }
            held.insert(c.session, end);
            match rows.last_mut() {
                Some(last)
                    if last.session == c.session
                        && last.offset + last.data.len() as u64 == c.offset
                        && last.data.len() + c.data.len() <= MAX_ROW
                        && c.t_micros.saturating_sub(last.t_micros) <= MERGE_WINDOW_MICROS =>
                {
                    last.data.extend_from_slice(&c.data)
                }
                _ => rows.push(c),
            }
        }
        for r in &rows {
            sqlx::query("INSERT OR IGNORE INTO output_chunks (session_id, offset, t_micros, data) VALUES (?, ?, ?, ?)")
                .bind(r.session.to_string())
                .bind(r.offset as i64)
                .bind(r.t_micros as i64)
                .bind(&r.data)
                .execute(&mut *tx)
                .await?;
        }
        for (session, end) in &held {
            sqlx::query("UPDATE sessions SET output_bytes = MAX(output_bytes, ?) WHERE id = ?")
                .bind(*end as i64)
                .bind(session.to_string())
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(held)
    }

    /// Stored output from `from` on, whole rows, up to about `max_bytes`.
    pub async fn read_output(&self, session: SessionId, from: u64, max_bytes: usize) -> Result<Vec<OutputChunk>> {
        let first: Option<i64> = sqlx::query_scalar("SELECT MAX(offset) FROM output_chunks WHERE session_id = ? AND offset <= ?")
            .bind(session.to_string())
            .bind(from as i64)
            .fetch_one(&self.pool)
            .await?;
        let rows =
            sqlx::query("SELECT offset, t_micros, data FROM output_chunks WHERE session_id = ? AND offset >= ? ORDER BY offset LIMIT 4096")
                .bind(session.to_string())
                .bind(first.unwrap_or(0))
                .fetch_all(&self.pool)
                .await?;
        let mut out = Vec::new();
        let mut total = 0;
        for r in rows {
            let offset = r.get::<i64, _>("offset") as u64;
            let mut data: Vec<u8> = r.get("data");
            if offset + (data.len() as u64) <= from {
                continue;
            }
            let (offset, data) = if offset < from {
                data.drain(..(from - offset) as usize);
                (from, data)
            } else {
                (offset, data)
            };
            total += data.len();
            out.push(OutputChunk { session, offset, t_micros: r.get::<i64, _>("t_micros") as u64, data });
            if total >= max_bytes {
                break;
            }
        }
        Ok(out)
    }

    /// Records a resize or marker.
    pub async fn add_mark(&self, session: SessionId, mark: &Mark) -> Result<()> {
        sqlx::query("INSERT INTO recording_marks (session_id, t_micros, kind, data) VALUES (?, ?, ?, ?)")
            .bind(session.to_string())
            .bind(mark.t_micros as i64)
            .bind(&mark.kind)
            .bind(&mark.data)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// A session's marks, in order.
    pub async fn marks(&self, session: SessionId) -> Result<Vec<Mark>> {
        let rows = sqlx::query("SELECT t_micros, kind, data FROM recording_marks WHERE session_id = ? ORDER BY seq")
            .bind(session.to_string())
            .fetch_all(&self.pool)
            .await?;
        Ok(rows.iter().map(|r| Mark { t_micros: r.get::<i64, _>("t_micros") as u64, kind: r.get("kind"), data: r.get("data") }).collect())
    }
}

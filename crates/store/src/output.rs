//! A session's output stream and recording marks.
//!
//! Output bytes are rows of `output_chunks`. A live session's committed length (the
//! offset the server acknowledges) is the end of its last chunk, so one commit of a
//! group of sessions' output inserts their rows and writes nothing else: with a
//! thousand quiet sessions that is one sync for all, and about one page written per
//! line printed. The transaction holds the write lock from the lookup of the stored
//! lengths on, so bytes already held (a resent range, or what another replica stored
//! meanwhile) are skipped and never stored twice. A session's end copies its length and
//! last output time into its row (see `Store::end_session`), as its output may be
//! pruned later; `legacy` moves recording files earlier versions wrote.

use std::collections::HashMap;

use bytes::Bytes;
use drover_core::SessionId;
use sqlx::Row;

use crate::{Result, Store, LIVE};

/// A piece of output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputChunk {
    /// The session whose output it is.
    pub session: SessionId,
    /// Offset of the first byte.
    pub offset: u64,
    /// µs since the session started.
    pub t_micros: u64,
    /// The output bytes, as the program wrote them (shared with whoever else holds
    /// the frame they came in, not copied).
    pub data: Bytes,
}

impl OutputChunk {
    /// The offset just past its last byte.
    fn end(&self) -> u64 {
        self.offset + self.data.len() as u64
    }

    /// Whether `next` carries on from this chunk (same session, no gap) within the merge
    /// window of `first`, the start of the run this chunk ends.
    fn continued_by(&self, next: &OutputChunk, first: &OutputChunk) -> bool {
        self.session == next.session && self.end() == next.offset && next.t_micros.saturating_sub(first.t_micros) <= MERGE_WINDOW_MICROS
    }
}

/// A non-output recording event: `r` resize ("COLSxROWS"), `m` marker (label), `s` the
/// size the session started at ("COLSxROWS", at 0; sessions from before it was kept
/// have none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mark {
    /// µs since the session started.
    pub t_micros: u64,
    /// `r`, `m` or `s`.
    pub kind: String,
    /// What the mark says: `COLSxROWS` for a size, the text of a marker.
    pub data: String,
}

/// Reads further apart than this in time stay separate chunks (keeps replay timing).
pub(crate) const MERGE_WINDOW_MICROS: u64 = 10_000;

/// Sessions looked up per statement when a batch of output arrives.
const LOOKUP_BATCH: usize = 200;

/// Chunks inserted per statement.
const INSERT_BATCH: usize = 100;

/// Rows read from `output_chunks` at a time.
const TABLE_READ_ROWS: i64 = 512;

/// Inserts `chunks` into `output_chunks`, a hundred rows per statement, stored at
/// `stored_at` (µs since the Unix epoch; None when not known, as for moved recordings).
pub(crate) async fn insert_chunks(conn: &mut sqlx::AnyConnection, chunks: &[OutputChunk], stored_at: Option<i64>) -> Result<()> {
    for part in chunks.chunks(INSERT_BATCH) {
        let rows: Vec<String> =
            (0..part.len()).map(|i| format!("(${}, ${}, ${}, ${}, $1)", 4 * i + 2, 4 * i + 3, 4 * i + 4, 4 * i + 5)).collect();
        let sql = format!("INSERT INTO output_chunks (session_id, start_offset, t_micros, data, stored_at) VALUES {}", rows.join(", "));
        let mut q = sqlx::query(&sql).bind(stored_at);
        for c in part {
            q = q.bind(c.session.to_string()).bind(c.offset as i64).bind(c.t_micros as i64).bind(&c.data[..]);
        }
        q.execute(&mut *conn).await?;
    }
    Ok(())
}

/// Joins chunks that continue one another within the merge window (fewer rows for a
/// chatty program; replay timing is kept to the window). Each joined run is copied
/// once; a chunk that joins nothing is passed on as it is.
fn join_chunks(chunks: Vec<OutputChunk>) -> Vec<OutputChunk> {
    let mut out: Vec<OutputChunk> = Vec::with_capacity(chunks.len());
    let mut run: Vec<OutputChunk> = Vec::new();
    for c in chunks {
        if run.last().is_some_and(|last| !last.continued_by(&c, &run[0])) {
            out.push(joined(std::mem::take(&mut run)));
        }
        run.push(c);
    }
    if !run.is_empty() {
        out.push(joined(run));
    }
    out
}

/// One chunk holding a non-empty run of chunks that continue one another.
fn joined(mut run: Vec<OutputChunk>) -> OutputChunk {
    if run.len() == 1 {
        return run.pop().expect("one chunk");
    }
    let data: Vec<u8> = run.iter().flat_map(|c| c.data.iter().copied()).collect();
    OutputChunk { data: Bytes::from(data), ..run.swap_remove(0) }
}

/// Per session, the offset held once stored; and per session, the chunks to store.
type Plan = (HashMap<SessionId, u64>, Vec<(SessionId, Vec<OutputChunk>)>);

/// What a batch adds, given each live session's committed length (`stored`): bytes
/// already held are skipped, a gap the device lost is filled with NUL bytes, which
/// terminals ignore, so offsets stay those of the program's stream. A session not in
/// `stored` is not live and is left out (fenced).
fn plan(batch: Vec<OutputChunk>, stored: &HashMap<SessionId, u64>) -> Plan {
    let mut held: HashMap<SessionId, u64> = HashMap::new();
    let mut todo: Vec<(SessionId, Vec<OutputChunk>)> = Vec::new();
    for mut c in batch {
        let Some(have) = held.get(&c.session).or_else(|| stored.get(&c.session)).copied() else { continue };
        let Some(end) = c.offset.checked_add(c.data.len() as u64) else { continue };
        if end <= have {
            held.insert(c.session, have);
            continue;
        }
        if c.offset < have {
            c.data = c.data.slice((have - c.offset) as usize..);
            c.offset = have;
        }
        let prev_end =
            todo.iter().find(|(s, _)| *s == c.session).and_then(|(_, l)| l.last()).map(|l| l.offset + l.data.len() as u64).unwrap_or(have);
        if c.offset > prev_end {
            if c.offset - prev_end > drover_core::device_link::MAX_OUTPUT_GAP {
                // Never allocated: the link refuses such output before it gets here.
                tracing::warn!(session = %c.session, "output {} bytes past the stored end refused", c.offset - prev_end);
                continue;
            }
            let fill = (c.offset - prev_end) as usize;
            tracing::warn!(session = %c.session, "{fill} bytes of output were lost on the device; filling the gap");
            let mut data = vec![0u8; fill];
            data.extend_from_slice(&c.data);
            c.data = Bytes::from(data);
            c.offset = prev_end;
        }
        held.insert(c.session, end);
        match todo.iter_mut().find(|(s, _)| *s == c.session) {
            Some((_, list)) => list.push(c),
            None => todo.push((c.session, vec![c])),
        }
    }
    (held, todo)
}

/// The committed output length of each live session `batch` has output of (one query
/// per few hundred sessions, not one each).
async fn live_output_bytes(conn: &mut sqlx::AnyConnection, batch: &[OutputChunk]) -> Result<HashMap<SessionId, u64>> {
    let mut ids: Vec<String> = batch.iter().map(|c| c.session.to_string()).collect();
    ids.sort();
    ids.dedup();
    let mut out = HashMap::new();
    for part in ids.chunks(LOOKUP_BATCH) {
        let marks: Vec<String> = (1..=part.len()).map(|i| format!("${i}")).collect();
        let sql = format!(
            "SELECT s.id, {} AS held FROM sessions s {}
             WHERE s.id IN ({}) AND s.outcome IN {LIVE}",
            committed_length!(),
            last_chunk_join!(),
            marks.join(", ")
        );
        let mut q = sqlx::query(&sql);
        for id in part {
            q = q.bind(id.as_str());
        }
        for r in q.fetch_all(&mut *conn).await? {
            out.insert(crate::parse_id(r.get("id"))?, r.get::<i64, _>("held") as u64);
        }
    }
    Ok(out)
}

impl Store {
    /// Appends a batch of output in one transaction that holds the write lock from the
    /// lookup of the stored lengths on. Returns, per session, the offset now held (what
    /// may be acknowledged).
    ///
    /// Sessions missing from the answer are unknown or no longer live (fenced).
    pub async fn append_output(&self, batch: Vec<OutputChunk>) -> Result<HashMap<SessionId, u64>> {
        let mut tx = self.write().await?;
        let stored = live_output_bytes(&mut tx, &batch).await?;
        let (held, todo) = plan(batch, &stored);
        if todo.is_empty() {
            return Ok(held);
        }
        let rows: Vec<OutputChunk> = todo.into_iter().flat_map(|(_, chunks)| join_chunks(chunks)).collect();
        insert_chunks(&mut tx, &rows, Some(crate::now_micros())).await?;
        tx.commit().await?;
        Ok(held)
    }

    /// Stored output from `from` on, up to about `max_bytes`, pieces that continue one
    /// another within the merge window joined.
    pub async fn read_output(&self, session: SessionId, from: u64, max_bytes: usize) -> Result<Vec<OutputChunk>> {
        Ok(join_chunks(self.read_output_rows(session, from, max_bytes).await?))
    }

    /// Stored output from `from` on, up to about `max_bytes`, a piece per stored row (each
    /// with its own time: what a recording's events and the screen at a time are made of).
    pub async fn read_output_rows(&self, session: SessionId, from: u64, max_bytes: usize) -> Result<Vec<OutputChunk>> {
        use futures_util::TryStreamExt;
        // The chunk holding `from`, then those after it, a batch at a time, row by row:
        // reading stops once `max_bytes` are in hand, however large the rows.
        let id = session.to_string();
        let mut rows = sqlx::query(
            "SELECT start_offset, t_micros, data FROM output_chunks WHERE session_id = $1 AND start_offset >= COALESCE(
                (SELECT MAX(start_offset) FROM output_chunks WHERE session_id = $1 AND start_offset <= $2), 0)
             ORDER BY start_offset LIMIT $3",
        )
        .bind(&id)
        .bind(from as i64)
        .bind(TABLE_READ_ROWS)
        .fetch(&self.pool);
        let mut pieces: Vec<OutputChunk> = Vec::new();
        let mut size = 0usize;
        while size < max_bytes {
            let Some(r) = rows.try_next().await? else { break };
            let offset = r.get::<i64, _>("start_offset") as u64;
            let t_micros = r.get::<i64, _>("t_micros") as u64;
            let data = Bytes::from(r.get::<Vec<u8>, _>("data"));
            if offset + data.len() as u64 <= from {
                continue;
            }
            let (offset, data) = match offset < from {
                true => (from, data.slice((from - offset) as usize..)),
                false => (offset, data),
            };
            size += data.len();
            pieces.push(OutputChunk { session, offset, t_micros, data });
        }
        Ok(pieces)
    }

    /// The time of a session's last stored output, µs since its start (None: none stored).
    pub async fn last_output_time(&self, session: SessionId) -> Result<Option<u64>> {
        let row = sqlx::query("SELECT t_micros FROM output_chunks WHERE session_id = $1 ORDER BY start_offset DESC LIMIT 1")
            .bind(session.to_string())
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.map(|r| r.get::<i64, _>("t_micros") as u64))
    }

    /// Deletes a session's stored output (retention), in `tx`.
    pub(crate) async fn remove_output(&self, tx: &mut sqlx::AnyConnection, session: SessionId) -> Result<()> {
        sqlx::query("DELETE FROM output_chunks WHERE session_id = $1").bind(session.to_string()).execute(&mut *tx).await?;
        Ok(())
    }

    /// Records the size a new session starts at (mark `s`), in `tx`: the recording's
    /// first size, which later resizes replace on the session's row.
    pub(crate) async fn add_start_size(tx: &mut sqlx::AnyConnection, session: SessionId, cols: u16, rows: u16) -> Result<()> {
        sqlx::query("INSERT INTO recording_marks (session_id, t_micros, kind, data) VALUES ($1, 0, 's', $2)")
            .bind(session.to_string())
            .bind(format!("{cols}x{rows}"))
            .execute(&mut *tx)
            .await?;
        Ok(())
    }

    /// Records a resize or marker. A resize can arrive after output printed later than it
    /// (it comes by another path): screen checkpoints made since its time did not apply
    /// it, so they are dropped, to be made again (`crate::screens`).
    pub async fn add_mark(&self, session: SessionId, mark: &Mark) -> Result<()> {
        let mut tx = self.write().await?;
        if mark.kind == "r" {
            crate::screens::lock_session(&mut tx, session).await?;
        }
        sqlx::query("INSERT INTO recording_marks (session_id, t_micros, kind, data) VALUES ($1, $2, $3, $4)")
            .bind(session.to_string())
            .bind(mark.t_micros as i64)
            .bind(&mark.kind)
            .bind(&mark.data)
            .execute(&mut *tx)
            .await?;
        if mark.kind == "r" {
            Store::drop_checkpoints_since(&mut tx, session, mark.t_micros).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// A session's marks, in order.
    pub async fn marks(&self, session: SessionId) -> Result<Vec<Mark>> {
        let rows = sqlx::query("SELECT t_micros, kind, data FROM recording_marks WHERE session_id = $1 ORDER BY seq")
            .bind(session.to_string())
            .fetch_all(&self.pool)
            .await?;
        Ok(rows.iter().map(|r| Mark { t_micros: r.get::<i64, _>("t_micros") as u64, kind: r.get("kind"), data: r.get("data") }).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(session: SessionId, offset: u64, data: &[u8]) -> OutputChunk {
        OutputChunk { session, offset, t_micros: 0, data: Bytes::copy_from_slice(data) }
    }

    #[test]
    fn a_huge_or_overflowing_offset_is_skipped_without_allocating_the_gap() {
        let s = SessionId::new();
        let stored = HashMap::from([(s, 10)]);
        let batch = vec![chunk(s, 0x4000_0000_0000_0000, b"forged"), chunk(s, u64::MAX - 1, b"wraps"), chunk(s, 10, b"real")];
        let (held, todo) = plan(batch, &stored);
        assert_eq!(held.get(&s), Some(&14));
        assert_eq!(todo.len(), 1);
        assert_eq!(todo[0].1.len(), 1);
        assert_eq!(&todo[0].1[0].data[..], b"real");
    }

    #[test]
    fn a_small_gap_is_filled_and_held_bytes_are_skipped() {
        let s = SessionId::new();
        let stored = HashMap::from([(s, 4)]);
        let (held, todo) = plan(vec![chunk(s, 0, b"abcdef"), chunk(s, 8, b"xy")], &stored);
        assert_eq!(held.get(&s), Some(&10));
        let chunks = &todo[0].1;
        assert_eq!(chunks[0].offset, 4);
        assert_eq!(&chunks[0].data[..], b"ef");
        assert_eq!(chunks[1].offset, 6);
        assert_eq!(&chunks[1].data[..], b"\0\0xy");
    }

    #[test]
    fn runs_are_joined_once_and_a_lone_chunk_is_not_copied() {
        let (s, t) = (SessionId::new(), SessionId::new());
        let lone = chunk(t, 0, b"alone");
        let lone_at = lone.data.as_ptr();
        let late = OutputChunk { t_micros: 2 * MERGE_WINDOW_MICROS, ..chunk(s, 6, b"late") };
        let joined = join_chunks(vec![chunk(s, 0, b"ab"), chunk(s, 2, b"cd"), chunk(s, 4, b"ef"), late, lone]);
        let seen: Vec<(u64, &[u8])> = joined.iter().map(|c| (c.offset, &c.data[..])).collect();
        assert_eq!(seen, vec![(0, &b"abcdef"[..]), (6, &b"late"[..]), (0, &b"alone"[..])]);
        assert_eq!(joined[2].data.as_ptr(), lone_at, "passed on, not copied");
    }
}

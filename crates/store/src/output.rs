//! A session's output stream and recording marks.
//!
//! On SQLite, output bytes are appended to a recording file per session
//! (`recordings/<id>.raw` and its timing index `.idx`, the format the shim writes),
//! synced to disk, and only then is the new length committed in the database
//! (`sessions.output_bytes`) — the offset the server acknowledges; bytes a crash left
//! past the committed length are cut back on reopen. On PostgreSQL, which several
//! replicas share, the bytes are rows of `output_chunks`, committed in the same
//! transaction as the new length, so every replica reads what any of them stored.
//! Either way bytes already held are skipped, so a resent range is never stored twice.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use drover_core::SessionId;
use drover_recording::{RecordingReader, RecordingWriter};
use sqlx::Row;

use crate::{Result, Store, StoreError};

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

/// Reads further apart than this in time stay separate chunks (keeps replay timing).
const MERGE_WINDOW_MICROS: u64 = 10_000;

/// Sessions looked up per query when a batch of output arrives.
const LOOKUP_BATCH: usize = 200;

/// Rows read from `output_chunks` at a time.
const TABLE_READ_ROWS: i64 = 512;

/// Raises a session's committed output length to `end` (never lowers it).
async fn raise_output_bytes(conn: &mut sqlx::AnyConnection, session: SessionId, end: u64) -> Result<()> {
    sqlx::query(
        "UPDATE sessions SET output_bytes = CASE WHEN output_bytes > $1 THEN output_bytes ELSE $1 END, last_output_at = $3 WHERE id = $2",
    )
    .bind(end as i64)
    .bind(session.to_string())
    .bind(crate::now())
    .execute(conn)
    .await?;
    Ok(())
}

/// Where a store keeps session output.
#[derive(Clone)]
pub(crate) enum OutputStore {
    /// Recording files beside the SQLite database.
    Files(Arc<Recordings>),
    /// Rows of the `output_chunks` table (PostgreSQL).
    Table,
}

impl OutputStore {
    /// Closes the writer of an ended session.
    pub(crate) fn close(&self, session: SessionId) {
        match self {
            OutputStore::Files(files) => files.close(session),
            OutputStore::Table => {}
        }
    }
}

/// The recording files of the server's sessions, with a writer kept open per live one.
pub(crate) struct Recordings {
    dir: PathBuf,
    writers: Mutex<HashMap<SessionId, RecordingWriter>>,
}

impl Recordings {
    pub(crate) fn new(dir: PathBuf) -> std::io::Result<Arc<Recordings>> {
        std::fs::create_dir_all(&dir)?;
        Ok(Arc::new(Recordings { dir, writers: Mutex::new(HashMap::new()) }))
    }

    fn paths(&self, session: SessionId) -> (PathBuf, PathBuf) {
        (self.dir.join(format!("{session}.raw")), self.dir.join(format!("{session}.idx")))
    }

    /// Appends `chunks` (already trimmed to follow `held`) and syncs them to disk.
    pub(crate) fn append(&self, session: SessionId, held: u64, chunks: &[OutputChunk]) -> std::io::Result<()> {
        let mut writers = self.writers.lock().expect("writers lock");
        if writers.get(&session).is_none_or(|w| w.len() != held) {
            let (raw, idx) = self.paths(session);
            writers.insert(session, RecordingWriter::open_at(&raw, &idx, held)?);
        }
        let w = writers.get_mut(&session).expect("writer just opened");
        let result = chunks.iter().try_for_each(|c| w.append(&c.data, c.t_micros)).and_then(|_| w.sync());
        if result.is_err() {
            writers.remove(&session);
        }
        result
    }

    /// Closes the writer of an ended session.
    pub(crate) fn close(&self, session: SessionId) {
        self.writers.lock().expect("writers lock").remove(&session);
    }

    /// Deletes a session's recording files (retention); missing files are fine.
    pub(crate) fn remove(&self, session: SessionId) -> std::io::Result<()> {
        self.close(session);
        for path in <[PathBuf; 2]>::from(self.paths(session)) {
            match std::fs::remove_file(&path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
        Ok(())
    }

    fn read(&self, session: SessionId, from: u64, max: usize) -> std::io::Result<Vec<OutputChunk>> {
        let (raw, idx) = self.paths(session);
        if !Path::new(&raw).exists() {
            return Ok(Vec::new());
        }
        // The writer makes the output file, then its index: a read between the two (or
        // after retention removed them) finds nothing stored yet.
        let reader = match RecordingReader::open(&raw, &idx) {
            Ok(r) => r,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        Ok(reader
            .chunks(from, max, MERGE_WINDOW_MICROS)?
            .into_iter()
            .map(|c| OutputChunk { session, offset: c.offset, t_micros: c.t_micros, data: c.data })
            .collect())
    }
}

fn io(e: std::io::Error) -> StoreError {
    StoreError::Io(e.to_string())
}

/// Per session, the offset held once stored; and per session, its committed length and
/// the chunks to store after it.
type Plan = (HashMap<SessionId, u64>, Vec<(SessionId, u64, Vec<OutputChunk>)>);

/// What a batch adds, given each live session's committed length (`stored`): bytes
/// already held are skipped, a gap the device lost is filled with NUL bytes, which
/// terminals ignore, so offsets stay those of the program's stream. A session not in
/// `stored` is not live and is left out (fenced).
fn plan(batch: Vec<OutputChunk>, stored: &HashMap<SessionId, u64>) -> Plan {
    let mut held: HashMap<SessionId, u64> = HashMap::new();
    let mut todo: Vec<(SessionId, u64, Vec<OutputChunk>)> = Vec::new();
    for mut c in batch {
        let Some(have) = held.get(&c.session).or_else(|| stored.get(&c.session)).copied() else { continue };
        let end = c.offset + c.data.len() as u64;
        if end <= have {
            held.insert(c.session, have);
            continue;
        }
        if c.offset < have {
            c.data.drain(..(have - c.offset) as usize);
            c.offset = have;
        }
        let prev_end = todo
            .iter()
            .find(|(s, _, _)| *s == c.session)
            .and_then(|(_, _, l)| l.last())
            .map(|l| l.offset + l.data.len() as u64)
            .unwrap_or(have);
        if c.offset > prev_end {
            let fill = (c.offset - prev_end) as usize;
            tracing::warn!(session = %c.session, "{fill} bytes of output were lost on the device; filling the gap");
            let mut data = vec![0u8; fill];
            data.extend_from_slice(&c.data);
            c.data = data;
            c.offset = prev_end;
        }
        held.insert(c.session, end);
        match todo.iter_mut().find(|(s, _, _)| *s == c.session) {
            Some((_, _, list)) => list.push(c),
            None => todo.push((c.session, have, vec![c])),
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
        let sql =
            format!("SELECT id, output_bytes FROM sessions WHERE id IN ({}) AND outcome IN ('starting', 'running')", marks.join(", "));
        let mut q = sqlx::query(&sql);
        for id in part {
            q = q.bind(id.as_str());
        }
        for r in q.fetch_all(&mut *conn).await? {
            out.insert(crate::parse_id(r.get("id"))?, r.get::<i64, _>("output_bytes") as u64);
        }
    }
    Ok(out)
}

impl Store {
    /// Appends a batch of output: files first (synced), then the committed lengths in one
    /// transaction; or, on PostgreSQL, the rows and the lengths in one transaction that
    /// holds the write lock from the lookup on, so what another replica stored meanwhile
    /// is never stored twice. Returns, per session, the offset now held (what may be
    /// acknowledged).
    ///
    /// Sessions missing from the answer are unknown or no longer live (fenced).
    pub async fn append_output(&self, batch: Vec<OutputChunk>) -> Result<HashMap<SessionId, u64>> {
        match &self.recordings {
            OutputStore::Files(files) => {
                let stored = live_output_bytes(&mut *self.pool.acquire().await?, &batch).await?;
                let (held, todo) = plan(batch, &stored);
                if todo.is_empty() {
                    return Ok(held);
                }
                let files = files.clone();
                let written: Vec<(SessionId, u64)> = tokio::task::spawn_blocking(move || {
                    todo.iter()
                        .map(|(session, start, chunks)| {
                            let end = chunks.last().map(|c| c.offset + c.data.len() as u64).unwrap_or(*start);
                            files.append(*session, *start, chunks).map(|_| (*session, end))
                        })
                        .collect::<std::io::Result<Vec<_>>>()
                })
                .await
                .map_err(|e| StoreError::Io(e.to_string()))?
                .map_err(io)?;
                let mut tx = self.write().await?;
                for (session, end) in &written {
                    raise_output_bytes(&mut tx, *session, *end).await?;
                }
                tx.commit().await?;
                Ok(held)
            }
            OutputStore::Table => {
                let mut tx = self.write().await?;
                let stored = live_output_bytes(&mut tx, &batch).await?;
                let (held, todo) = plan(batch, &stored);
                for (session, _, chunks) in &todo {
                    for c in chunks {
                        sqlx::query("INSERT INTO output_chunks (session_id, start_offset, t_micros, data) VALUES ($1, $2, $3, $4)")
                            .bind(session.to_string())
                            .bind(c.offset as i64)
                            .bind(c.t_micros as i64)
                            .bind(&c.data)
                            .execute(&mut *tx)
                            .await?;
                    }
                    if let Some(last) = chunks.last() {
                        raise_output_bytes(&mut tx, *session, last.offset + last.data.len() as u64).await?;
                    }
                }
                tx.commit().await?;
                Ok(held)
            }
        }
    }

    /// Stored output from `from` on, up to about `max_bytes`.
    pub async fn read_output(&self, session: SessionId, from: u64, max_bytes: usize) -> Result<Vec<OutputChunk>> {
        match &self.recordings {
            OutputStore::Files(files) => {
                let files = files.clone();
                tokio::task::spawn_blocking(move || files.read(session, from, max_bytes))
                    .await
                    .map_err(|e| StoreError::Io(e.to_string()))?
                    .map_err(io)
            }
            OutputStore::Table => {
                // The chunk holding `from`, then those after it, a batch at a time.
                let rows = sqlx::query(
                    "SELECT start_offset, t_micros, data FROM output_chunks WHERE session_id = $1 AND start_offset >= COALESCE(
                        (SELECT MAX(start_offset) FROM output_chunks WHERE session_id = $1 AND start_offset <= $2), 0)
                     ORDER BY start_offset LIMIT $3",
                )
                .bind(session.to_string())
                .bind(from as i64)
                .bind(TABLE_READ_ROWS)
                .fetch_all(&self.pool)
                .await?;
                let mut out: Vec<OutputChunk> = Vec::new();
                let mut size = 0usize;
                for r in &rows {
                    let offset = r.get::<i64, _>("start_offset") as u64;
                    let t_micros = r.get::<i64, _>("t_micros") as u64;
                    let mut data: Vec<u8> = r.get("data");
                    if offset + data.len() as u64 <= from {
                        continue;
                    }
                    let offset = if offset < from {
                        data.drain(..(from - offset) as usize);
                        from
                    } else {
                        offset
                    };
                    if size >= max_bytes {
                        break;
                    }
                    size += data.len();
                    match out.last_mut() {
                        Some(last)
                            if last.offset + last.data.len() as u64 == offset
                                && t_micros.saturating_sub(last.t_micros) <= MERGE_WINDOW_MICROS =>
                        {
                            last.data.extend_from_slice(&data)
                        }
                        _ => out.push(OutputChunk { session, offset, t_micros, data }),
                    }
                }
                Ok(out)
            }
        }
    }

    /// Deletes a session's stored output (retention): its files, or (in `tx`) its rows.
    pub(crate) async fn remove_output(&self, tx: &mut sqlx::AnyConnection, session: SessionId) -> Result<()> {
        match &self.recordings {
            OutputStore::Files(files) => files.remove(session).map_err(io),
            OutputStore::Table => {
                sqlx::query("DELETE FROM output_chunks WHERE session_id = $1").bind(session.to_string()).execute(&mut *tx).await?;
                Ok(())
            }
        }
    }

    /// Records a resize or marker.
    pub async fn add_mark(&self, session: SessionId, mark: &Mark) -> Result<()> {
        sqlx::query("INSERT INTO recording_marks (session_id, t_micros, kind, data) VALUES ($1, $2, $3, $4)")
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
        let rows = sqlx::query("SELECT t_micros, kind, data FROM recording_marks WHERE session_id = $1 ORDER BY seq")
            .bind(session.to_string())
            .fetch_all(&self.pool)
            .await?;
        Ok(rows.iter().map(|r| Mark { t_micros: r.get::<i64, _>("t_micros") as u64, kind: r.get("kind"), data: r.get("data") }).collect())
    }
}

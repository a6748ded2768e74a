//! A session's output stream and recording marks.
//!
//! Output bytes are appended to a recording file per session (`recordings/<id>.raw` and
//! its timing index `.idx`, the format the shim writes), synced to disk, and only then is
//! the new length committed in the database (`sessions.output_bytes`) — the offset the
//! server acknowledges. Bytes already held are skipped, so a resent range is never
//! stored twice; bytes a crash left past the committed length are cut back on reopen.

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
    fn append(&self, session: SessionId, held: u64, chunks: &[OutputChunk]) -> std::io::Result<()> {
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

impl Store {
    /// Appends a batch of output: files first (synced), then the committed lengths in one
    /// transaction. Returns, per session, the offset now held (what may be acknowledged).
    ///
    /// Sessions missing from the answer are unknown or no longer live (fenced).
    pub async fn append_output(&self, batch: Vec<OutputChunk>) -> Result<HashMap<SessionId, u64>> {
        let mut held: HashMap<SessionId, u64> = HashMap::new();
        let mut todo: Vec<(SessionId, u64, Vec<OutputChunk>)> = Vec::new();
        for mut c in batch {
            let have = match held.get(&c.session) {
                Some(h) => *h,
                None => {
                    // Only a live run's output is stored: a run whose lease is gone (marked
                    // lost) is refused, left out of the answer, and its device told to stop it.
                    let r = sqlx::query("SELECT output_bytes, outcome FROM sessions WHERE id = ?")
                        .bind(c.session.to_string())
                        .fetch_optional(&self.pool)
                        .await?;
                    let Some(r) = r else { continue };
                    let outcome: String = r.get("outcome");
                    if !matches!(outcome.as_str(), "starting" | "running") {
                        continue;
                    }
                    r.get::<i64, _>("output_bytes") as u64
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
            // A gap (bytes the device lost, e.g. to a full disk while the link was down)
            // is filled with NUL bytes, which terminals ignore, so offsets stay those of
            // the program's stream.
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
        if todo.is_empty() {
            return Ok(held);
        }
        let recordings = self.recordings.clone();
        let written: Vec<(SessionId, u64)> = tokio::task::spawn_blocking(move || {
            todo.iter()
                .map(|(session, start, chunks)| {
                    let end = chunks.last().map(|c| c.offset + c.data.len() as u64).unwrap_or(*start);
                    recordings.append(*session, *start, chunks).map(|_| (*session, end))
                })
                .collect::<std::io::Result<Vec<_>>>()
        })
        .await
        .map_err(|e| StoreError::Io(e.to_string()))?
        .map_err(io)?;
        let mut tx = self.write().await?;
        for (session, end) in &written {
            sqlx::query("UPDATE sessions SET output_bytes = MAX(output_bytes, ?) WHERE id = ?")
                .bind(*end as i64)
                .bind(session.to_string())
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(held)
    }

    /// Stored output from `from` on, up to about `max_bytes`.
    pub async fn read_output(&self, session: SessionId, from: u64, max_bytes: usize) -> Result<Vec<OutputChunk>> {
        let recordings = self.recordings.clone();
        tokio::task::spawn_blocking(move || recordings.read(session, from, max_bytes))
            .await
            .map_err(|e| StoreError::Io(e.to_string()))?
            .map_err(io)
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

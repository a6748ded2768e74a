//! Recording files that earlier versions of the server kept beside the SQLite database
//! (`recordings/<id>.raw` and its timing index `.idx`): on open they are moved into
//! `output_chunks`, one session per transaction, and deleted once that has committed.
//!
//! Only the committed length (`sessions.output_bytes`) is moved; bytes a crash left
//! past it were never acknowledged. A session whose rows are already there (the files
//! outlived a crash after the commit) is not moved twice. Files naming no session are
//! left alone, with a warning.

use std::path::{Path, PathBuf};

use drover_core::SessionId;
use drover_recording::RecordingReader;

use crate::output::{insert_chunks, MERGE_WINDOW_MICROS};
use crate::{OutputChunk, Result, Store, StoreError};

/// Bytes read from a recording file at a time.
const READ_PIECE: usize = 4 << 20;

fn io(e: impl std::fmt::Display) -> StoreError {
    StoreError::Io(e.to_string())
}

/// The sessions with recording files in `dir`, and the files.
fn recording_files(dir: &Path) -> std::io::Result<Vec<(SessionId, PathBuf, PathBuf)>> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let raw = entry?.path();
        if raw.extension().is_none_or(|e| e != "raw") {
            continue;
        }
        let Some(session) = raw.file_stem().and_then(|s| s.to_str()).and_then(|s| s.parse::<SessionId>().ok()) else {
            tracing::warn!(file = %raw.display(), "not a session's recording; left alone");
            continue;
        };
        found.push((session, raw.clone(), raw.with_extension("idx")));
    }
    found.sort_by_key(|(session, _, _)| *session);
    Ok(found)
}

/// Reads a recording's chunks from `from`, about [`READ_PIECE`] bytes, off the runtime.
async fn read_piece(reader: RecordingReader, from: u64) -> Result<(RecordingReader, Vec<drover_recording::Chunk>)> {
    tokio::task::spawn_blocking(move || {
        let chunks = reader.chunks(from, READ_PIECE, MERGE_WINDOW_MICROS)?;
        Ok::<_, std::io::Error>((reader, chunks))
    })
    .await
    .map_err(io)?
    .map_err(io)
}

/// Removes a file; one already gone is fine.
fn remove(path: &Path) -> Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io(format!("{}: {e}", path.display()))),
        _ => Ok(()),
    }
}

impl Store {
    /// Moves the recording files in `dir` into the database (see the module doc);
    /// returns how many sessions' output moved.
    pub(crate) async fn move_recordings(&self, dir: &Path) -> Result<usize> {
        if !dir.is_dir() {
            return Ok(0);
        }
        let files = recording_files(dir).map_err(|e| io(format!("{}: {e}", dir.display())))?;
        let mut moved = 0;
        for (session, raw, idx) in files {
            let mut tx = self.write().await?;
            let committed: Option<i64> = sqlx::query_scalar("SELECT output_bytes FROM sessions WHERE id = $1")
                .bind(session.to_string())
                .fetch_optional(&mut *tx)
                .await?;
            let Some(committed) = committed.map(|c| c as u64) else {
                tracing::warn!(file = %raw.display(), "a recording of a session this database does not have; left alone");
                continue;
            };
            let already: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM output_chunks WHERE session_id = $1")
                .bind(session.to_string())
                .fetch_one(&mut *tx)
                .await?;
            if already == 0 && committed > 0 {
                let mut reader = match RecordingReader::open(&raw, &idx) {
                    Ok(reader) => reader,
                    Err(e) => {
                        tracing::warn!(file = %raw.display(), "cannot read this recording ({e}); left alone");
                        continue;
                    }
                };
                let mut from = 0;
                while from < committed {
                    let (r, chunks) = read_piece(reader, from).await?;
                    reader = r;
                    let mut rows: Vec<OutputChunk> = Vec::with_capacity(chunks.len());
                    for c in chunks {
                        let keep = (committed - c.offset).min(c.data.len() as u64) as usize;
                        let mut data = c.data;
                        data.truncate(keep);
                        from = c.offset + keep as u64;
                        rows.push(OutputChunk { session, offset: c.offset, t_micros: c.t_micros, data: data.into() });
                        if from >= committed {
                            break;
                        }
                    }
                    if rows.is_empty() {
                        // The files hold less than was committed (an earlier version
                        // never did this); keep what is there.
                        tracing::warn!(%session, stored = from, committed, "recording shorter than its committed length");
                        sqlx::query("UPDATE sessions SET output_bytes = $1 WHERE id = $2")
                            .bind(from as i64)
                            .bind(session.to_string())
                            .execute(&mut *tx)
                            .await?;
                        break;
                    }
                    insert_chunks(&mut tx, &rows, None).await?;
                }
            }
            tx.commit().await?;
            remove(&raw)?;
            remove(&idx)?;
            moved += 1;
        }
        // Gone once empty; anything left behind stays, with the warnings above.
        let _ = std::fs::remove_dir(dir);
        if moved > 0 {
            tracing::info!(sessions = moved, "moved recording files into the database");
        }
        Ok(moved)
    }
}

#[cfg(test)]
mod tests {
    use drover_recording::RecordingWriter;

    use crate::testing::session;
    use crate::Store;

    #[tokio::test]
    async fn recording_files_move_into_the_database_up_to_the_committed_length() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("drover.db");
        let store = Store::open_sqlite(&db).await.unwrap();
        let (ws, _) = store.bootstrap("default", "alice").await.unwrap();
        let id = session(&store, ws).await;
        let other = session(&store, ws).await;
        sqlx::query("UPDATE sessions SET output_bytes = 11 WHERE id = $1").bind(id.to_string()).execute(&store.writes).await.unwrap();
        drop(store);

        let recordings = dir.path().join("recordings");
        std::fs::create_dir_all(&recordings).unwrap();
        let mut w = RecordingWriter::open(&recordings.join(format!("{id}.raw")), &recordings.join(format!("{id}.idx"))).unwrap();
        w.append(b"hello ", 10).unwrap();
        w.append(b"world", 50_000).unwrap();
        w.append(b" never acknowledged", 60_000).unwrap();
        w.sync().unwrap();
        drop(w);
        // A session with no output committed, and a file naming no session.
        std::fs::write(recordings.join(format!("{other}.raw")), b"").unwrap();
        std::fs::write(recordings.join(format!("{other}.idx")), b"").unwrap();
        std::fs::write(recordings.join("notes.raw"), b"keep me").unwrap();

        let store = Store::open_sqlite(&db).await.unwrap();
        let chunks = store.read_output(id, 0, 1 << 20).await.unwrap();
        let text: Vec<u8> = chunks.iter().flat_map(|c| c.data.clone()).collect();
        assert_eq!(text, b"hello world");
        assert_eq!(chunks.len(), 2, "the timing is kept: {chunks:?}");
        assert_eq!((chunks[1].offset, chunks[1].t_micros), (6, 50_000));
        assert!(store.read_output(other, 0, 1 << 20).await.unwrap().is_empty());
        assert!(!recordings.join(format!("{id}.raw")).exists() && !recordings.join(format!("{id}.idx")).exists());
        assert!(!recordings.join(format!("{other}.raw")).exists());
        assert_eq!(std::fs::read(recordings.join("notes.raw")).unwrap(), b"keep me");
        drop(store);

        // Opening again moves nothing twice.
        let store = Store::open_sqlite(&db).await.unwrap();
        let text: Vec<u8> = store.read_output(id, 0, 1 << 20).await.unwrap().into_iter().flat_map(|c| c.data).collect();
        assert_eq!(text, b"hello world");
    }
}

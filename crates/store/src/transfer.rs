//! Moving a whole database between engines (SQLite to PostgreSQL, or back): an export
//! is JSON lines — a header, every row of every table (parents before children), every
//! session's stored output, and an end line with the counts — and an import loads one
//! into an empty database in a single transaction, refusing a file cut short.

use std::collections::HashMap;
use std::io::{BufRead, Write};

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use drover_core::SessionId;
use futures_util::TryStreamExt;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sqlx::{Column, Row};

use crate::output::insert_chunks;
use crate::{now, parse_id, Engine, OutputChunk, Result, Store, StoreError};

/// The tables an export holds, parents before the rows that refer to them. Runtime
/// state (leases, replicas, device links, mail) is not moved.
const TABLES: &[&str] = &[
    "workspaces",
    "members",
    "devices",
    "tokens",
    "repos",
    "device_repos",
    "agents",
    "tasks",
    "sandboxes",
    "sessions",
    "session_tokens",
    "notes",
    "events",
    "recording_marks",
    "login_links",
    "web_sessions",
    "invites",
    "enrollments",
    "webhook_endpoints",
    "webhook_deliveries",
    "skills",
    "attention",
    "task_allow_rules",
    "push_keys",
    "push_subscriptions",
    "notification_choices",
    "push_batches",
    "push_heard",
    "push_deliveries",
];

/// Export format version.
const FORMAT: u32 = 1;
/// Output read per query while exporting.
const OUTPUT_BATCH: usize = 4 << 20;

/// One line of an export.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Line {
    /// The first line.
    Header { format: u32, engine: String, exported_at: String },
    /// A row of `table`, by column.
    Row { table: String, row: Map<String, Value> },
    /// A piece of a session's output (base64).
    Output { session: SessionId, offset: u64, t_micros: u64, data: String },
    /// The last line: what came before it.
    End { rows: u64, output_bytes: u64 },
}

/// What an export or import moved.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Moved {
    /// Rows.
    pub rows: u64,
    /// Bytes of session output.
    pub output_bytes: u64,
}

fn bad(line: usize, why: impl std::fmt::Display) -> StoreError {
    StoreError::Address(format!("line {line} of the export: {why}"))
}

fn write_line(out: &mut impl Write, line: &Line) -> Result<()> {
    serde_json::to_writer(&mut *out, line).map_err(|e| StoreError::Io(e.to_string()))?;
    out.write_all(b"\n").map_err(|e| StoreError::Io(e.to_string()))
}

/// A column's value as JSON: an integer, text, or null (the only kinds the schema has).
fn value(row: &sqlx::any::AnyRow, i: usize) -> Result<Value> {
    if let Ok(v) = row.try_get::<Option<i64>, _>(i) {
        return Ok(v.map_or(Value::Null, Value::from));
    }
    if let Ok(v) = row.try_get::<Option<String>, _>(i) {
        return Ok(v.map_or(Value::Null, Value::from));
    }
    Err(StoreError::Corrupt(format!("column {} holds neither an integer nor text", row.columns()[i].name())))
}

impl Store {
    /// Writes every workspace's data to `out` (stop the servers first: rows written
    /// meanwhile may be missed).
    pub async fn export(&self, out: &mut impl Write) -> Result<Moved> {
        let engine = match self.engine {
            Engine::Sqlite => "sqlite",
            Engine::Postgres => "postgres",
        };
        write_line(out, &Line::Header { format: FORMAT, engine: engine.into(), exported_at: now() })?;
        let mut moved = Moved::default();
        // One snapshot of every table (a read transaction), so rows that refer to each
        // other are exported together even if something writes meanwhile.
        let mut snapshot = self.pool.begin_with(self.engine.begin_snapshot()).await?;
        // Each session's committed length and last output time: a live one's are read
        // from its last chunk (its row holds them from its end on), and exported in
        // its row.
        let lengths = sqlx::query(concat!(
            "SELECT s.id, ",
            committed_length!(),
            " AS committed, o.stored_at FROM sessions s",
            last_chunk_join!(),
            " WHERE s.pruned_at IS NULL ORDER BY s.id"
        ))
        .fetch_all(&mut *snapshot)
        .await?;
        let mut kept: HashMap<String, (i64, Option<String>)> = HashMap::new();
        let mut sessions: Vec<(String, i64)> = Vec::new();
        for r in &lengths {
            let (id, committed): (String, i64) = (r.get("id"), r.get("committed"));
            kept.insert(id.clone(), (committed, r.get::<Option<i64>, _>("stored_at").and_then(crate::micros_time)));
            if committed > 0 {
                sessions.push((id, committed));
            }
        }
        for table in TABLES {
            // Row by row: a table (events, say) may not fit in memory.
            let sql = format!("SELECT * FROM {table}");
            let mut rows = sqlx::query(&sql).fetch(&mut *snapshot);
            while let Some(r) = rows.try_next().await? {
                let r = &r;
                let mut row = Map::new();
                for (i, c) in r.columns().iter().enumerate() {
                    row.insert(c.name().to_string(), value(r, i)?);
                }
                if *table == "sessions" {
                    if let Some((committed, at)) = row.get("id").and_then(Value::as_str).and_then(|id| kept.get(id)) {
                        row.insert("output_bytes".into(), Value::from(*committed));
                        if let Some(at) = at {
                            row.insert("last_output_at".into(), Value::from(at.as_str()));
                        }
                    }
                }
                write_line(out, &Line::Row { table: table.to_string(), row })?;
                moved.rows += 1;
            }
        }
        snapshot.commit().await?;
        for (id, committed) in sessions {
            let session: SessionId = parse_id(&id)?;
            // Only what the snapshot holds: a live session's output read after it
            // may have grown.
            let committed = committed as u64;
            let mut from = 0;
            while from < committed {
                let chunks = self.read_output(session, from, OUTPUT_BATCH).await?;
                if chunks.is_empty() {
                    break;
                }
                for mut c in chunks {
                    if c.offset >= committed {
                        break;
                    }
                    c.data.truncate((committed - c.offset) as usize);
                    from = c.offset + c.data.len() as u64;
                    moved.output_bytes += c.data.len() as u64;
                    write_line(out, &Line::Output { session, offset: c.offset, t_micros: c.t_micros, data: B64.encode(&c.data) })?;
                }
            }
        }
        write_line(out, &Line::End { rows: moved.rows, output_bytes: moved.output_bytes })?;
        out.flush().map_err(|e| StoreError::Io(e.to_string()))?;
        Ok(moved)
    }

    /// Loads an export into this database, which must hold no workspace yet: all of it
    /// in one transaction, after checking the file is whole (its end line matches).
    /// `open` is called twice, for the check and for the load.
    pub async fn import<R: BufRead>(&self, mut open: impl FnMut() -> std::io::Result<R>) -> Result<Moved> {
        let io = |e: std::io::Error| StoreError::Io(e.to_string());
        let counted = check_export(open().map_err(io)?)?;
        let mut tx = self.write().await?;
        let taken: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM workspaces").fetch_one(&mut *tx).await?;
        if taken > 0 {
            return Err(StoreError::Address(
                "the target database already holds a workspace: import into a new, empty database (do not start a server on it first)"
                    .into(),
            ));
        }
        for line in open().map_err(io)?.lines() {
            match serde_json::from_str::<Line>(&line.map_err(io)?).map_err(|e| bad(0, e))? {
                Line::Row { table, row } => insert_row(&mut tx, &table, &row).await?,
                Line::Output { session, offset, t_micros, data } => {
                    let data = B64.decode(data).map_err(|e| bad(0, e))?;
                    insert_chunks(&mut tx, &[OutputChunk { session, offset, t_micros, data: data.into() }], None).await?;
                }
                Line::Header { .. } | Line::End { .. } => {}
            }
        }
        if self.engine == Engine::Postgres {
            // Numbered rows came with their numbers: later ones continue after them.
            for table in ["events", "recording_marks"] {
                sqlx::query(&format!(
                    "SELECT setval(pg_get_serial_sequence('{table}', 'seq'), COALESCE((SELECT MAX(seq) FROM {table}), 0) + 1, false)"
                ))
                .execute(&mut *tx)
                .await?;
            }
        }
        tx.commit().await?;
        Ok(counted)
    }
}

/// The first pass of an import: the file is an export, whole (its end line counts what
/// it holds), and for tables this schema has. Returns what it holds.
fn check_export(file: impl BufRead) -> Result<Moved> {
    let io = |e: std::io::Error| StoreError::Io(e.to_string());
    let mut counted = Moved::default();
    let mut ended = None;
    for (n, line) in file.lines().enumerate() {
        let line = line.map_err(io)?;
        if ended.is_some() {
            return Err(bad(n + 1, "data after the end line"));
        }
        match serde_json::from_str::<Line>(&line).map_err(|e| bad(n + 1, e))? {
            Line::Header { format, .. } if n == 0 && format == FORMAT => {}
            Line::Header { format, .. } => return Err(bad(n + 1, format!("an export of format {format}; this drover reads {FORMAT}"))),
            _ if n == 0 => return Err(bad(1, "not a drover export (no header)")),
            Line::Row { table, .. } if !TABLES.contains(&table.as_str()) => return Err(bad(n + 1, format!("unknown table {table:?}"))),
            Line::Row { .. } => counted.rows += 1,
            Line::Output { data, .. } => counted.output_bytes += B64.decode(data).map_err(|e| bad(n + 1, e))?.len() as u64,
            Line::End { rows, output_bytes } => ended = Some(Moved { rows, output_bytes }),
        }
    }
    match ended {
        Some(e) if e == counted => Ok(counted),
        Some(e) => Err(bad(0, format!("its end line counts {e:?} but it holds {counted:?}: the file was altered"))),
        None => Err(bad(0, "no end line: the file is cut short (was the export interrupted?)")),
    }
}

/// Inserts an exported `row` of `table`, its names checked again: the file is read anew
/// for the load, and the names go into SQL.
async fn insert_row(conn: &mut sqlx::AnyConnection, table: &str, row: &Map<String, Value>) -> Result<()> {
    if !TABLES.contains(&table) {
        return Err(bad(0, format!("unknown table {table:?}")));
    }
    let mut names = Vec::new();
    let mut values = Vec::new();
    let mut args: Vec<&Value> = Vec::new();
    for (k, v) in row {
        // Column names come from the file: only plain identifiers pass.
        if k.is_empty() || !k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(bad(0, format!("bad column name {k:?}")));
        }
        names.push(k.as_str());
        if v.is_null() {
            values.push("NULL".to_string());
        } else {
            args.push(v);
            values.push(format!("${}", args.len()));
        }
    }
    let sql = format!("INSERT INTO {table} ({}) VALUES ({})", names.join(", "), values.join(", "));
    let mut q = sqlx::query(&sql);
    for v in args {
        q = match v {
            Value::Number(n) => q.bind(n.as_i64().ok_or_else(|| bad(0, format!("{n} is not an integer")))?),
            Value::String(s) => q.bind(s.as_str()),
            other => return Err(bad(0, format!("unexpected value {other}"))),
        };
    }
    q.execute(&mut *conn).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{session, store};

    #[tokio::test]
    async fn an_export_loads_into_an_empty_database_and_a_cut_one_is_refused() {
        let (a, _da) = store().await;
        let (ws, _) = a.bootstrap("default", "alice").await.unwrap();
        let id = session(&a, ws).await;
        a.mark_running(id, 42, "/").await.unwrap();
        let out: Vec<OutputChunk> = (0..3u64)
            .map(|i| OutputChunk { session: id, offset: i * 6, t_micros: i * 1_000_000, data: format!("line{i}\n").into_bytes().into() })
            .collect();
        a.append_output(out).await.unwrap();
        let mut file = Vec::new();
        let moved = a.export(&mut file).await.unwrap();
        assert!(moved.rows >= 5 && moved.output_bytes == 18, "{moved:?}");

        // Into SQLite here (the engine-to-engine move is the end-to-end test's).
        let dir = tempfile::tempdir().unwrap();
        let b = Store::open_sqlite(&dir.path().join("b.db")).await.unwrap();
        assert_eq!(b.import(|| Ok(std::io::Cursor::new(file.clone()))).await.unwrap(), moved);
        let row = b.session(id).await.unwrap().unwrap();
        assert_eq!(row.output_bytes, 18);
        let text: Vec<u8> = b.read_output(id, 0, 1 << 20).await.unwrap().into_iter().flat_map(|c| c.data).collect();
        assert_eq!(text, b"line0\nline1\nline2\n");
        assert_eq!(b.latest_event_seq(ws).await.unwrap(), a.latest_event_seq(ws).await.unwrap());
        // Numbering goes on after the imported events.
        b.mark_running(session(&b, ws).await, 7, "/").await.unwrap();
        assert!(b.latest_event_seq(ws).await.unwrap() > a.latest_event_seq(ws).await.unwrap());
        let e = b.import(|| Ok(std::io::Cursor::new(file.clone()))).await.unwrap_err().to_string();
        assert!(e.contains("already holds a workspace"), "{e}");

        let cut = &file[..file.len() - 40];
        let c = Store::open_sqlite(&dir.path().join("c.db")).await.unwrap();
        let e = c.import(|| Ok(std::io::Cursor::new(cut.to_vec()))).await.unwrap_err().to_string();
        assert!(e.contains("line"), "{e}");
        assert_eq!(c.list_sandboxes(ws, crate::SandboxFilter::All, None, None, 10).await.unwrap().items.len(), 0, "nothing half-loaded");
    }
}

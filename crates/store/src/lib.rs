//! Drover's persistence. One [`Store`] type holds every query, so no SQL leaks into the
//! server. It runs on SQLite (WAL, `synchronous=FULL`: a commit is on disk before
//! anything is acknowledged) or on PostgreSQL ([`Database`]); the queries are written
//! once in the SQL both share, and the few places where the two differ ask the
//! [`Engine`] (see `dialect.rs`).

/// The SQL list of a run's live outcomes, for `outcome IN live_outcomes!()`: the words of
/// the outcomes [`drover_core::Outcome::is_live`] holds live (a test keeps the two
/// together), spelled as the partial indexes on live sessions spell them so that the
/// queries can use those indexes. [`LIVE`] is the same for queries built at run time.
macro_rules! live_outcomes {
    () => {
        "('starting', 'running')"
    };
}

/// A subquery giving `"runs with usage,nano-dollars of priced responses,unpriced
/// responses"` over the sessions `x` that `$filter` selects (read with `cost_sum`);
/// text, so SQLite and PostgreSQL give the same answer.
macro_rules! cost_text {
    ($filter:literal) => {
        concat!(
            "(SELECT CAST(COUNT(x.usage) AS TEXT) || ',' || CAST(COALESCE(SUM(x.cost_generation + x.cost_cache_read), 0) AS TEXT) || ',' || CAST(COALESCE(SUM(x.cost_unpriced), 0) AS TEXT) FROM sessions x WHERE ",
            $filter,
            ")"
        )
    };
}

/// Joins a live session `s` to its last chunk of output `o` (none once it has ended):
/// `o.start_offset + length(o.data)` is its committed length, `o.stored_at` when its
/// output last arrived. Two index lookups; the commit of output writes no other row.
macro_rules! last_chunk_join {
    () => {
        concat!(
            " LEFT JOIN output_chunks o ON s.outcome IN ",
            live_outcomes!(),
            " AND o.session_id = s.id
             AND o.start_offset = (SELECT MAX(m.start_offset) FROM output_chunks m WHERE m.session_id = s.id)"
        )
    };
}

/// A session's committed output length, over [`last_chunk_join!`]: the end of its last
/// chunk while it is live, what its end stored once it has ended.
macro_rules! committed_length {
    () => {
        "COALESCE(o.start_offset + length(o.data), s.output_bytes)"
    };
}

/// The `SELECT` a [`SessionRow`] is read from: sessions `s` with their sandbox `b`,
/// device `d`, agent `a`, repository `r` and (live) last chunk `o`, and `$extra`
/// columns after their own.
macro_rules! session_select {
    () => {
        session_select!("")
    };
    ($extra:literal) => {
        concat!(
            "SELECT s.*, b.state AS sandbox_state, b.title, d.name AS device_name, a.name AS agent_name, r.name AS repo_name, ",
            committed_length!(),
            " AS committed_length, o.stored_at AS live_output_at",
            $extra,
            " FROM sessions s JOIN sandboxes b ON b.id = s.sandbox_id JOIN devices d ON d.id = s.device_id
             LEFT JOIN agents a ON a.id = s.agent_id LEFT JOIN repos r ON r.id = b.repo_id",
            last_chunk_join!()
        )
    };
}

mod agents;
mod attention;
mod backup;
mod cluster;
mod credentials;
mod devices;
mod dialect;
mod events;
mod gauges;
mod hand_off;
mod leases;
mod legacy;
mod lifecycle;
mod liveness;
mod members;
mod notes;
mod output;
mod pages;
mod push;
mod repos;
mod retention;
mod sandboxes;
mod screens;
mod session_tokens;
mod sessions;
mod skills;
mod spend;
mod task_runs;
mod tasks;
mod transfer;
mod web;
mod webhooks;
mod workflows;

use std::path::Path;
use std::str::FromStr;

use drover_core::{SessionId, WorkspaceId};
use sqlx::any::{AnyConnectOptions, AnyPoolOptions};
use sqlx::{AnyPool, ConnectOptions, Executor};

pub use agents::AgentRow;
pub use attention::{AttentionRow, NewAttention};
pub use backup::{backup_sqlite, Copied};
pub use cluster::{ClusterNote, SessionViewers, ViewerCount, MAIL_BATCH};
pub use credentials::{Principal, TokenKind};
pub use devices::DeviceRow;
pub use dialect::{Database, Engine};
pub use events::{EventRow, NewEvent};
pub use gauges::Gauges;
pub use hand_off::HandOffRefused;
pub use liveness::{LiveCheck, LiveGlance};
pub use members::{InviteRow, MemberRefused, MemberRow, PendingInvite, TokenRow};
pub use notes::{EarlierNote, NoteRow};
pub use output::{Mark, OutputChunk};
pub use push::{local_minute, valid_zone, DuePush, NotifyChoices, PushSubscriptionRow};
pub use repos::RepoRow;
pub use retention::Pruned;
pub use sandboxes::{LastRun, SandboxBatch, SandboxCursor, SandboxFilter, SandboxItem, SandboxTask, SHORT_SEARCH_ROWS};
pub use screens::{CheckpointAt, ScreenCheckpoint, ScreenDue};
pub use sessions::{NewSession, RecordedUsage, RouteChange, RunTimes, SessionRow};
pub use skills::SkillRow;
pub use spend::{month_start, CapCheck, SpendKey, SpendRow};
pub use task_runs::NewTaskSession;
pub use tasks::{BaseRefused, NewTask, StageSpec, TaskRow};
pub use transfer::Moved;
pub use web::WebSessionState;
pub use webhooks::{DeliveryRow, DueDelivery, WebhookRow, WebhookSecret};

/// A storage failure.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database reported an error.
    #[error("database error: {0}")]
    Db(#[from] sqlx::Error),
    /// The database address is not one Drover can use.
    #[error("{0}")]
    Address(String),
    /// Migrations failed.
    #[error("database migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// A stored value could not be read back (a bug or a hand-edited database).
    #[error("corrupt row: {0}")]
    Corrupt(String),
    /// A recording file could not be written or read.
    #[error("recording file error: {0}")]
    Io(String),
}

/// [`live_outcomes!`], for queries built with `format!`.
pub(crate) const LIVE: &str = live_outcomes!();

/// Result of store operations.
pub type Result<T> = std::result::Result<T, StoreError>;

/// Something in the store changed that a live view shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Change {
    /// The workspace whose live views must reload.
    pub workspace: WorkspaceId,
    /// The session it concerns, if any.
    pub session: Option<SessionId>,
}

/// Changes kept for subscribers that fall behind before they are told to reload.
const CHANGES_BACKLOG: usize = 1024;

/// The database.
#[derive(Clone)]
pub struct Store {
    /// Reads (and, on PostgreSQL, writes too).
    pool: AnyPool,
    /// Writes: on SQLite one connection of its own (see [`Store::open`]); on
    /// PostgreSQL the same pool as reads.
    writes: AnyPool,
    engine: Engine,
    changes: tokio::sync::broadcast::Sender<Change>,
    /// Listening to other replicas (PostgreSQL only).
    cluster: Option<std::sync::Arc<cluster::Cluster>>,
}

impl Store {
    /// Opens (creating if needed) the SQLite database at `path` and migrates it.
    pub async fn open_sqlite(path: &Path) -> Result<Store> {
        Store::open(&Database::Sqlite(path.to_path_buf())).await
    }

    /// Opens `database` (creating it if needed) and brings its schema up to date.
    pub async fn open(database: &Database) -> Result<Store> {
        sqlx::any::install_default_drivers();
        let changes = tokio::sync::broadcast::channel(CHANGES_BACKLOG).0;
        let (pool, writes, engine, cluster) = match database {
            Database::Sqlite(path) => {
                let url = sqlx::sqlite::SqliteConnectOptions::new().filename(path).create_if_missing(true).to_url_lossy();
                let opts = AnyConnectOptions::from_url(&url)?;
                let pool = sqlite_pool(&opts, READERS, READER_CACHE).await?;
                sqlx::migrate!("./migrations/sqlite").run(&pool).await?;
                // One connection does every write: SQLite runs one writer at a time
                // anyway, and a connection's page cache is dropped whenever another one
                // has written, so only a sole writer keeps the pages it writes warm.
                let writes = sqlite_pool(&opts, 1, WRITER_CACHE).await?;
                (pool, writes, Engine::Sqlite, None)
            }
            Database::Postgres(url) => {
                dialect::create_postgres_database(url).await?;
                let opts = AnyConnectOptions::from_str(url)?;
                let pool = AnyPoolOptions::new().max_connections(10).connect_with(opts).await?;
                sqlx::migrate!("./migrations/postgres").run(&pool).await?;
                let cluster = cluster::Cluster::start(url, changes.clone()).await?;
                (pool.clone(), pool, Engine::Postgres, Some(cluster))
            }
        };
        let store = Store { pool, writes, engine, changes, cluster };
        if let Database::Sqlite(path) = database {
            store.move_recordings(&path.parent().unwrap_or(Path::new(".")).join("recordings")).await?;
        }
        Ok(store)
    }

    /// The newest migration applied.
    pub async fn schema_version(&self) -> Result<i64> {
        Ok(sqlx::query_scalar::<_, Option<i64>>("SELECT MAX(version) FROM _sqlx_migrations").fetch_one(&self.pool).await?.unwrap_or(0))
    }

    /// Live changes (sessions created, started, ended; events recorded), sent after
    /// they are committed.
    pub fn subscribe(&self) -> tokio::sync::broadcast::Receiver<Change> {
        self.changes.subscribe()
    }

    /// A write transaction that holds the write lock from its first statement, so
    /// write transactions run one at a time, on one server or many (see
    /// [`Engine::begin_write`]).
    async fn write(&self) -> Result<sqlx::Transaction<'static, sqlx::Any>> {
        let (begin, lock) = self.engine.begin_write();
        let mut tx = self.writes.begin_with(begin).await?;
        if let Some(lock) = lock {
            tx.execute(lock).await?;
        }
        Ok(tx)
    }

    fn changed(&self, workspace: WorkspaceId, session: Option<SessionId>) {
        let change = Change { workspace, session };
        let _ = self.changes.send(change);
        self.announce_change(change);
    }

    /// Closes the pools, waiting for connections to finish.
    pub async fn close(&self) {
        self.pool.close().await;
        self.writes.close().await;
    }
}

/// SQLite connections that read.
const READERS: u32 = 8;

/// A reader's page cache, at most. Readers mostly page through stored output once (a
/// recording, a tail), which a cache does not speed up; SQLite's default of 2 MiB each
/// only filled with pages read once as the database grew.
const READER_CACHE: &str = "PRAGMA cache_size = -1024;";

/// The SQLite writer's page cache until [`Store::fit_write_cache`] sizes it to the
/// live work (a fresh connection starts here).
const WRITER_CACHE: &str = "PRAGMA cache_size = -2048;";

/// The writer's page cache per live run: the pages a run's appends touch (its end of
/// the output table and of its index, its row).
const WRITE_CACHE_PER_RUN_KIB: u64 = 32;
/// The writer's page cache, at least and at most (KiB).
const WRITE_CACHE_KIB: std::ops::RangeInclusive<u64> = 2048..=65536;

/// SQLite's heap in this process (page caches, prepared statements, schemas): bytes in
/// use now, and the most ever in use; None where SQLite does not count them.
pub fn sqlite_memory() -> Option<(u64, u64)> {
    let (mut now, mut most) = (0i64, 0i64);
    // SAFETY: sqlite3_status64 only writes the two counters it is given, which live
    // until it returns; the operation code is one SQLite defines.
    let rc = unsafe { libsqlite3_sys::sqlite3_status64(libsqlite3_sys::SQLITE_STATUS_MEMORY_USED, &mut now, &mut most, 0) };
    (rc == libsqlite3_sys::SQLITE_OK).then(|| (u64::try_from(now).unwrap_or(0), u64::try_from(most).unwrap_or(0)))
}

impl Store {
    /// Sizes the SQLite writer's page cache to `live_runs` runs' worth of pages (32 KiB
    /// each, from 2 MiB to 64 MiB), so it holds the pages the live runs' output touches and
    /// not every page written since the start; the size in KiB (0 on PostgreSQL, whose
    /// cache is the server's).
    pub async fn fit_write_cache(&self, live_runs: u64) -> Result<u64> {
        if self.engine != Engine::Sqlite {
            return Ok(0);
        }
        let kib = (live_runs * WRITE_CACHE_PER_RUN_KIB).clamp(*WRITE_CACHE_KIB.start(), *WRITE_CACHE_KIB.end());
        sqlx::query(&format!("PRAGMA cache_size = -{kib}")).execute(&self.writes).await?;
        Ok(kib)
    }
}

/// A pool of `size` connections to the SQLite database at `opts`, each set up for a
/// server (WAL, a sync per commit, statement journals in memory) plus `extra` pragmas.
async fn sqlite_pool(opts: &AnyConnectOptions, size: u32, extra: &'static str) -> Result<AnyPool> {
    Ok(AnyPoolOptions::new()
        .max_connections(size)
        .after_connect(move |conn, _| {
            Box::pin(async move {
                conn.execute(
                    "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA busy_timeout = 10000; PRAGMA foreign_keys = ON; PRAGMA temp_store = MEMORY;",
                )
                .await?;
                if !extra.is_empty() {
                    conn.execute(extra).await?;
                }
                Ok(())
            })
        })
        .connect_with(opts.clone())
        .await?)
}

/// Now, in the stored time format.
pub fn now() -> String {
    format_time(chrono::Utc::now())
}

/// Formats a time the way the store keeps it (fixed-width RFC 3339, UTC, microseconds).
pub fn format_time(t: chrono::DateTime<chrono::Utc>) -> String {
    t.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
}

/// Now, in µs since the Unix epoch (how `output_chunks.stored_at` keeps it).
pub(crate) fn now_micros() -> i64 {
    chrono::Utc::now().timestamp_micros()
}

/// A time kept in µs since the Unix epoch, in the stored time format.
pub(crate) fn micros_time(micros: i64) -> Option<String> {
    chrono::DateTime::from_timestamp_micros(micros).map(format_time)
}

/// Parses a stored or reported RFC 3339 time.
pub fn parse_time(s: &str) -> Option<chrono::DateTime<chrono::Utc>> {
    chrono::DateTime::parse_from_rfc3339(s).ok().map(|t| t.with_timezone(&chrono::Utc))
}

fn parse_id<T: FromStr<Err = drover_core::IdError>>(s: &str) -> Result<T> {
    s.parse().map_err(|e: drover_core::IdError| StoreError::Corrupt(e.to_string()))
}

#[cfg(test)]
mod tests {
    use drover_core::Outcome;

    #[test]
    fn the_live_outcomes_in_sql_are_the_ones_core_holds_live() {
        let words: Vec<String> = Outcome::ALL.into_iter().filter(|o| o.is_live()).map(|o| format!("'{o}'")).collect();
        assert_eq!(super::LIVE, format!("({})", words.join(", ")));
    }
}

#[cfg(test)]
pub(crate) mod testing {
    use super::*;

    /// A fresh store: SQLite in a temporary directory, or, when `DROVER_TEST_DATABASE`
    /// names a PostgreSQL server (`postgres://user@host:port`), a new database on it.
    pub async fn store() -> (Store, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        (Store::open(&database(&dir)).await.unwrap(), dir)
    }

    /// A fresh database for a test (see [`store`]); open it twice for two servers.
    pub fn database(dir: &tempfile::TempDir) -> Database {
        match std::env::var("DROVER_TEST_DATABASE") {
            Ok(server) if !server.is_empty() => {
                Database::Postgres(format!("{}/drover_test_{}", server.trim_end_matches('/'), uuid::Uuid::now_v7().simple()))
            }
            _ => Database::Sqlite(dir.path().join("t.db")),
        }
    }

    /// A task-free session (`sh` in `/`) on device `box` of `workspace`.
    pub async fn session(s: &Store, workspace: drover_core::WorkspaceId) -> drover_core::SessionId {
        let dev = s.upsert_device(workspace, "box", 2).await.unwrap();
        let new = NewSession {
            workspace,
            device: dev.id,
            command: vec!["sh".into()],
            cwd: "/".into(),
            title: "t".into(),
            cols: 80,
            rows: 24,
            created_by: "alice".into(),
            operator: None,
        };
        s.create_session(&new).await.unwrap()
    }
}

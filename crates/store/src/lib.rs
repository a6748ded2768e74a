//! Drover's persistence. One [`Store`] type holds every query, so no SQL leaks into the
//! server; today it runs on SQLite (WAL, `synchronous=FULL`: a commit is on disk before
//! anything is acknowledged), and the same surface is what a PostgreSQL backend implements.

/// A subquery giving `[runs with usage, nano-dollars of priced responses, unpriced
/// responses]` over the sessions `x` that `$filter` selects (read with `cost_sum`).
macro_rules! cost_json {
    ($filter:literal) => {
        concat!(
            "(SELECT json_array(COUNT(x.usage), COALESCE(SUM(x.cost_generation + x.cost_cache_read), 0), COALESCE(SUM(x.cost_unpriced), 0)) FROM sessions x WHERE ",
            $filter,
            ")"
        )
    };
}

mod credentials;
mod devices;
mod events;
mod liveness;
mod members;
mod output;
mod retention;
mod sandboxes;
mod sessions;
mod skills;
mod spend;
mod tasks;
mod web;
mod webhooks;

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use drover_core::{SessionId, WorkspaceId};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::SqlitePool;

pub use credentials::{Principal, TokenKind};
pub use devices::DeviceRow;
pub use events::{EventRow, NewEvent};
pub use liveness::LiveCheck;
pub use members::{InviteRow, MemberRefused, MemberRow, PendingInvite, TokenRow};
pub use output::{Mark, OutputChunk};
pub use retention::Pruned;
pub use sandboxes::{LastRun, SandboxCursor, SandboxFilter, SandboxItem, SandboxTask};
pub use sessions::{NewSession, RouteChange, RunTimes, SessionRow};
pub use skills::SkillRow;
pub use spend::{month_start, CapCheck, SpendKey, SpendRow};
pub use tasks::{AgentRow, HandOffRefused, NewTask, NewTaskSession, NoteRow, RepoRow, StageSpec, TaskRow};
pub use web::WebSessionState;
pub use webhooks::{DeliveryRow, DueDelivery, WebhookRow, WebhookSecret};

/// A storage failure.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database reported an error.
    #[error("database error: {0}")]
    Db(#[from] sqlx::Error),
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

/// Result of store operations.
pub type Result<T> = std::result::Result<T, StoreError>;

/// Something in the store changed that a live view shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Change {
    /// The workspace.
    pub workspace: WorkspaceId,
    /// The session it concerns, if any.
    pub session: Option<SessionId>,
}

/// Changes kept for subscribers that fall behind before they are told to reload.
const CHANGES_BACKLOG: usize = 1024;

/// The database.
#[derive(Clone)]
pub struct Store {
    pool: SqlitePool,
    recordings: std::sync::Arc<output::Recordings>,
    changes: tokio::sync::broadcast::Sender<Change>,
}

impl Store {
    /// Opens (creating if needed) the SQLite database at `path` and migrates it; session
    /// recordings are kept in `recordings/` beside it.
    pub async fn open_sqlite(path: &Path) -> Result<Store> {
        let opts = SqliteConnectOptions::from_str(&format!("sqlite://{}", path.display()))?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(Duration::from_secs(10))
            .foreign_keys(true);
        let pool = SqlitePoolOptions::new().max_connections(8).connect_with(opts).await?;
        sqlx::migrate!("./migrations/sqlite").run(&pool).await?;
        let dir = path.parent().unwrap_or(Path::new(".")).join("recordings");
        let recordings = output::Recordings::new(dir).map_err(|e| StoreError::Io(e.to_string()))?;
        Ok(Store { pool, recordings, changes: tokio::sync::broadcast::channel(CHANGES_BACKLOG).0 })
    }

    /// Live changes (sessions created, started, ended; events recorded), sent after
    /// they are committed.
    pub fn subscribe(&self) -> tokio::sync::broadcast::Receiver<Change> {
        self.changes.subscribe()
    }

    /// A write transaction that takes the write lock at once (`BEGIN IMMEDIATE`): a
    /// deferred one that reads first cannot wait for the lock when it then writes, and
    /// fails with "database is locked" whenever two writers meet.
    async fn write(&self) -> Result<sqlx::Transaction<'static, sqlx::Sqlite>> {
        Ok(self.pool.begin_with("BEGIN IMMEDIATE").await?)
    }

    fn changed(&self, workspace: WorkspaceId, session: Option<SessionId>) {
        let _ = self.changes.send(Change { workspace, session });
    }

    /// Closes the pool, waiting for connections to finish.
    pub async fn close(&self) {
        self.pool.close().await;
    }
}

/// Now, in the stored time format.
pub fn now() -> String {
    format_time(chrono::Utc::now())
}

/// Formats a time the way the store keeps it (fixed-width RFC 3339, UTC, microseconds).
pub fn format_time(t: chrono::DateTime<chrono::Utc>) -> String {
    t.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
}

/// Parses a stored or reported RFC 3339 time.
pub fn parse_time(s: &str) -> Option<chrono::DateTime<chrono::Utc>> {
    chrono::DateTime::parse_from_rfc3339(s).ok().map(|t| t.with_timezone(&chrono::Utc))
}

fn parse_id<T: FromStr<Err = drover_core::IdError>>(s: &str) -> Result<T> {
    s.parse().map_err(|e: drover_core::IdError| StoreError::Corrupt(e.to_string()))
}

#[cfg(test)]
pub(crate) mod testing {
    use super::*;

    /// A store in a fresh temporary directory.
    pub async fn store() -> (Store, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_sqlite(&dir.path().join("t.db")).await.unwrap();
        (store, dir)
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

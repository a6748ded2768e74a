//! An online copy of a live SQLite database (`drover backup`): `VACUUM INTO` through a
//! connection of its own, which reads one snapshot of the WAL database while the server
//! goes on writing (in WAL mode a reader neither waits for the writer nor stops it), and
//! writes that snapshot, compacted, into a new file. The copy is then checked before
//! anyone relies on it.

use std::path::Path;
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteConnection};
use sqlx::{ConnectOptions, Connection};

use crate::{Result, StoreError};

/// How long the copy waits for a lock it cannot take at once (a checkpoint that
/// truncates the WAL, or a server starting and migrating).
const BUSY: Duration = Duration::from_secs(30);

/// What a finished copy holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Copied {
    /// The newest migration in the copy (a server of that version or newer opens it; 0:
    /// the database is not Drover's, or has no schema yet).
    pub schema_version: i64,
}

/// Copies the SQLite database at `source`, live or not, into `into`, which must not
/// exist yet (or be empty), and checks the copy (`PRAGMA quick_check`). The copy is not
/// synced to disk: the caller does that before it puts the file in place.
pub async fn backup_sqlite(source: &Path, into: &Path) -> Result<Copied> {
    if !source.is_file() {
        return Err(StoreError::Io(format!("there is no database at {}", source.display())));
    }
    let target = into.to_str().ok_or_else(|| StoreError::Io(format!("{} is not a UTF-8 path", into.display())))?;
    // Not created if missing, and the journal mode left as the server set it (WAL).
    let mut conn = connect(SqliteConnectOptions::new().filename(source).create_if_missing(false)).await?;
    let copied = sqlx::query("VACUUM INTO $1").bind(target).execute(&mut conn).await;
    conn.close().await?;
    copied?;
    let mut copy = connect(SqliteConnectOptions::new().filename(into).read_only(true)).await?;
    let verdict: String = sqlx::query_scalar("PRAGMA quick_check").fetch_one(&mut copy).await?;
    let drover: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM sqlite_master WHERE name = '_sqlx_migrations'").fetch_one(&mut copy).await?;
    let version: Option<i64> = match drover {
        0 => None,
        _ => sqlx::query_scalar("SELECT MAX(version) FROM _sqlx_migrations").fetch_one(&mut copy).await?,
    };
    copy.close().await?;
    if verdict != "ok" {
        return Err(StoreError::Corrupt(format!("the copy in {} fails its check: {verdict}", into.display())));
    }
    Ok(Copied { schema_version: version.unwrap_or(0) })
}

async fn connect(opts: SqliteConnectOptions) -> Result<SqliteConnection> {
    Ok(opts.busy_timeout(BUSY).connect().await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_copy_of_an_open_database_holds_its_committed_rows_and_passes_its_check() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("drover.db");
        let store = crate::Store::open_sqlite(&path).await.unwrap();
        store.bootstrap("default", "owner").await.unwrap();
        let into = dir.path().join("copy.db");
        let copied = backup_sqlite(&path, &into).await.unwrap();
        assert_eq!(copied.schema_version, store.schema_version().await.unwrap());
        store.close().await;
        let copy = crate::Store::open_sqlite(&into).await.unwrap();
        assert_eq!(copy.schema_version().await.unwrap(), copied.schema_version);
        copy.close().await;
        // A file already there is never written over.
        assert!(backup_sqlite(&path, &into).await.is_err());
        assert!(backup_sqlite(&dir.path().join("none.db"), &dir.path().join("x.db")).await.is_err());
    }
}

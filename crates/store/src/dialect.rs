//! Where SQLite and PostgreSQL differ: how a database is named and opened, how a write
//! transaction takes the write lock, and the few queries that need each engine's own
//! functions. Everything else in the store is written once, in the SQL both share
//! (`$N` parameters, `||`, `CAST`, `COALESCE`, row values, `ON CONFLICT`, `RETURNING`).

use std::path::PathBuf;

use sqlx::migrate::MigrateDatabase;

use crate::{Result, StoreError};

/// Where a store keeps its data: `--database` on the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Database {
    /// A SQLite file: one server.
    Sqlite(PathBuf),
    /// A PostgreSQL database (`postgres://user:password@host:port/name`), which several
    /// `drover server` replicas may share.
    Postgres(String),
}

impl Database {
    /// Parses `sqlite:PATH`, `sqlite://PATH`, `postgres://…` or `postgresql://…`.
    pub fn parse(s: &str) -> Result<Database> {
        let s = s.trim();
        if s.starts_with("postgres://") || s.starts_with("postgresql://") {
            return Ok(Database::Postgres(s.to_string()));
        }
        if let Some(path) = s.strip_prefix("sqlite://").or_else(|| s.strip_prefix("sqlite:")) {
            if path.is_empty() {
                return Err(StoreError::Address("sqlite: needs a file path, e.g. sqlite:/var/lib/drover/drover.db".into()));
            }
            return Ok(Database::Sqlite(PathBuf::from(path)));
        }
        Err(StoreError::Address(format!("unknown database {s:?}: use sqlite:PATH or postgres://USER:PASSWORD@HOST:PORT/DATABASE")))
    }

    /// The address with any password hidden, for logs and messages.
    pub fn display(&self) -> String {
        match self {
            Database::Sqlite(path) => format!("sqlite:{}", path.display()),
            Database::Postgres(url) => match url::Url::parse(url) {
                Ok(mut u) => {
                    if u.password().is_some() {
                        let _ = u.set_password(Some("***"));
                    }
                    u.to_string()
                }
                Err(_) => "postgres://…".into(),
            },
        }
    }
}

/// The SQL engine a store runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    /// SQLite: one server process owns the file.
    Sqlite,
    /// PostgreSQL: any number of server replicas.
    Postgres,
}

/// The advisory lock every write transaction takes on PostgreSQL (an arbitrary key,
/// "drover" in ASCII).
#[cfg(test)]
const WRITE_LOCK_KEY: i64 = 0x0000_6472_6f76_6572;

/// Takes [`WRITE_LOCK_KEY`] until the transaction ends.
const WRITE_LOCK: &str = "SELECT pg_advisory_xact_lock(110442659079538)";

impl Engine {
    /// How a write transaction begins, and the statement (if any) that then takes the
    /// write lock. Write transactions run one at a time, as SQLite's `BEGIN IMMEDIATE`
    /// makes them: each reads, decides and writes with nobody else writing in between,
    /// so the store's read-then-write checks (a free slot, the current stage, the last
    /// owner) hold on PostgreSQL and across replicas too, and rows numbered in a
    /// transaction (event sequence numbers) commit in number order, so a reader paging
    /// by number never skips one that commits late.
    pub(crate) fn begin_write(self) -> (&'static str, Option<&'static str>) {
        match self {
            Engine::Sqlite => ("BEGIN IMMEDIATE", None),
            Engine::Postgres => ("BEGIN", Some(WRITE_LOCK)),
        }
    }

    /// How a read transaction that sees one snapshot of the database begins.
    pub(crate) fn begin_snapshot(self) -> &'static str {
        match self {
            // A deferred transaction reads one snapshot of a WAL database.
            Engine::Sqlite => "BEGIN",
            Engine::Postgres => "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY",
        }
    }

    /// Now, as the database's own clock gives it, in the stored time format, moved by
    /// the number of seconds in parameter `secs` (PostgreSQL: one clock for every
    /// replica, so their leases and liveness do not depend on their clocks agreeing;
    /// SQLite: one server, whose clock it is).
    pub(crate) fn db_time(self, secs: &str) -> String {
        match self {
            Engine::Sqlite => format!("strftime('%Y-%m-%dT%H:%M:%f000Z', 'now', {secs} || ' seconds')"),
            Engine::Postgres => format!(
                "to_char((clock_timestamp() + make_interval(secs => {secs})) AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')"
            ),
        }
    }

    /// A filter on the sandbox list for the text parameter `text` (an FTS phrase on
    /// SQLite, a `LIKE` pattern on PostgreSQL, as [`Engine::search_takes_pattern`]
    /// says) or the sandbox or session id parameter `id`, served by a trigram index.
    pub(crate) fn sandbox_search(self, text: &str, id: &str) -> String {
        match self {
            Engine::Sqlite => format!(
                " AND b.rowid IN (SELECT rowid FROM sandbox_search WHERE sandbox_search MATCH {text}
                                  UNION SELECT rowid FROM sandboxes WHERE id = {id}
                                  UNION SELECT rowid FROM sandboxes WHERE last_session_id = {id})"
            ),
            // Each branch on its own index (one OR across them scans the whole list).
            Engine::Postgres => format!(
                " AND b.id IN (SELECT id FROM sandboxes WHERE title ILIKE {text} ESCAPE '\\'
                               UNION SELECT s.id FROM sandboxes s JOIN devices n ON n.id = s.device_id WHERE n.name ILIKE {text} ESCAPE '\\'
                               UNION SELECT id FROM sandboxes WHERE id = {id}
                               UNION SELECT id FROM sandboxes WHERE last_session_id = {id})"
            ),
        }
    }

    /// The start of the list's batch query (sandboxes `b` of workspace `$1`) when it is
    /// searched on the index: on SQLite the workspace is only a filter there (`+`), so
    /// the planner, which has no statistics, looks the matches up by row rather than walk
    /// the whole list in order testing each.
    pub(crate) fn sandbox_search_head(self) -> &'static str {
        match self {
            Engine::Sqlite => "SELECT b.* FROM sandboxes b WHERE +b.workspace_id = $1",
            Engine::Postgres => "SELECT b.* FROM sandboxes b WHERE b.workspace_id = $1",
        }
    }

    /// The start of the list's batch query when the newest rows are walked: on SQLite
    /// with each row's `rid`, for [`Engine::sandbox_walk`].
    pub(crate) fn sandbox_walk_head(self) -> &'static str {
        match self {
            Engine::Sqlite => "SELECT b.rowid AS rid, b.* FROM sandboxes b WHERE b.workspace_id = $1",
            Engine::Postgres => "SELECT b.* FROM sandboxes b WHERE b.workspace_id = $1",
        }
    }

    /// The newest `rows` rows of the list's batch query `batch` that match the text
    /// parameter `text` (as [`Engine::sandbox_search`] takes it) or are the sandbox or
    /// session id `id`. SQLite asks its FTS index only about the rowids those rows span,
    /// so the match is the index's own (Unicode case folding included) and a common word
    /// costs no more than a rare one.
    pub(crate) fn sandbox_walk(self, batch: &str, rows: usize, text: &str, id: &str) -> String {
        let newest = format!("{batch} ORDER BY b.created_at DESC, b.id DESC LIMIT {rows}");
        match self {
            Engine::Sqlite => format!(
                "WITH w AS MATERIALIZED ({newest})
                 SELECT * FROM w b
                 WHERE b.rid IN (SELECT rowid FROM sandbox_search WHERE sandbox_search MATCH {text}
                                 AND rowid >= (SELECT min(rid) FROM w) AND rowid <= (SELECT max(rid) FROM w))
                    OR b.id = {id} OR b.last_session_id = {id}"
            ),
            Engine::Postgres => format!(
                "SELECT * FROM ({newest}) b
                 WHERE b.title ILIKE {text} ESCAPE '\\' OR b.device_id IN (SELECT n.id FROM devices n WHERE n.name ILIKE {text} ESCAPE '\\')
                    OR b.id = {id} OR b.last_session_id = {id}"
            ),
        }
    }

    /// `LIKE` that ignores ASCII case (SQLite's `LIKE` does; PostgreSQL's is `ILIKE`).
    pub(crate) fn like(self) -> &'static str {
        match self {
            Engine::Sqlite => "LIKE",
            Engine::Postgres => "ILIKE",
        }
    }

    /// Whether the indexed search takes a `LIKE` pattern (PostgreSQL's trigram index
    /// serves `ILIKE '%…%'`) rather than an FTS phrase.
    pub(crate) fn search_takes_pattern(self) -> bool {
        match self {
            Engine::Sqlite => false,
            Engine::Postgres => true,
        }
    }

    /// The number at JSON path `path` (`'{a,b}'` on PostgreSQL, `'$.a.b'` on SQLite) of
    /// the JSON text in column `col`, as a SQL expression; `path` is given as its keys.
    pub(crate) fn json_number(self, col: &str, keys: &[&str]) -> String {
        match self {
            Engine::Sqlite => format!("json_extract({col}, '$.{}')", keys.join(".")),
            Engine::Postgres => format!("CAST(({col})::jsonb #>> '{{{}}}' AS BIGINT)", keys.join(",")),
        }
    }

    /// The text at JSON path `keys` of the JSON text in column `col`.
    pub(crate) fn json_text(self, col: &str, keys: &[&str]) -> String {
        match self {
            Engine::Sqlite => format!("json_extract({col}, '$.{}')", keys.join(".")),
            Engine::Postgres => format!("(({col})::jsonb #>> '{{{}}}')", keys.join(",")),
        }
    }

    /// A `FROM` item giving each element of the JSON array at key `key` of the JSON text
    /// in `col` as `alias.value` (JSON text).
    pub(crate) fn json_elements(self, col: &str, key: &str, alias: &str) -> String {
        match self {
            Engine::Sqlite => format!("json_each({col}, '$.{key}') {alias}"),
            Engine::Postgres => format!("jsonb_array_elements(({col})::jsonb -> '{key}') AS {alias}(value)"),
        }
    }
}

/// Creates the PostgreSQL database `url` names if it does not exist yet (as SQLite
/// creates its file), tolerating another replica creating it at the same moment.
pub(crate) async fn create_postgres_database(url: &str) -> Result<()> {
    use sqlx::Connection;
    // The database itself first: a role that may connect only to its own database (as
    // on managed services) never needs the maintenance database.
    match sqlx::PgConnection::connect(url).await {
        Ok(conn) => {
            let _ = conn.close().await;
            return Ok(());
        }
        // 3D000: invalid_catalog_name (no such database): create it below.
        Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("3D000") => {}
        Err(e) => return Err(e.into()),
    }
    match sqlx::Postgres::create_database(url).await {
        Ok(()) => {
            tracing::info!("created the database {}", Database::Postgres(url.into()).display());
            Ok(())
        }
        // 42P04: duplicate_database (another replica made it first).
        Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("42P04") => Ok(()),
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_database_addresses() {
        assert_eq!(Database::parse("sqlite:/a/b.db").unwrap(), Database::Sqlite("/a/b.db".into()));
        assert_eq!(Database::parse("sqlite:///a/b.db").unwrap(), Database::Sqlite("/a/b.db".into()));
        assert_eq!(Database::parse("sqlite:rel.db").unwrap(), Database::Sqlite("rel.db".into()));
        assert!(matches!(Database::parse("postgres://u:p@h/db").unwrap(), Database::Postgres(_)));
        assert!(matches!(Database::parse("postgresql://h/db").unwrap(), Database::Postgres(_)));
        for bad in ["", "sqlite:", "mysql://h/db", "/tmp/x.db"] {
            let e = Database::parse(bad).unwrap_err().to_string();
            assert!(e.contains("sqlite:"), "{bad}: {e}");
        }
    }

    #[test]
    fn hides_passwords() {
        let d = Database::parse("postgres://drover:s3cret@db:5432/drover").unwrap();
        assert!(!d.display().contains("s3cret"), "{}", d.display());
        assert!(d.display().contains("db:5432/drover"));
    }

    #[test]
    fn write_lock_key_is_drover() {
        assert_eq!(&WRITE_LOCK_KEY.to_be_bytes()[2..], b"drover");
        assert!(WRITE_LOCK.contains(&format!("({WRITE_LOCK_KEY})")));
    }
}

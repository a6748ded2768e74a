//! OpenCode's store (`$XDG_DATA_HOME/opencode/opencode.db`, else
//! `~/.local/share/opencode/opencode.db`; SQLite in WAL mode, read here read-only):
//! sessions carry the `directory` they ran in, and each assistant `message` row's JSON
//! `data` has `modelID` and `tokens` {input (uncached), output, reasoning, cache {read,
//! write}}. A message is rewritten as its response streams; the ledger keeps its fullest
//! copy.

use std::path::{Path, PathBuf};

use drover_core::spend::Tokens;
use serde::Deserialize;
use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{ConnectOptions, Row};

use super::Turn;

#[derive(Deserialize)]
struct Data {
    #[serde(rename = "modelID")]
    model: Option<String>,
    tokens: Option<Usage>,
}

#[derive(Deserialize)]
struct Usage {
    #[serde(default)]
    input: u64,
    #[serde(default)]
    output: u64,
    #[serde(default)]
    reasoning: u64,
    #[serde(default)]
    cache: Cache,
}

#[derive(Deserialize, Default)]
struct Cache {
    #[serde(default)]
    read: u64,
    #[serde(default)]
    write: u64,
}

/// Where OpenCode keeps its store, from the daemon's environment.
pub fn database() -> Option<PathBuf> {
    let data = std::env::var_os("XDG_DATA_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/share")))?;
    Some(data.join("opencode").join("opencode.db"))
}

/// The turn a message row records, if it is an assistant response with usage.
pub fn turn(id: &str, created_ms: i64, data: &str) -> Option<Turn> {
    let d: Data = serde_json::from_str(data).ok()?;
    let u = d.tokens?;
    let c = super::clamp;
    let at = chrono::DateTime::from_timestamp_millis(created_ms).map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true));
    Some(Turn {
        key: format!("opencode-{id}"),
        model: d.model.unwrap_or_else(|| "unknown".into()),
        // Reasoning is billed as output.
        tokens: Tokens {
            input: c(u.input),
            output: c(u.output) + c(u.reasoning),
            cache_write_5m: c(u.cache.write),
            cache_read: c(u.cache.read),
            ..Tokens::default()
        },
        at,
        sidechain: false,
    })
}

/// The responses of OpenCode sessions that ran in `cwd`, from `since_ms` (Unix ms) on,
/// written after `updated_after` (Unix ms; a message is rewritten as its response
/// streams), with the latest such time: the cursor for the next read, so each message is
/// read again only when it changed. An absent or unreadable store has none.
pub async fn turns(db: &Path, cwd: &Path, since_ms: i64, updated_after: i64) -> (Vec<Turn>, i64) {
    if !db.exists() {
        return (Vec::new(), updated_after);
    }
    let opts = SqliteConnectOptions::new().filename(db).read_only(true).busy_timeout(std::time::Duration::from_secs(1));
    let Ok(mut conn) = opts.connect().await else { return (Vec::new(), updated_after) };
    let rows = sqlx::query(
        "SELECT m.id, m.time_created, m.time_updated, m.data FROM message m JOIN session s ON s.id = m.session_id
         WHERE s.directory = ? AND m.time_created >= ? AND m.time_updated > ? AND json_extract(m.data, '$.role') = 'assistant'
         ORDER BY m.time_updated",
    )
    .bind(cwd.to_string_lossy().into_owned())
    .bind(since_ms)
    .bind(updated_after)
    .fetch_all(&mut conn)
    .await
    .unwrap_or_default();
    let latest = rows.iter().map(|r| r.get::<i64, _>("time_updated")).max().unwrap_or(updated_after).max(updated_after);
    let turns = rows
        .iter()
        .filter_map(|r| turn(&r.get::<String, _>("id"), r.get::<i64, _>("time_created"), &r.get::<String, _>("data")))
        .filter(|t| t.tokens.total() > 0)
        .collect();
    (turns, latest)
}

#[cfg(test)]
mod tests {
    use super::super::Ledger;
    use super::*;
    use drover_core::spend::{Cost, PriceTable};
    use sqlx::Connection;

    /// A store with OpenCode's tables: two sessions in different folders, a user message,
    /// an assistant message (written again once its response finished), and one from
    /// before the run.
    async fn store(path: &Path) {
        let mut c =
            sqlx::SqliteConnection::connect_with(&SqliteConnectOptions::new().filename(path).create_if_missing(true)).await.unwrap();
        for sql in [
            "CREATE TABLE session (id TEXT PRIMARY KEY, project_id TEXT NOT NULL, directory TEXT NOT NULL, title TEXT NOT NULL, time_created INTEGER NOT NULL, time_updated INTEGER NOT NULL)",
            "CREATE TABLE message (id TEXT PRIMARY KEY, session_id TEXT NOT NULL, time_created INTEGER NOT NULL, time_updated INTEGER NOT NULL, data TEXT NOT NULL)",
            "INSERT INTO session VALUES ('ses_a', 'p', '/w/mine', 'a', 1000, 1000), ('ses_b', 'p', '/w/theirs', 'b', 1000, 1000)",
            r#"INSERT INTO message VALUES ('msg_u', 'ses_a', 2000, 2000, '{"role":"user","time":{"created":2000}}')"#,
            r#"INSERT INTO message VALUES ('msg_old', 'ses_a', 500, 500, '{"role":"assistant","modelID":"claude-sonnet-4-5","tokens":{"input":1,"output":1,"reasoning":0,"cache":{"read":0,"write":0}}}')"#,
            r#"INSERT INTO message VALUES ('msg_1', 'ses_a', 3000, 3500, '{"role":"assistant","modelID":"claude-sonnet-4-5","providerID":"anthropic","tokens":{"input":200,"output":100,"reasoning":50,"cache":{"read":5000,"write":1000}},"cost":0}')"#,
            r#"INSERT INTO message VALUES ('msg_2', 'ses_b', 3000, 3500, '{"role":"assistant","modelID":"claude-sonnet-4-5","tokens":{"input":9999,"output":9999,"reasoning":0,"cache":{"read":0,"write":0}}}')"#,
        ] {
            sqlx::query(sql).execute(&mut c).await.unwrap();
        }
    }

    #[tokio::test]
    async fn an_opencode_store_adds_up_by_hand_for_its_own_folder_and_run() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("opencode.db");
        store(&db).await;
        let mut ledger = Ledger::new(PriceTable::default());
        let (read, cursor) = turns(&db, Path::new("/w/mine"), 1000, 0).await;
        for t in read {
            ledger.record(t);
        }
        assert_eq!(cursor, 3500);
        assert!(turns(&db, Path::new("/w/mine"), 1000, cursor).await.0.is_empty(), "nothing changed since");
        let s = ledger.spend();
        assert_eq!(s.turns, 1, "only msg_1: another folder's and an earlier run's are not this run's");
        // 200 × 3000 + 150 out × 15000 + 1000 writes × 3750 = 600,000 + 2,250,000 + 3,750,000; 5000 reads × 300.
        assert_eq!(s.known_cost(), Some(Cost { generation: 6_600_000, cache_read: 1_500_000 }));
        assert!(turns(&dir.path().join("missing.db"), Path::new("/w/mine"), 0, 0).await.0.is_empty());
    }
}

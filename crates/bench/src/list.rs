//! The sandbox list at scale: 100,000 sandboxes in the database, then the API time of the
//! Sessions page's first batch (Live and All), a deep batch, and searches, against the
//! time of `GET /api/v1/health` on the same server in the same run (the HTTP floor); on
//! SQLite and, side by side, on PostgreSQL.

use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result};
use drover_core::{SandboxId, SessionId};
use serde::Serialize;

use crate::drover::{Postgres, Up};
use crate::http::Client;

/// Requests per measured query (the median is reported).
const REPEATS: usize = 25;

/// Sandbox list figures (milliseconds are medians).
#[derive(Debug, Serialize)]
pub struct ListFigures {
    /// `SQLite` or `PostgreSQL`.
    pub engine: String,
    /// Sandboxes in the database.
    pub sandboxes: usize,
    /// `GET /api/v1/health`: the baseline.
    pub health_ms: f64,
    /// Each query: name, median ms, ratio to health.
    pub queries: Vec<(String, f64, f64)>,
}

/// Rows per INSERT while seeding.
const SEED_BATCH: usize = 100;

/// Writes `n` sandboxes (each with one run; the last `live` of them running) straight
/// into the database at `url` (`sqlite://PATH` or `postgres://…`) of a running server,
/// on its first device.
pub async fn seed(url: &str, n: usize, live: usize) -> Result<()> {
    use sqlx::Connection;
    sqlx::any::install_default_drivers();
    let mut conn = sqlx::AnyConnection::connect(url).await?;
    let (ws, dev): (String, String) =
        sqlx::query_as("SELECT workspace_id, id FROM devices ORDER BY name LIMIT 1").fetch_one(&mut conn).await?;
    let words = ["build", "refactor", "fix", "docs", "tests", "deploy", "migrate", "review"];
    let start = chrono::Utc::now() - chrono::Duration::days(100);
    let mut tx = conn.begin().await?;
    for first in (0..n).step_by(SEED_BATCH) {
        let rows: Vec<usize> = (first..n.min(first + SEED_BATCH)).collect();
        let sandboxes = format!(
            "INSERT INTO sandboxes (id, workspace_id, device_id, kind, title, cwd, state, created_at, updated_at, last_session_id, runs, live) VALUES {}",
            values(rows.len(), 9, |p| format!("({}, {}, {}, 'remote', {}, '/', {}, {}, {}, {}, 1, {})", p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8]))
        );
        let sessions = format!(
            "INSERT INTO sessions (id, workspace_id, sandbox_id, device_id, command, cwd, cols, rows, outcome, created_by, created_at, started_at, ended_at, screen_final) VALUES {}",
            values(rows.len(), 8, |p| format!("({}, {}, {}, {}, '[\"agent\"]', '/', 120, 40, {}, 'bench', {}, {}, {}, {})", p[0], p[1], p[2], p[3], p[4], p[5], p[5], p[6], p[7]))
        );
        let (mut q1, mut q2) = (sqlx::query(&sandboxes), sqlx::query(&sessions));
        for &i in &rows {
            let (sbx, ses) = (SandboxId::new().to_string(), SessionId::new().to_string());
            let at = (start + chrono::Duration::seconds((i * 86) as i64)).format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string();
            let is_live = i + live >= n;
            let title =
                format!("{} {} #{i}{}", words[i % words.len()], words[(i / 7) % words.len()], if i % 10_000 == 77 { " zebra" } else { "" });
            let (state, outcome) = if is_live { ("active", "running") } else { ("stopped", ["released", "incomplete", "failed"][i % 3]) };
            q1 = q1
                .bind(sbx.clone())
                .bind(ws.clone())
                .bind(dev.clone())
                .bind(title)
                .bind(state)
                .bind(at.clone())
                .bind(at.clone())
                .bind(ses.clone())
                .bind(is_live as i64);
            // A finished run's Final screen was made long ago (the checkpointer has
            // nothing left to do for the history).
            q2 = q2
                .bind(ses)
                .bind(ws.clone())
                .bind(sbx)
                .bind(dev.clone())
                .bind(outcome)
                .bind(at.clone())
                .bind(if is_live { None } else { Some(at) })
                .bind(!is_live as i64);
        }
        q1.execute(&mut *tx).await?;
        q2.execute(&mut *tx).await?;
    }
    tx.commit().await?;
    Ok(())
}

/// `rows` VALUES tuples of `per_row` numbered placeholders (`$1`, `$2`, …: both SQLite
/// and PostgreSQL take them), each tuple written by `tuple` from its placeholders.
fn values(rows: usize, per_row: usize, tuple: impl Fn(&[String]) -> String) -> String {
    (0..rows).map(|r| tuple(&(0..per_row).map(|c| format!("${}", r * per_row + c + 1)).collect::<Vec<_>>())).collect::<Vec<_>>().join(", ")
}

/// List figures on each database engine.
#[derive(Debug, Serialize)]
pub struct ListReport {
    /// On SQLite (the default database).
    pub sqlite: ListFigures,
    /// On PostgreSQL, unless it was skipped.
    pub postgres: Option<ListFigures>,
    /// Why PostgreSQL was skipped.
    pub postgres_skipped: Option<String>,
}

/// Seeds `n` sandboxes and times the list API on SQLite, then on PostgreSQL (`pg`, or
/// why there is none), and prints both side by side.
pub fn run(exe: &Path, n: usize, pg: &std::result::Result<Postgres, String>) -> Result<ListReport> {
    let sqlite = run_on(exe, n, None)?;
    let (postgres, postgres_skipped) = match pg {
        Ok(pg) => {
            let name = format!("drover_list_{}", std::process::id());
            let r = run_on(exe, n, Some(&pg.url(&name)));
            pg.drop_database(&name);
            (Some(r?), None)
        }
        Err(why) => {
            println!("  PostgreSQL skipped: {why}");
            (None, Some(why.clone()))
        }
    };
    if let Some(pg) = &postgres {
        println!("sandbox list, side by side ({n} sandboxes, median ms; × health on the same server):");
        println!("  {:<38} {:>19}  {:>19}", "", "SQLite", "PostgreSQL");
        println!("  {:<38} {:>9.2} ms {:>6}  {:>9.2} ms {:>6}", "health (baseline)", sqlite.health_ms, "", pg.health_ms, "");
        for ((name, a, ra), (_, b, rb)) in sqlite.queries.iter().zip(&pg.queries) {
            println!("  {name:<38} {a:>9.2} ms {ra:>5.1}×  {b:>9.2} ms {rb:>5.1}×");
        }
    }
    Ok(ListReport { sqlite, postgres, postgres_skipped })
}

/// Seeds `n` sandboxes into a `drover up` on `database` (None: SQLite) and times the list API.
fn run_on(exe: &Path, n: usize, database: Option<&str>) -> Result<ListFigures> {
    let engine = if database.is_some() { "PostgreSQL" } else { "SQLite" };
    let up = Up::start_on(exe, database)?;
    let url = match database {
        Some(url) => url.to_string(),
        None => format!("sqlite://{}", up.home.path().join("drover.db").display()),
    };
    let t0 = Instant::now();
    tokio::runtime::Builder::new_current_thread().enable_all().build()?.block_on(seed(&url, n, 200))?;
    println!("  seeded {n} sandboxes into {engine} in {:.1}s", t0.elapsed().as_secs_f64());
    let client = Client::for_up(&up)?;
    // A cursor deep in the list: the last row of a batch about half way down.
    let mid: serde_json::Value = serde_json::from_slice(&client.get("/api/v1/sandboxes?filter=all&limit=200")?)?;
    let mut cursor = mid["next_cursor"].as_str().context("cursor")?.to_string();
    for _ in 0..(n / 400) {
        let page: serde_json::Value =
            serde_json::from_slice(&client.get(&format!("/api/v1/sandboxes?filter=all&limit=200&cursor={}", enc(&cursor)))?)?;
        cursor = page["next_cursor"].as_str().context("cursor")?.to_string();
    }
    let health = client.time("/api/v1/health", REPEATS)?;
    let queries = [
        ("first batch, Live", "/api/v1/sandboxes?filter=live&limit=50".to_string()),
        ("first batch, All", "/api/v1/sandboxes?filter=all&limit=50".to_string()),
        ("batch half way down, All", format!("/api/v1/sandboxes?filter=all&limit=50&cursor={}", enc(&cursor))),
        ("search, common word (All)", "/api/v1/sandboxes?filter=all&limit=50&q=deploy".to_string()),
        ("search, uncommon (#123, 0.1%)", "/api/v1/sandboxes?filter=all&limit=50&q=%23123".to_string()),
        ("search, rare word (All)", "/api/v1/sandboxes?filter=all&limit=50&q=zebra".to_string()),
        ("search, no match (All)", "/api/v1/sandboxes?filter=all&limit=50&q=nothing-matches-this".to_string()),
        ("search, 2 letters, no match: a batch", "/api/v1/sandboxes?filter=all&limit=50&q=zx".to_string()),
        ("running count (sidebar badge)", "/api/v1/overview".to_string()),
    ];
    let mut out = Vec::new();
    for (name, path) in queries {
        let ms = client.time(&path, REPEATS)?;
        out.push((name.to_string(), ms, ms / health));
    }
    // The page asks again until a short search has looked through the whole list.
    let (ms, batches) = whole_short_search(&client, "zx")?;
    out.push((format!("  …to the list's end ({batches} batches)"), ms, ms / health));
    println!("sandbox list on {engine} ({n} sandboxes, median of {REPEATS} requests; goal < 50 ms): health {health:.2} ms");
    for (name, ms, ratio) in &out {
        println!("  {name:<38} {ms:7.2} ms  ({ratio:.1}× health)");
    }
    Ok(ListFigures { engine: engine.to_string(), sandboxes: n, health_ms: health, queries: out })
}

/// A short search followed batch by batch to the list's end, as the page follows it:
/// median ms of a few rounds, and the batches each took.
fn whole_short_search(client: &Client, q: &str) -> Result<(f64, usize)> {
    let (mut times, mut batches) = (Vec::new(), 0);
    for _ in 0..5 {
        let t0 = Instant::now();
        let (mut cursor, mut n) = (None::<String>, 0);
        loop {
            let mut path = format!("/api/v1/sandboxes?filter=all&limit=50&q={}", enc(q));
            if let Some(c) = &cursor {
                path.push_str(&format!("&cursor={}", enc(c)));
            }
            let page: serde_json::Value = serde_json::from_slice(&client.get(&path)?)?;
            n += 1;
            match page["next_cursor"].as_str() {
                Some(c) => cursor = Some(c.to_string()),
                None => break,
            }
        }
        times.push(t0.elapsed().as_secs_f64() * 1000.0);
        batches = n;
    }
    Ok((crate::median(&mut times), batches))
}

/// `s` percent-encoded for a query string.
pub fn enc(s: &str) -> String {
    s.bytes()
        .map(|b| if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) { (b as char).to_string() } else { format!("%{b:02X}") })
        .collect()
}

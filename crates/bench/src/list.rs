//! The sandbox list at scale: 100,000 sandboxes in the database, then the API time of the
//! Sessions page's first batch (Live and All), a deep batch, and searches, against the
//! time of `GET /api/v1/health` on the same server in the same run (the HTTP floor).

use std::time::Instant;

use anyhow::{Context, Result};
use drover_core::{SandboxId, SessionId};
use serde::Serialize;

use crate::drover::Up;
use crate::http::Client;

/// Requests per measured query (the median is reported).
const REPEATS: usize = 25;

/// Sandbox list figures (milliseconds are medians).
#[derive(Debug, Serialize)]
pub struct ListFigures {
    /// Sandboxes in the database.
    pub sandboxes: usize,
    /// `GET /api/v1/health`: the baseline.
    pub health_ms: f64,
    /// Each query: name, median ms, ratio to health.
    pub queries: Vec<(String, f64, f64)>,
}

/// Writes `n` sandboxes (each with one run; `live` of them running) straight into the
/// database of a running `drover up`.
async fn seed(db: &std::path::Path, n: usize, live: usize) -> Result<()> {
    use sqlx::Connection;
    let mut conn = sqlx::SqliteConnection::connect(&format!("sqlite://{}", db.display())).await?;
    let (ws, dev): (String, String) = sqlx::query_as("SELECT workspace_id, id FROM devices LIMIT 1").fetch_one(&mut conn).await?;
    let words = ["build", "refactor", "fix", "docs", "tests", "deploy", "migrate", "review"];
    let start = chrono::Utc::now() - chrono::Duration::days(100);
    let mut tx = conn.begin().await?;
    for i in 0..n {
        let (sbx, ses) = (SandboxId::new().to_string(), SessionId::new().to_string());
        let at = (start + chrono::Duration::seconds((i * 86) as i64)).format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string();
        let is_live = i >= n - live;
        let title =
            format!("{} {} #{i}{}", words[i % words.len()], words[(i / 7) % words.len()], if i % 10_000 == 77 { " zebra" } else { "" });
        let (state, outcome) = if is_live { ("active", "running") } else { ("stopped", ["released", "incomplete", "failed"][i % 3]) };
        sqlx::query(
            "INSERT INTO sandboxes (id, workspace_id, device_id, kind, title, cwd, state, created_at, updated_at, last_session_id, runs, live)
             VALUES (?, ?, ?, 'remote', ?, '/', ?, ?, ?, ?, 1, ?)",
        )
        .bind(&sbx)
        .bind(&ws)
        .bind(&dev)
        .bind(&title)
        .bind(state)
        .bind(&at)
        .bind(&at)
        .bind(&ses)
        .bind(is_live as i64)
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "INSERT INTO sessions (id, workspace_id, sandbox_id, device_id, command, cwd, cols, rows, outcome, created_by, created_at, started_at, ended_at)
             VALUES (?, ?, ?, ?, '[\"agent\"]', '/', 120, 40, ?, 'bench', ?, ?, ?)",
        )
        .bind(&ses)
        .bind(&ws)
        .bind(&sbx)
        .bind(&dev)
        .bind(outcome)
        .bind(&at)
        .bind(&at)
        .bind(if is_live { None } else { Some(&at) })
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await?;
    Ok(())
}

/// Seeds `n` sandboxes and times the list API.
pub fn run(exe: &std::path::Path, n: usize) -> Result<ListFigures> {
    let up = Up::start(exe)?;
    let db = up.home.path().join("drover.db");
    let t0 = Instant::now();
    tokio::runtime::Builder::new_current_thread().enable_all().build()?.block_on(seed(&db, n, 200))?;
    println!("  seeded {n} sandboxes in {:.1}s", t0.elapsed().as_secs_f64());
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
        ("search, rare word (All)", "/api/v1/sandboxes?filter=all&limit=50&q=zebra".to_string()),
        ("search, no match (All)", "/api/v1/sandboxes?filter=all&limit=50&q=nothing-matches-this".to_string()),
        ("running count (sidebar badge)", "/api/v1/overview".to_string()),
    ];
    let mut out = Vec::new();
    for (name, path) in queries {
        let ms = client.time(&path, REPEATS)?;
        out.push((name.to_string(), ms, ms / health));
    }
    println!("sandbox list ({n} sandboxes, median of {REPEATS} requests; goal < 50 ms): health {health:.2} ms");
    for (name, ms, ratio) in &out {
        println!("  {name:<32} {ms:7.2} ms  ({ratio:.1}× health)");
    }
    Ok(ListFigures { sandboxes: n, health_ms: health, queries: out })
}

fn enc(s: &str) -> String {
    s.bytes()
        .map(|b| if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) { (b as char).to_string() } else { format!("%{b:02X}") })
        .collect()
}

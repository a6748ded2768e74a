//! Spend caps and the workspace's spend: what a task's runs and the workspace's runs this
//! month cost (from the usage each run's device reported), and the caps to hold them to.

use drover_core::{SessionId, TaskId, WorkspaceId};
use sqlx::Row;

use crate::{now, parse_id, Engine, Result, Store};

/// What a run's task and workspace have spent against their caps (nano-dollars).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CapCheck {
    /// The task's cap and what its runs cost, when the run works a task with a cap.
    pub task: Option<(u64, u64)>,
    /// The workspace's monthly cap and what its runs cost this month, when it has one.
    pub workspace: Option<(u64, u64)>,
}

/// One row of the spend view: a key (agent, model or day) and what it cost.
#[derive(Debug, Clone, PartialEq)]
pub struct SpendRow {
    /// The agent's name, the model, or the day (`2026-11-30`).
    pub key: String,
    /// Nano-dollars (priced responses).
    pub cost: u64,
    /// Responses on models with no price.
    pub unpriced: u64,
    /// Model responses.
    pub turns: u64,
    /// Every token.
    pub tokens: u64,
    /// Runs.
    pub runs: u64,
}

/// The SQL sum, as a 64-bit integer, of `expr`.
fn sum(expr: &str) -> String {
    format!("CAST(SUM({expr}) AS BIGINT)")
}

/// The sum of every token of the usage report (or model share) in JSON column `col`.
fn token_sum(engine: Engine, col: &str) -> String {
    let kinds = ["input", "output", "cache_write_5m", "cache_write_1h", "cache_read"];
    sum(&kinds.map(|k| engine.json_number(col, &["tokens", k])).join(" + "))
}

/// The spend view's query over whole runs, grouped by the key expression `key`.
fn by_run(engine: Engine, key: &str, from: &str, order: &str) -> String {
    format!(
        "SELECT {key} AS k, {cost} AS cost, {unpriced} AS unpriced, {turns} AS turns, {tokens} AS tokens, COUNT(*) AS runs
         FROM {from} WHERE s.workspace_id = $1 AND s.created_at >= $2 AND s.usage IS NOT NULL GROUP BY {key} ORDER BY {order}",
        cost = sum("s.cost_generation + s.cost_cache_read"),
        unpriced = sum("s.cost_unpriced"),
        turns = sum(&engine.json_number("s.usage", &["turns"])),
        tokens = token_sum(engine, "s.usage"),
    )
}

/// The spend view's query over each run's per-model shares, grouped by model.
fn by_model(engine: Engine) -> String {
    let key = engine.json_text("m.value", &["model"]);
    format!(
        "SELECT {key} AS k, {cost} AS cost, {unpriced} AS unpriced, {turns} AS turns, {tokens} AS tokens, COUNT(*) AS runs
         FROM sessions s CROSS JOIN {models}
         WHERE s.workspace_id = $1 AND s.created_at >= $2 AND s.usage IS NOT NULL GROUP BY {key} ORDER BY tokens DESC",
        cost = sum(&format!(
            "{} + {}",
            engine.json_number("m.value", &["cost", "generation"]),
            engine.json_number("m.value", &["cost", "cache_read"])
        )),
        unpriced = sum(&engine.json_number("m.value", &["unpriced_turns"])),
        turns = sum(&engine.json_number("m.value", &["turns"])),
        tokens = token_sum(engine, "m.value"),
        models = engine.json_elements("s.usage", "models", "m"),
    )
}

/// The first instant of the month `at` (stored time format) falls in.
pub fn month_start(at: &str) -> String {
    format!("{}-01T00:00:00.000000Z", at.get(..7).unwrap_or("1970-01"))
}

fn cap(v: Option<i64>) -> Option<u64> {
    v.filter(|c| *c >= 0).map(|c| c as u64)
}

impl Store {
    /// Sets (or with None clears) a task's lifetime spend cap.
    pub async fn set_task_spend_cap(&self, task: TaskId, nano: Option<u64>) -> Result<()> {
        sqlx::query("UPDATE tasks SET spend_cap = $1 WHERE id = $2")
            .bind(nano.map(|n| n as i64))
            .bind(task.to_string())
            .execute(&self.writes)
            .await?;
        Ok(())
    }

    /// A task's spend cap.
    pub async fn task_spend_cap(&self, task: TaskId) -> Result<Option<u64>> {
        let row = sqlx::query("SELECT spend_cap FROM tasks WHERE id = $1").bind(task.to_string()).fetch_optional(&self.pool).await?;
        Ok(row.and_then(|r| cap(r.get("spend_cap"))))
    }

    /// Sets (or with None clears) the workspace's monthly spend cap.
    pub async fn set_workspace_spend_cap(&self, workspace: WorkspaceId, nano: Option<u64>) -> Result<()> {
        sqlx::query("UPDATE workspaces SET spend_cap = $1 WHERE id = $2")
            .bind(nano.map(|n| n as i64))
            .bind(workspace.to_string())
            .execute(&self.writes)
            .await?;
        Ok(())
    }

    /// The workspace's monthly spend cap.
    pub async fn workspace_spend_cap(&self, workspace: WorkspaceId) -> Result<Option<u64>> {
        let row =
            sqlx::query("SELECT spend_cap FROM workspaces WHERE id = $1").bind(workspace.to_string()).fetch_optional(&self.pool).await?;
        Ok(row.and_then(|r| cap(r.get("spend_cap"))))
    }

    /// What a task's runs cost (nano-dollars, priced responses).
    pub async fn task_spend(&self, task: TaskId) -> Result<u64> {
        let v: i64 = sqlx::query_scalar(
            "SELECT CAST(COALESCE(SUM(cost_generation + cost_cache_read), 0) AS BIGINT) FROM sessions WHERE task_id = $1",
        )
        .bind(task.to_string())
        .fetch_one(&self.pool)
        .await?;
        Ok(v.max(0) as u64)
    }

    /// What `session`'s task and workspace have spent against their caps (each sum only
    /// when there is a cap to hold it to).
    pub async fn cap_check(&self, session: SessionId) -> Result<CapCheck> {
        let row = sqlx::query(
            "SELECT s.task_id, s.workspace_id, t.spend_cap AS task_cap, w.spend_cap AS ws_cap
             FROM sessions s JOIN workspaces w ON w.id = s.workspace_id LEFT JOIN tasks t ON t.id = s.task_id WHERE s.id = $1",
        )
        .bind(session.to_string())
        .fetch_optional(&self.pool)
        .await?;
        let Some(r) = row else { return Ok(CapCheck { task: None, workspace: None }) };
        let task = match (cap(r.get("task_cap")), r.get::<Option<String>, _>("task_id")) {
            (Some(c), Some(task)) => Some((c, self.task_spend(parse_id(&task)?).await?)),
            _ => None,
        };
        let workspace = match cap(r.get("ws_cap")) {
            Some(c) => Some((c, self.month_spend(parse_id(r.get("workspace_id"))?).await?)),
            None => None,
        };
        Ok(CapCheck { task, workspace })
    }

    /// The workspace's own prices (model → price), which win over the shipped table.
    pub async fn workspace_prices(&self, workspace: WorkspaceId) -> Result<Vec<(String, drover_core::spend::Price)>> {
        let row = sqlx::query("SELECT prices FROM workspaces WHERE id = $1").bind(workspace.to_string()).fetch_optional(&self.pool).await?;
        let Some(json) = row.and_then(|r| r.get::<Option<String>, _>("prices")) else { return Ok(Vec::new()) };
        serde_json::from_str(&json).map_err(|e| crate::StoreError::Corrupt(format!("workspace prices: {e}")))
    }

    /// Replaces the workspace's own prices.
    pub async fn set_workspace_prices(&self, workspace: WorkspaceId, prices: &[(String, drover_core::spend::Price)]) -> Result<()> {
        let json = (!prices.is_empty()).then(|| serde_json::to_string(prices).expect("prices serialise"));
        sqlx::query("UPDATE workspaces SET prices = $1 WHERE id = $2").bind(json).bind(workspace.to_string()).execute(&self.writes).await?;
        Ok(())
    }

    /// What the workspace's runs cost this calendar month (nano-dollars, priced responses).
    pub async fn month_spend(&self, workspace: WorkspaceId) -> Result<u64> {
        let v: i64 = sqlx::query_scalar(
            "SELECT CAST(COALESCE(SUM(cost_generation + cost_cache_read), 0) AS BIGINT) FROM sessions WHERE workspace_id = $1 AND created_at >= $2",
        )
        .bind(workspace.to_string())
        .bind(month_start(&now()))
        .fetch_one(&self.pool)
        .await?;
        Ok(v.max(0) as u64)
    }

    /// Asks for a run to be stopped for `reason` (not by a person): it ends `released`
    /// with that reason.
    pub async fn mark_stop_for(&self, id: SessionId, by: &str, reason: &str) -> Result<bool> {
        let n = sqlx::query("UPDATE sessions SET stop_requested_by = $1, stop_reason = $2 WHERE id = $3 AND stop_requested_by IS NULL")
            .bind(by)
            .bind(reason)
            .bind(id.to_string())
            .execute(&self.writes)
            .await?
            .rows_affected();
        Ok(n == 1)
    }

    /// The workspace's spend since `since` (stored time), by `by`: `agent`, `model` or `day`.
    pub async fn spend_by(&self, workspace: WorkspaceId, since: &str, by: SpendKey) -> Result<Vec<SpendRow>> {
        let sql = match by {
            SpendKey::Agent => {
                by_run(self.engine, "COALESCE(a.name, '(no agent)')", "sessions s LEFT JOIN agents a ON a.id = s.agent_id", "cost DESC")
            }
            SpendKey::Day => by_run(self.engine, "substr(s.created_at, 1, 10)", "sessions s", "k"),
            // Each run's report splits its spend by model.
            SpendKey::Model => by_model(self.engine),
        };
        let rows = sqlx::query(&sql).bind(workspace.to_string()).bind(since).fetch_all(&self.pool).await?;
        Ok(rows
            .iter()
            .map(|r| {
                let n = |k: &str| r.get::<Option<i64>, _>(k).unwrap_or(0).max(0) as u64;
                SpendRow {
                    key: r.get("k"),
                    cost: n("cost"),
                    unpriced: n("unpriced"),
                    turns: n("turns"),
                    tokens: n("tokens"),
                    runs: n("runs"),
                }
            })
            .collect())
    }
}

/// How the spend view groups.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpendKey {
    /// By the agent that ran.
    Agent,
    /// By model.
    Model,
    /// By UTC day the run started.
    Day,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn months_start_on_the_first() {
        assert_eq!(month_start("2026-11-30T13:00:00.000000Z"), "2026-11-01T00:00:00.000000Z");
        assert!(month_start("2026-11-30T13:00:00.000000Z").as_str() <= "2026-11-01T00:00:00.000001Z");
    }
}

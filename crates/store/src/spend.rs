//! Spend caps and the workspace's spend: what a task's runs and the workspace's runs this
//! month cost (from the usage each run's device reported), and the caps to hold them to.

use drover_core::{SessionId, TaskId, WorkspaceId};
use sqlx::Row;

use crate::{now, Result, Store};

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
        sqlx::query("UPDATE tasks SET spend_cap = ? WHERE id = ?")
            .bind(nano.map(|n| n as i64))
            .bind(task.to_string())
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// A task's spend cap.
    pub async fn task_spend_cap(&self, task: TaskId) -> Result<Option<u64>> {
        let row = sqlx::query("SELECT spend_cap FROM tasks WHERE id = ?").bind(task.to_string()).fetch_optional(&self.pool).await?;
        Ok(row.and_then(|r| cap(r.get("spend_cap"))))
    }

    /// Sets (or with None clears) the workspace's monthly spend cap.
    pub async fn set_workspace_spend_cap(&self, workspace: WorkspaceId, nano: Option<u64>) -> Result<()> {
        sqlx::query("UPDATE workspaces SET spend_cap = ? WHERE id = ?")
            .bind(nano.map(|n| n as i64))
            .bind(workspace.to_string())
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// The workspace's monthly spend cap.
    pub async fn workspace_spend_cap(&self, workspace: WorkspaceId) -> Result<Option<u64>> {
        let row =
            sqlx::query("SELECT spend_cap FROM workspaces WHERE id = ?").bind(workspace.to_string()).fetch_optional(&self.pool).await?;
        Ok(row.and_then(|r| cap(r.get("spend_cap"))))
    }

    /// What a task's runs cost (nano-dollars, priced responses).
    pub async fn task_spend(&self, task: TaskId) -> Result<u64> {
        let v: i64 = sqlx::query_scalar("SELECT COALESCE(SUM(cost_generation + cost_cache_read), 0) FROM sessions WHERE task_id = ?")
            .bind(task.to_string())
            .fetch_one(&self.pool)
            .await?;
        Ok(v.max(0) as u64)
    }

    /// What `session`'s task and workspace have spent against their caps (the sums only
    /// when there is a cap to hold them to).
    pub async fn cap_check(&self, session: SessionId) -> Result<CapCheck> {
        let caps = sqlx::query("SELECT t.spend_cap AS task_cap, w.spend_cap AS ws_cap FROM sessions s JOIN workspaces w ON w.id = s.workspace_id LEFT JOIN tasks t ON t.id = s.task_id WHERE s.id = ?")
            .bind(session.to_string())
            .fetch_optional(&self.pool)
            .await?;
        if caps.as_ref().is_none_or(|r| r.get::<Option<i64>, _>("task_cap").is_none() && r.get::<Option<i64>, _>("ws_cap").is_none()) {
            return Ok(CapCheck { task: None, workspace: None });
        }
        let month = month_start(&now());
        let row = sqlx::query(
            "SELECT t.spend_cap AS task_cap, w.spend_cap AS ws_cap,
                    (SELECT COALESCE(SUM(x.cost_generation + x.cost_cache_read), 0) FROM sessions x WHERE x.task_id = s.task_id) AS task_spent,
                    (SELECT COALESCE(SUM(x.cost_generation + x.cost_cache_read), 0) FROM sessions x
                       WHERE x.workspace_id = s.workspace_id AND x.created_at >= ?) AS ws_spent
             FROM sessions s JOIN workspaces w ON w.id = s.workspace_id LEFT JOIN tasks t ON t.id = s.task_id WHERE s.id = ?",
        )
        .bind(&month)
        .bind(session.to_string())
        .fetch_optional(&self.pool)
        .await?;
        let Some(r) = row else { return Ok(CapCheck { task: None, workspace: None }) };
        let spent = |k: &str| r.get::<i64, _>(k).max(0) as u64;
        Ok(CapCheck {
            task: cap(r.get("task_cap")).map(|c| (c, spent("task_spent"))),
            workspace: cap(r.get("ws_cap")).map(|c| (c, spent("ws_spent"))),
        })
    }

    /// The workspace's own prices (model → price), which win over the shipped table.
    pub async fn workspace_prices(&self, workspace: WorkspaceId) -> Result<Vec<(String, drover_core::spend::Price)>> {
        let row = sqlx::query("SELECT prices FROM workspaces WHERE id = ?").bind(workspace.to_string()).fetch_optional(&self.pool).await?;
        let Some(json) = row.and_then(|r| r.get::<Option<String>, _>("prices")) else { return Ok(Vec::new()) };
        serde_json::from_str(&json).map_err(|e| crate::StoreError::Corrupt(format!("workspace prices: {e}")))
    }

    /// Replaces the workspace's own prices.
    pub async fn set_workspace_prices(&self, workspace: WorkspaceId, prices: &[(String, drover_core::spend::Price)]) -> Result<()> {
        let json = (!prices.is_empty()).then(|| serde_json::to_string(prices).expect("prices serialise"));
        sqlx::query("UPDATE workspaces SET prices = ? WHERE id = ?").bind(json).bind(workspace.to_string()).execute(&self.pool).await?;
        Ok(())
    }

    /// What the workspace's runs cost this calendar month (nano-dollars, priced responses).
    pub async fn month_spend(&self, workspace: WorkspaceId) -> Result<u64> {
        let v: i64 = sqlx::query_scalar(
            "SELECT COALESCE(SUM(cost_generation + cost_cache_read), 0) FROM sessions WHERE workspace_id = ? AND created_at >= ?",
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
        let n = sqlx::query("UPDATE sessions SET stop_requested_by = ?, stop_reason = ? WHERE id = ? AND stop_requested_by IS NULL")
            .bind(by)
            .bind(reason)
            .bind(id.to_string())
            .execute(&self.pool)
            .await?
            .rows_affected();
        Ok(n == 1)
    }

    /// The workspace's spend since `since` (stored time), by `by`: `agent`, `model` or `day`.
    pub async fn spend_by(&self, workspace: WorkspaceId, since: &str, by: SpendKey) -> Result<Vec<SpendRow>> {
        let sql = match by {
            SpendKey::Agent => {
                "SELECT COALESCE(a.name, '(no agent)') AS k, SUM(s.cost_generation + s.cost_cache_read) AS cost, SUM(s.cost_unpriced) AS unpriced,
                        SUM(json_extract(s.usage, '$.turns')) AS turns,
                        SUM(json_extract(s.usage, '$.tokens.input') + json_extract(s.usage, '$.tokens.output') + json_extract(s.usage, '$.tokens.cache_write_5m')
                            + json_extract(s.usage, '$.tokens.cache_write_1h') + json_extract(s.usage, '$.tokens.cache_read')) AS tokens, COUNT(*) AS runs
                 FROM sessions s LEFT JOIN agents a ON a.id = s.agent_id
                 WHERE s.workspace_id = ? AND s.created_at >= ? AND s.usage IS NOT NULL GROUP BY k ORDER BY cost DESC"
            }
            SpendKey::Day => {
                "SELECT substr(s.created_at, 1, 10) AS k, SUM(s.cost_generation + s.cost_cache_read) AS cost, SUM(s.cost_unpriced) AS unpriced,
                        SUM(json_extract(s.usage, '$.turns')) AS turns,
                        SUM(json_extract(s.usage, '$.tokens.input') + json_extract(s.usage, '$.tokens.output') + json_extract(s.usage, '$.tokens.cache_write_5m')
                            + json_extract(s.usage, '$.tokens.cache_write_1h') + json_extract(s.usage, '$.tokens.cache_read')) AS tokens, COUNT(*) AS runs
                 FROM sessions s WHERE s.workspace_id = ? AND s.created_at >= ? AND s.usage IS NOT NULL GROUP BY k ORDER BY k"
            }
            SpendKey::Model => {
                // Each run's report splits its spend by model.
                "SELECT json_extract(m.value, '$.model') AS k,
                        SUM(json_extract(m.value, '$.cost.generation') + json_extract(m.value, '$.cost.cache_read')) AS cost,
                        SUM(json_extract(m.value, '$.unpriced_turns')) AS unpriced,
                        SUM(json_extract(m.value, '$.turns')) AS turns,
                        SUM(json_extract(m.value, '$.tokens.input') + json_extract(m.value, '$.tokens.output') + json_extract(m.value, '$.tokens.cache_write_5m')
                            + json_extract(m.value, '$.tokens.cache_write_1h') + json_extract(m.value, '$.tokens.cache_read')) AS tokens, COUNT(*) AS runs
                 FROM sessions s, json_each(s.usage, '$.models') m
                 WHERE s.workspace_id = ? AND s.created_at >= ? AND s.usage IS NOT NULL GROUP BY k ORDER BY tokens DESC"
            }
        };
        let rows = sqlx::query(sql).bind(workspace.to_string()).bind(since).fetch_all(&self.pool).await?;
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

//! Agents: registered, by name, with their operator, harness and execution route.

use drover_core::{AgentId, MemberId, WorkspaceId};
use sqlx::Row;

use crate::{now, parse_id, Result, Store, StoreError};

/// A registered agent.
#[derive(Debug, Clone)]
pub struct AgentRow {
    /// Its id: what a task run's session names.
    pub id: AgentId,
    /// Its name, unique in the workspace: what a stage is pinned to.
    pub name: String,
    /// The member who created it and answers for its runs.
    pub operator: MemberId,
    /// Its operator's name, for display.
    pub operator_name: String,
    /// Its harness (`claude`, …).
    pub harness: String,
    /// The model, provider, account and effort its runs start on.
    pub route: drover_core::harness::Route,
    /// The command its runs start (a custom harness's template).
    pub template: Vec<String>,
}

fn agent_row(r: &sqlx::any::AnyRow) -> Result<AgentRow> {
    let template: String = r.get("template");
    Ok(AgentRow {
        id: parse_id(r.get("id"))?,
        name: r.get("name"),
        operator: parse_id(r.get("operator_id"))?,
        operator_name: r.get("operator_name"),
        harness: r.get("harness"),
        route: drover_core::harness::Route {
            model: r.get("model"),
            provider: r.get("provider"),
            account: r.get("account"),
            effort: r.get("effort"),
        },
        template: serde_json::from_str(&template).map_err(|e| StoreError::Corrupt(e.to_string()))?,
    })
}

impl Store {
    /// Registers an agent.
    pub async fn create_agent(
        &self,
        workspace: WorkspaceId,
        name: &str,
        operator: MemberId,
        harness: &str,
        route: &drover_core::harness::Route,
        template: &[String],
    ) -> Result<Option<AgentId>> {
        let id = AgentId::new();
        let done = sqlx::query(
            "INSERT INTO agents (id, workspace_id, name, operator_id, harness, provider, account, model, effort, template, created_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) ON CONFLICT (workspace_id, name) DO NOTHING",
        )
        .bind(id.to_string())
        .bind(workspace.to_string())
        .bind(name)
        .bind(operator.to_string())
        .bind(harness)
        .bind(&route.provider)
        .bind(&route.account)
        .bind(&route.model)
        .bind(&route.effort)
        .bind(serde_json::to_string(template).expect("strings serialise"))
        .bind(now())
        .execute(&self.writes)
        .await?;
        Ok((done.rows_affected() == 1).then_some(id))
    }

    /// An agent by name.
    pub async fn agent_by_name(&self, workspace: WorkspaceId, name: &str) -> Result<Option<AgentRow>> {
        let r = sqlx::query(
            "SELECT a.*, m.name AS operator_name FROM agents a JOIN members m ON m.id = a.operator_id WHERE a.workspace_id = $1 AND a.name = $2",
        )
        .bind(workspace.to_string())
        .bind(name)
        .fetch_optional(&self.pool)
        .await?;
        r.as_ref().map(agent_row).transpose()
    }

    /// The workspace's agents.
    pub async fn list_agents(&self, workspace: WorkspaceId) -> Result<Vec<AgentRow>> {
        let rows = sqlx::query(
            "SELECT a.*, m.name AS operator_name FROM agents a JOIN members m ON m.id = a.operator_id WHERE a.workspace_id = $1 ORDER BY a.name",
        )
        .bind(workspace.to_string())
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(agent_row).collect()
    }
}

//! What an agent's and a repository's pages read: their runs (live ones first), their
//! tasks and what their runs cost.

use drover_core::{AgentId, RepoId, TaskId, WorkspaceId};
use sqlx::Row;

use crate::sandboxes::cost_sum;
use crate::sessions::{session_row, SESSION_SELECT};
use crate::tasks::{task_row, TASK_SELECT};
use crate::{parse_id, AgentRow, Result, SessionRow, Store, TaskRow};

/// Live runs first, then newest first.
const LIVE_THEN_NEWEST: &str =
    concat!("ORDER BY CASE WHEN s.outcome IN ", live_outcomes!(), " THEN 0 ELSE 1 END, s.created_at DESC, s.id DESC");

/// The sessions that work in a repository: those of the sandboxes made in it.
const IN_REPO: &str = "SELECT id FROM sandboxes WHERE repo_id = $1";

/// `text` for a SQL `LIKE … ESCAPE '\'` pattern: its wildcards matched literally.
fn like_literal(text: &str) -> String {
    text.replace('\\', "\\\\").replace('%', "\\%").replace('_', "\\_")
}

impl Store {
    /// An agent's runs: live ones first, then newest first; at most `limit`.
    pub async fn agent_sessions(&self, agent: AgentId, limit: i64) -> Result<Vec<SessionRow>> {
        let rows = sqlx::query(&format!("{SESSION_SELECT} WHERE s.agent_id = $1 {LIVE_THEN_NEWEST} LIMIT $2"))
            .bind(agent.to_string())
            .bind(limit)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(session_row).collect()
    }

    /// A repository's runs (those of sandboxes made in it): live ones first, then newest
    /// first; at most `limit`.
    pub async fn repo_sessions(&self, repo: RepoId, limit: i64) -> Result<Vec<SessionRow>> {
        let rows = sqlx::query(&format!("{SESSION_SELECT} WHERE s.sandbox_id IN ({IN_REPO}) {LIVE_THEN_NEWEST} LIMIT $2"))
            .bind(repo.to_string())
            .bind(limit)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(session_row).collect()
    }

    /// The tasks an agent is pinned to a stage of or has run, newest first; at most `limit`.
    pub async fn agent_tasks(&self, workspace: WorkspaceId, agent: &AgentRow, limit: i64) -> Result<Vec<TaskRow>> {
        let ran: Vec<TaskId> = sqlx::query("SELECT DISTINCT task_id FROM sessions WHERE agent_id = $1 AND task_id IS NOT NULL")
            .bind(agent.id.to_string())
            .fetch_all(&self.pool)
            .await?
            .iter()
            .map(|r| parse_id(r.get("task_id")))
            .collect::<Result<_>>()?;
        // The stages are stored as JSON: a cheap match here, the exact one below.
        let pinned = format!("%\"assignee\":\"{}\"%", like_literal(&agent.name));
        let rows = sqlx::query(&format!(
            "{TASK_SELECT} WHERE t.workspace_id = $1
             AND (t.id IN (SELECT task_id FROM sessions WHERE agent_id = $2) OR t.workflow LIKE $3 ESCAPE '\\')
             ORDER BY t.created_at DESC, t.id DESC LIMIT $4"
        ))
        .bind(workspace.to_string())
        .bind(agent.id.to_string())
        .bind(pinned)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        let tasks: Vec<TaskRow> = rows.iter().map(task_row).collect::<Result<_>>()?;
        Ok(tasks.into_iter().filter(|t| ran.contains(&t.id) || t.workflow.iter().any(|s| s.agent() == Some(agent.name.as_str()))).collect())
    }

    /// A repository's tasks, newest first; at most `limit`.
    pub async fn repo_tasks(&self, repo: RepoId, limit: i64) -> Result<Vec<TaskRow>> {
        let rows = sqlx::query(&format!("{TASK_SELECT} WHERE t.repo_id = $1 ORDER BY t.created_at DESC, t.id DESC LIMIT $2"))
            .bind(repo.to_string())
            .bind(limit)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(task_row).collect()
    }

    /// What all of an agent's runs cost (nano-dollars): None without usage, Some(None)
    /// when a run used a model with no price.
    pub async fn agent_spend(&self, agent: AgentId) -> Result<Option<Option<u64>>> {
        let text: Option<String> =
            sqlx::query_scalar(concat!("SELECT ", cost_text!("x.agent_id = $1"))).bind(agent.to_string()).fetch_one(&self.pool).await?;
        Ok(cost_sum(text))
    }

    /// What all of a repository's runs cost (nano-dollars): None without usage,
    /// Some(None) when a run used a model with no price.
    pub async fn repo_spend(&self, repo: RepoId) -> Result<Option<Option<u64>>> {
        let text: Option<String> =
            sqlx::query_scalar(concat!("SELECT ", cost_text!("x.sandbox_id IN (SELECT id FROM sandboxes WHERE repo_id = $1)")))
                .bind(repo.to_string())
                .fetch_one(&self.pool)
                .await?;
        Ok(cost_sum(text))
    }
}

#[cfg(test)]
mod tests {
    use super::like_literal;

    #[test]
    fn like_wildcards_are_matched_literally() {
        assert_eq!(like_literal("my_bot"), "my\\_bot");
        assert_eq!(like_literal("a%b\\c"), "a\\%b\\\\c");
    }
}

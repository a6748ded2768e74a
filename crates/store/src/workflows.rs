//! A workspace's default workflow: the stages new tasks are filed with.

use drover_core::WorkspaceId;

use crate::{Result, StageSpec, Store, StoreError};

impl Store {
    /// The workspace's default workflow, if one was set.
    pub async fn workspace_workflow(&self, workspace: WorkspaceId) -> Result<Option<Vec<StageSpec>>> {
        let w: Option<String> = sqlx::query_scalar("SELECT workflow FROM workspaces WHERE id = $1")
            .bind(workspace.to_string())
            .fetch_optional(&self.pool)
            .await?
            .flatten();
        w.map(|w| serde_json::from_str(&w).map_err(|e| StoreError::Corrupt(e.to_string()))).transpose()
    }

    /// Sets the workspace's default workflow (for tasks filed from now on).
    pub async fn set_workspace_workflow(&self, workspace: WorkspaceId, stages: &[StageSpec]) -> Result<()> {
        sqlx::query("UPDATE workspaces SET workflow = $1 WHERE id = $2")
            .bind(serde_json::to_string(stages).expect("serialises"))
            .bind(workspace.to_string())
            .execute(&self.writes)
            .await?;
        Ok(())
    }
}

//! The workspace's skills, and which of them reached each run.

use drover_core::activity::EventKind;
use drover_core::{SessionId, WorkspaceId};
use sqlx::Row;

use crate::events::insert;
use crate::{now, NewEvent, Result, Store, StoreError};

/// A skill as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillRow {
    /// Its name (its folder's name in a sandbox).
    pub name: String,
    /// Its files, as (path relative to its folder, content).
    pub files: Vec<(String, String)>,
    /// Who added or last changed it.
    pub created_by: String,
    /// When it was added or last changed (stored format).
    pub updated_at: String,
}

impl Store {
    /// The workspace's skills, by name.
    pub async fn skills(&self, workspace: WorkspaceId) -> Result<Vec<SkillRow>> {
        let rows = sqlx::query("SELECT * FROM skills WHERE workspace_id = $1 ORDER BY name")
            .bind(workspace.to_string())
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|r| {
                let files: String = r.get("files");
                Ok(SkillRow {
                    name: r.get("name"),
                    files: serde_json::from_str(&files).map_err(|e| StoreError::Corrupt(format!("skill files: {e}")))?,
                    created_by: r.get("created_by"),
                    updated_at: r.get("updated_at"),
                })
            })
            .collect()
    }

    /// Adds or replaces a skill ("skill changed").
    pub async fn put_skill(&self, workspace: WorkspaceId, name: &str, files: &[(String, String)], by: &str) -> Result<()> {
        let mut tx = self.write().await?;
        sqlx::query(
            "INSERT INTO skills (workspace_id, name, files, created_by, updated_at) VALUES ($1, $2, $3, $4, $5)
             ON CONFLICT (workspace_id, name) DO UPDATE SET files = excluded.files, created_by = excluded.created_by, updated_at = excluded.updated_at",
        )
        .bind(workspace.to_string())
        .bind(name)
        .bind(serde_json::to_string(files).expect("strings serialise"))
        .bind(by)
        .bind(now())
        .execute(&mut *tx)
        .await?;
        let detail = serde_json::json!({ "skill": name, "files": files.len(), "change": "put" });
        insert(&mut tx, &NewEvent { workspace, session: None, task: None, kind: EventKind::SkillChanged, actor: by.into(), detail })
            .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Removes a skill ("skill changed"); false if there was none.
    pub async fn remove_skill(&self, workspace: WorkspaceId, name: &str, by: &str) -> Result<bool> {
        let mut tx = self.write().await?;
        let n = sqlx::query("DELETE FROM skills WHERE workspace_id = $1 AND name = $2")
            .bind(workspace.to_string())
            .bind(name)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        if n == 1 {
            let detail = serde_json::json!({ "skill": name, "change": "removed" });
            insert(&mut tx, &NewEvent { workspace, session: None, task: None, kind: EventKind::SkillChanged, actor: by.into(), detail })
                .await?;
        }
        tx.commit().await?;
        Ok(n == 1)
    }

    /// Stores which skills reached a run (JSON, as its device reported).
    pub async fn set_session_skills(&self, session: SessionId, report: &str) -> Result<()> {
        sqlx::query("UPDATE sessions SET skills = $1 WHERE id = $2").bind(report).bind(session.to_string()).execute(&self.writes).await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::testing::store;

    #[tokio::test]
    async fn skills_are_put_replaced_and_removed_on_the_record() {
        let (s, _d) = store().await;
        let (ws, _) = s.bootstrap("default", "alice").await.unwrap();
        s.put_skill(ws, "review", &[("SKILL.md".into(), "v1".into())], "alice").await.unwrap();
        s.put_skill(ws, "review", &[("SKILL.md".into(), "v2".into())], "alice").await.unwrap();
        let list = s.skills(ws).await.unwrap();
        assert_eq!((list.len(), list[0].files[0].1.as_str()), (1, "v2"));
        assert!(s.remove_skill(ws, "review", "alice").await.unwrap());
        assert!(!s.remove_skill(ws, "review", "alice").await.unwrap());
        let kinds: Vec<_> = s.list_events(ws, None, 0, 100).await.unwrap().into_iter().map(|e| e.kind).collect();
        assert_eq!(kinds.iter().filter(|k| k.as_str() == "skill_changed").count(), 3);
    }
}

//! Repositories, and which devices have them cloned where.

use drover_core::{DeviceId, RepoId, WorkspaceId};
use sqlx::Row;

use crate::{now, parse_id, Result, Store};

/// A repository with the devices that have it: (device name, clone path).
#[derive(Debug, Clone)]
pub struct RepoRow {
    /// Its id: what tasks and device clones name.
    pub id: RepoId,
    /// Its name.
    pub name: String,
    /// Devices that have it, with the path of their clone.
    pub devices: Vec<(String, String)>,
    /// The branch its tasks start from and merge into.
    pub base: Option<String>,
}

impl Store {
    /// Registers a repository (or returns the one with that name); a `base` given sets
    /// the branch its tasks start from and merge into.
    pub async fn add_repo(&self, workspace: WorkspaceId, name: &str, base: Option<&str>) -> Result<RepoId> {
        let mut tx = self.write().await?;
        let id = match sqlx::query("SELECT id FROM repos WHERE workspace_id = $1 AND name = $2")
            .bind(workspace.to_string())
            .bind(name)
            .fetch_optional(&mut *tx)
            .await?
        {
            Some(r) => parse_id(r.get("id"))?,
            None => {
                let id = RepoId::new();
                sqlx::query("INSERT INTO repos (id, workspace_id, name, created_at) VALUES ($1, $2, $3, $4)")
                    .bind(id.to_string())
                    .bind(workspace.to_string())
                    .bind(name)
                    .bind(now())
                    .execute(&mut *tx)
                    .await?;
                id
            }
        };
        if let Some(base) = base {
            sqlx::query("UPDATE repos SET base_branch = $1 WHERE id = $2").bind(base).bind(id.to_string()).execute(&mut *tx).await?;
        }
        tx.commit().await?;
        Ok(id)
    }

    /// A repository by name.
    pub async fn repo_by_name(&self, workspace: WorkspaceId, name: &str) -> Result<Option<RepoId>> {
        let r = sqlx::query("SELECT id FROM repos WHERE workspace_id = $1 AND name = $2")
            .bind(workspace.to_string())
            .bind(name)
            .fetch_optional(&self.pool)
            .await?;
        r.map(|r| parse_id(r.get("id"))).transpose()
    }

    /// Repositories with the devices that have them: (id, name, [(device name, path)]).
    pub async fn list_repos(&self, workspace: WorkspaceId) -> Result<Vec<RepoRow>> {
        let rows = sqlx::query(
            "SELECT r.id, r.name, r.base_branch, d.name AS device, dr.path FROM repos r
             LEFT JOIN device_repos dr ON dr.repo_id = r.id LEFT JOIN devices d ON d.id = dr.device_id
             WHERE r.workspace_id = $1 ORDER BY r.name, d.name",
        )
        .bind(workspace.to_string())
        .fetch_all(&self.pool)
        .await?;
        let mut out: Vec<RepoRow> = Vec::new();
        for r in rows {
            let id: RepoId = parse_id(r.get("id"))?;
            if out.last().map(|l| l.id) != Some(id) {
                out.push(RepoRow { id, name: r.get("name"), devices: Vec::new(), base: r.get("base_branch") });
            }
            if let (Some(d), Some(p)) = (r.get::<Option<String>, _>("device"), r.get::<Option<String>, _>("path")) {
                out.last_mut().expect("pushed").devices.push((d, p));
            }
        }
        Ok(out)
    }

    /// Declares that `device` has `repo` cloned at `path`.
    pub async fn set_device_repo(&self, device: DeviceId, repo: RepoId, path: &str) -> Result<()> {
        sqlx::query("INSERT INTO device_repos (device_id, repo_id, path) VALUES ($1, $2, $3) ON CONFLICT (device_id, repo_id) DO UPDATE SET path = excluded.path")
            .bind(device.to_string())
            .bind(repo.to_string())
            .bind(path)
            .execute(&self.writes)
            .await?;
        Ok(())
    }

    /// Where `device` has `repo`, if it has it.
    pub async fn device_repo_path(&self, device: DeviceId, repo: RepoId) -> Result<Option<String>> {
        let r = sqlx::query("SELECT path FROM device_repos WHERE device_id = $1 AND repo_id = $2")
            .bind(device.to_string())
            .bind(repo.to_string())
            .fetch_optional(&self.pool)
            .await?;
        Ok(r.map(|r| r.get("path")))
    }
}

//! Devices: registration, slots and last contact.

use drover_core::{DeviceId, WorkspaceId};
use sqlx::Row;

use crate::{now, parse_id, Result, Store};

/// A device as stored, with its live session count.
#[derive(Debug, Clone)]
pub struct DeviceRow {
    /// Its id, as the API names it.
    pub id: DeviceId,
    /// Its name, unique in the workspace: how people and the CLI name it.
    pub name: String,
    /// Sessions it may run at once.
    pub slots: u32,
    /// When it last reported in.
    pub last_contact_at: Option<String>,
    /// Sessions starting or running on it.
    pub live_sessions: u32,
    /// When an admin revoked its credential, if one did (until it is added again).
    pub revoked_at: Option<String>,
    /// What it does with its runs (`drover_core::confinement::Offer` as JSON), as its
    /// last hello said; None for a device that never said.
    pub sandbox: Option<String>,
}

fn device_row(row: &sqlx::any::AnyRow) -> Result<DeviceRow> {
    Ok(DeviceRow {
        id: parse_id(row.get("id"))?,
        name: row.get("name"),
        slots: row.get::<i64, _>("slots") as u32,
        last_contact_at: row.get("last_contact_at"),
        live_sessions: row.get::<i64, _>("live") as u32,
        revoked_at: row.get("revoked_at"),
        sandbox: row.get("sandbox"),
    })
}

const DEVICE_SELECT: &str = concat!(
    "SELECT d.id, d.name, d.slots, d.last_contact_at, d.revoked_at, d.sandbox,
    (SELECT COUNT(*) FROM sessions s WHERE s.device_id = d.id AND s.outcome IN ",
    live_outcomes!(),
    ") AS live
    FROM devices d"
);

impl Store {
    /// Registers the device `name` (or updates its slots) and returns it.
    pub async fn upsert_device(&self, workspace: WorkspaceId, name: &str, slots: u32) -> Result<DeviceRow> {
        sqlx::query(
            "INSERT INTO devices (id, workspace_id, name, slots, created_at) VALUES ($1, $2, $3, $4, $5)
             ON CONFLICT (workspace_id, name) DO UPDATE SET slots = excluded.slots",
        )
        .bind(DeviceId::new().to_string())
        .bind(workspace.to_string())
        .bind(name)
        .bind(slots as i64)
        .bind(now())
        .execute(&self.writes)
        .await?;
        self.device_by_name(workspace, name).await.map(|d| d.expect("device just written"))
    }

    /// Records what a device does with its runs (its hello's sandbox offer, as JSON).
    pub async fn set_device_sandbox(&self, device: DeviceId, sandbox: Option<&str>) -> Result<()> {
        sqlx::query("UPDATE devices SET sandbox = $1 WHERE id = $2").bind(sandbox).bind(device.to_string()).execute(&self.writes).await?;
        Ok(())
    }

    /// The device called `name`.
    pub async fn device_by_name(&self, workspace: WorkspaceId, name: &str) -> Result<Option<DeviceRow>> {
        let row = sqlx::query(&format!("{DEVICE_SELECT} WHERE d.workspace_id = $1 AND d.name = $2"))
            .bind(workspace.to_string())
            .bind(name)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(device_row).transpose()
    }

    /// Revokes the device's credentials and marks it revoked (its daemon is refused, its
    /// live sessions flagged); returns whether it was not revoked already.
    pub async fn revoke_device(&self, id: DeviceId) -> Result<bool> {
        let mut tx = self.write().await?;
        let at = now();
        sqlx::query("UPDATE tokens SET revoked_at = $1 WHERE device_id = $2 AND revoked_at IS NULL")
            .bind(&at)
            .bind(id.to_string())
            .execute(&mut *tx)
            .await?;
        // Enrollment tokens not yet used die with the device's credential.
        sqlx::query("UPDATE enrollments SET used_at = $1 WHERE device_id = $2 AND used_at IS NULL")
            .bind(&at)
            .bind(id.to_string())
            .execute(&mut *tx)
            .await?;
        let n = sqlx::query("UPDATE devices SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL")
            .bind(&at)
            .bind(id.to_string())
            .execute(&mut *tx)
            .await?
            .rows_affected();
        tx.commit().await?;
        Ok(n == 1)
    }

    /// Clears a device's revocation (it is being added again with a new credential).
    pub async fn unrevoke_device(&self, id: DeviceId) -> Result<()> {
        sqlx::query("UPDATE devices SET revoked_at = NULL WHERE id = $1").bind(id.to_string()).execute(&self.writes).await?;
        Ok(())
    }

    /// Stores a one-time enrollment token (by its digest) for `device`, good for `ttl`;
    /// any earlier unused one for the device stops working.
    pub async fn create_enrollment(&self, device: DeviceId, digest: &str, by: &str, ttl: chrono::Duration) -> Result<String> {
        let at = chrono::Utc::now();
        let expires_at = crate::format_time(at + ttl);
        let mut tx = self.write().await?;
        sqlx::query("UPDATE enrollments SET used_at = $1 WHERE device_id = $2 AND used_at IS NULL")
            .bind(crate::format_time(at))
            .bind(device.to_string())
            .execute(&mut *tx)
            .await?;
        sqlx::query("INSERT INTO enrollments (hash, device_id, created_by, created_at, expires_at) VALUES ($1, $2, $3, $4, $5)")
            .bind(digest)
            .bind(device.to_string())
            .bind(by)
            .bind(crate::format_time(at))
            .bind(&expires_at)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(expires_at)
    }

    /// Uses an enrollment token for the device named `name`: if it is unused, unexpired
    /// and for that device, marks it used, revokes the device's older credentials and
    /// stores the new one (`credential_digest`), all at once, recorded as "device
    /// enrolled". Returns the device, or None.
    pub async fn enroll_device(&self, digest: &str, name: &str, credential_digest: &str) -> Result<Option<DeviceId>> {
        let mut tx = self.write().await?;
        let at = now();
        let row = sqlx::query(
            "UPDATE enrollments SET used_at = $1 WHERE hash = $2 AND used_at IS NULL AND expires_at > $1
               AND device_id = (SELECT id FROM devices WHERE id = enrollments.device_id AND name = $3 AND revoked_at IS NULL)
             RETURNING device_id",
        )
        .bind(&at)
        .bind(digest)
        .bind(name)
        .fetch_optional(&mut *tx)
        .await?;
        let Some(row) = row else { return Ok(None) };
        let device: DeviceId = crate::parse_id(row.get("device_id"))?;
        sqlx::query("UPDATE tokens SET revoked_at = $1 WHERE device_id = $2 AND revoked_at IS NULL")
            .bind(&at)
            .bind(device.to_string())
            .execute(&mut *tx)
            .await?;
        sqlx::query(
            "INSERT INTO tokens (id, workspace_id, kind, device_id, hash, label, created_at)
             SELECT $1, workspace_id, 'device', id, $2, 'enrolled', $3 FROM devices WHERE id = $4",
        )
        .bind(drover_core::TokenId::new().to_string())
        .bind(credential_digest)
        .bind(&at)
        .bind(device.to_string())
        .execute(&mut *tx)
        .await?;
        let ws: String =
            sqlx::query_scalar("SELECT workspace_id FROM devices WHERE id = $1").bind(device.to_string()).fetch_one(&mut *tx).await?;
        let e = crate::NewEvent {
            workspace: parse_id(&ws)?,
            session: None,
            task: None,
            kind: drover_core::activity::EventKind::DeviceEnrolled,
            actor: format!("device {name}"),
            detail: serde_json::json!({ "device": name }),
        };
        crate::events::insert(&mut tx, &e).await?;
        tx.commit().await?;
        Ok(Some(device))
    }

    /// The device with that id.
    pub async fn device(&self, id: DeviceId) -> Result<Option<DeviceRow>> {
        let row = sqlx::query(&format!("{DEVICE_SELECT} WHERE d.id = $1")).bind(id.to_string()).fetch_optional(&self.pool).await?;
        row.as_ref().map(device_row).transpose()
    }

    /// All devices of a workspace, by name.
    pub async fn list_devices(&self, workspace: WorkspaceId) -> Result<Vec<DeviceRow>> {
        let rows = sqlx::query(&format!("{DEVICE_SELECT} WHERE d.workspace_id = $1 ORDER BY d.name"))
            .bind(workspace.to_string())
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(device_row).collect()
    }

    /// Records that these devices reported in now, in one transaction (heartbeats).
    pub async fn touch_devices(&self, ids: &[DeviceId]) -> Result<()> {
        let at = now();
        let mut tx = self.write().await?;
        for part in ids.chunks(TOUCH_BATCH) {
            let marks: Vec<String> = (0..part.len()).map(|i| format!("${}", i + 2)).collect();
            let sql = format!("UPDATE devices SET last_contact_at = $1 WHERE id IN ({})", marks.join(", "));
            let mut q = sqlx::query(&sql).bind(&at);
            for id in part {
                q = q.bind(id.to_string());
            }
            q.execute(&mut *tx).await?;
        }
        tx.commit().await?;
        Ok(())
    }
}

/// Devices updated per statement by [`Store::touch_devices`].
const TOUCH_BATCH: usize = 500;

#[cfg(test)]
mod tests {
    use crate::testing::store;

    #[tokio::test]
    async fn upsert_keeps_the_id_and_updates_slots() {
        let (s, _d) = store().await;
        let (ws, _) = s.bootstrap("w", "o").await.unwrap();
        let a = s.upsert_device(ws, "box", 2).await.unwrap();
        let b = s.upsert_device(ws, "box", 5).await.unwrap();
        assert_eq!(a.id, b.id);
        assert_eq!(b.slots, 5);
        assert!(b.last_contact_at.is_none());
        s.touch_devices(&[a.id]).await.unwrap();
        let list = s.list_devices(ws).await.unwrap();
        assert_eq!(list.len(), 1);
        assert!(list[0].last_contact_at.is_some());
        assert_eq!(list[0].live_sessions, 0);
    }

    #[tokio::test]
    async fn heartbeats_of_many_devices_are_written_at_once() {
        let (s, _d) = store().await;
        let (ws, _) = s.bootstrap("w", "o").await.unwrap();
        let mut ids = Vec::new();
        for i in 0..600 {
            ids.push(s.upsert_device(ws, &format!("box{i}"), 1).await.unwrap().id);
        }
        let quiet = s.upsert_device(ws, "quiet", 1).await.unwrap();
        s.touch_devices(&ids).await.unwrap();
        let list = s.list_devices(ws).await.unwrap();
        assert_eq!(list.iter().filter(|d| d.last_contact_at.is_some()).count(), 600, "past one statement's batch");
        assert!(list.iter().find(|d| d.id == quiet.id).unwrap().last_contact_at.is_none());
    }
    #[tokio::test]
    async fn enrollment_tokens_work_once_for_their_device_and_replace_its_credential() {
        let (s, _d) = store().await;
        let (ws, _) = s.bootstrap("default", "alice").await.unwrap();
        let dev = s.upsert_device(ws, "box", 4).await.unwrap();
        s.add_token(ws, crate::TokenKind::Device, &dev.id.to_string(), "old", "first").await.unwrap();
        s.create_enrollment(dev.id, "e1", "alice", chrono::Duration::hours(1)).await.unwrap();
        assert_eq!(s.enroll_device("e1", "other", "new").await.unwrap(), None, "another device's name");
        assert_eq!(s.enroll_device("e1", "box", "new").await.unwrap(), Some(dev.id));
        assert_eq!(s.enroll_device("e1", "box", "new2").await.unwrap(), None, "used once");
        assert!(s.principal_for("old").await.unwrap().is_none(), "the old credential is replaced");
        assert!(matches!(s.principal_for("new").await.unwrap(), Some(crate::Principal::Device { .. })));
        s.create_enrollment(dev.id, "e2", "alice", chrono::Duration::seconds(-1)).await.unwrap();
        assert_eq!(s.enroll_device("e2", "box", "new3").await.unwrap(), None, "expired");
        // A newer token replaces an unused one; revoking the device ends both.
        s.create_enrollment(dev.id, "e3", "alice", chrono::Duration::hours(1)).await.unwrap();
        s.create_enrollment(dev.id, "e4", "alice", chrono::Duration::hours(1)).await.unwrap();
        assert_eq!(s.enroll_device("e3", "box", "new4").await.unwrap(), None, "replaced by e4");
        s.revoke_device(dev.id).await.unwrap();
        assert_eq!(s.enroll_device("e4", "box", "new5").await.unwrap(), None, "the device was revoked");
    }
}

//! Webhook endpoints and their delivery log: deliveries are queued with the event that
//! fires them, taken by the sender when due, and end delivered or failed (a person can
//! redeliver either).

use drover_core::webhook::WebhookEvent;
use drover_core::{MessageId, WebhookId, WorkspaceId};
use serde::{Deserialize, Serialize};
use sqlx::{AnyConnection, Row};

use crate::{now, parse_id, Result, Store, StoreError};

/// One of an endpoint's signing secrets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WebhookSecret {
    /// `whsec_` and the base64 of the key.
    pub secret: String,
    /// When a rotated-out secret stops signing; None for the current one.
    pub expires_at: Option<String>,
}

/// A registered endpoint.
#[derive(Debug, Clone)]
pub struct WebhookRow {
    /// Its id, as the API and the CLI name it.
    pub id: WebhookId,
    /// The workspace whose events it receives.
    pub workspace: WorkspaceId,
    /// Where deliveries go.
    pub url: String,
    /// The event types it receives.
    pub events: Vec<String>,
    /// Its secrets, newest first (the old ones sign too until they expire).
    pub secrets: Vec<WebhookSecret>,
    /// Why it is disabled, if it is.
    pub disabled_reason: Option<String>,
    /// Who registered it.
    pub created_by: String,
    /// When it was registered (stored format).
    pub created_at: String,
}

/// A delivery in an endpoint's log.
#[derive(Debug, Clone)]
pub struct DeliveryRow {
    /// The message id (`webhook-id`).
    pub id: MessageId,
    /// The endpoint it goes to.
    pub endpoint: WebhookId,
    /// Its event type.
    pub event_type: String,
    /// The body sent (JSON), the same at every attempt.
    pub payload: String,
    /// `pending`, `delivered` or `failed`.
    pub state: String,
    /// Attempts so far.
    pub attempts: u32,
    /// When the next attempt is due (pending).
    pub next_attempt_at: Option<String>,
    /// The receiver's last HTTP status.
    pub last_status: Option<u16>,
    /// The last failure, in words.
    pub last_error: Option<String>,
    /// When it was queued.
    pub created_at: String,
    /// When it was delivered.
    pub delivered_at: Option<String>,
}

/// A delivery due now, with what sending it needs.
#[derive(Debug, Clone)]
pub struct DueDelivery {
    /// The delivery to send.
    pub delivery: DeliveryRow,
    /// Where to send it: its endpoint's URL.
    pub url: String,
    /// Its secrets still signing, newest first.
    pub secrets: Vec<String>,
}

fn endpoint_row(r: &sqlx::any::AnyRow) -> Result<WebhookRow> {
    let events: String = r.get("events");
    let secrets: String = r.get("secrets");
    Ok(WebhookRow {
        id: parse_id(r.get("id"))?,
        workspace: parse_id(r.get("workspace_id"))?,
        url: r.get("url"),
        events: serde_json::from_str(&events).map_err(|e| StoreError::Corrupt(e.to_string()))?,
        secrets: serde_json::from_str(&secrets).map_err(|e| StoreError::Corrupt(e.to_string()))?,
        disabled_reason: r.get("disabled_reason"),
        created_by: r.get("created_by"),
        created_at: r.get("created_at"),
    })
}

fn delivery_row(r: &sqlx::any::AnyRow) -> Result<DeliveryRow> {
    Ok(DeliveryRow {
        id: parse_id(r.get("id"))?,
        endpoint: parse_id(r.get("endpoint_id"))?,
        event_type: r.get("event_type"),
        payload: r.get("payload"),
        state: r.get("state"),
        attempts: r.get::<i64, _>("attempts") as u32,
        next_attempt_at: r.get("next_attempt_at"),
        last_status: r.get::<Option<i64>, _>("last_status").map(|s| s as u16),
        last_error: r.get("last_error"),
        created_at: r.get("created_at"),
        delivered_at: r.get("delivered_at"),
    })
}

/// Queues `payload` for every enabled endpoint of the workspace subscribed to `hook`,
/// inside the transaction that records the event.
pub(crate) async fn enqueue(conn: &mut AnyConnection, workspace: WorkspaceId, hook: WebhookEvent, payload: &str, at: &str) -> Result<()> {
    let rows = sqlx::query("SELECT id, events FROM webhook_endpoints WHERE workspace_id = $1 AND disabled_reason IS NULL")
        .bind(workspace.to_string())
        .fetch_all(&mut *conn)
        .await?;
    let subscribed = rows.iter().filter(|r| {
        serde_json::from_str::<Vec<String>>(&r.get::<String, _>("events")).is_ok_and(|events| events.iter().any(|e| e == hook.as_str()))
    });
    for endpoint in subscribed.map(|r| r.get::<String, _>("id")).collect::<Vec<_>>() {
        sqlx::query(
            "INSERT INTO webhook_deliveries (id, endpoint_id, event_type, payload, state, attempts, next_attempt_at, created_at)
             VALUES ($1, $2, $3, $4, 'pending', 0, $5, $6)",
        )
        .bind(MessageId::new().to_string())
        .bind(endpoint)
        .bind(hook.as_str())
        .bind(payload)
        .bind(at)
        .bind(at)
        .execute(&mut *conn)
        .await?;
    }
    Ok(())
}

/// The state an attempt leaves a delivery in (webhooks and pushes alike): delivered,
/// pending its retry at a time, or failed for good.
pub(crate) fn attempt_state(delivered: bool, retry_at: Option<&str>) -> &'static str {
    match (delivered, retry_at) {
        (true, _) => "delivered",
        (false, Some(_)) => "pending",
        (false, None) => "failed",
    }
}

impl Store {
    /// Registers an endpoint with its first secret.
    pub async fn create_webhook(&self, workspace: WorkspaceId, url: &str, events: &[String], secret: &str, by: &str) -> Result<WebhookId> {
        let id = WebhookId::new();
        let secrets = vec![WebhookSecret { secret: secret.into(), expires_at: None }];
        sqlx::query(
            "INSERT INTO webhook_endpoints (id, workspace_id, url, events, secrets, created_by, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(id.to_string())
        .bind(workspace.to_string())
        .bind(url)
        .bind(serde_json::to_string(events).expect("serialises"))
        .bind(serde_json::to_string(&secrets).expect("serialises"))
        .bind(by)
        .bind(now())
        .execute(&self.writes)
        .await?;
        Ok(id)
    }

    /// An endpoint.
    pub async fn webhook(&self, id: WebhookId) -> Result<Option<WebhookRow>> {
        let r = sqlx::query("SELECT * FROM webhook_endpoints WHERE id = $1").bind(id.to_string()).fetch_optional(&self.pool).await?;
        r.as_ref().map(endpoint_row).transpose()
    }

    /// The workspace's endpoints, oldest first.
    pub async fn list_webhooks(&self, workspace: WorkspaceId) -> Result<Vec<WebhookRow>> {
        let rows = sqlx::query("SELECT * FROM webhook_endpoints WHERE workspace_id = $1 ORDER BY created_at, id")
            .bind(workspace.to_string())
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(endpoint_row).collect()
    }

    /// Removes an endpoint and its delivery log.
    pub async fn delete_webhook(&self, id: WebhookId) -> Result<bool> {
        let mut tx = self.write().await?;
        sqlx::query("DELETE FROM webhook_deliveries WHERE endpoint_id = $1").bind(id.to_string()).execute(&mut *tx).await?;
        let gone = sqlx::query("DELETE FROM webhook_endpoints WHERE id = $1").bind(id.to_string()).execute(&mut *tx).await?.rows_affected();
        tx.commit().await?;
        Ok(gone == 1)
    }

    /// Makes `secret` the endpoint's current one; the previous current secret keeps
    /// signing until `old_expires_at` (receivers switch over meanwhile), and secrets
    /// already expired are dropped.
    pub async fn rotate_webhook_secret(&self, id: WebhookId, secret: &str, old_expires_at: &str) -> Result<bool> {
        let mut tx = self.write().await?;
        let Some(r) = sqlx::query("SELECT * FROM webhook_endpoints WHERE id = $1").bind(id.to_string()).fetch_optional(&mut *tx).await?
        else {
            return Ok(false);
        };
        let at = now();
        let mut secrets = vec![WebhookSecret { secret: secret.into(), expires_at: None }];
        for mut s in endpoint_row(&r)?.secrets {
            if s.expires_at.as_deref().is_some_and(|e| e <= at.as_str()) {
                continue;
            }
            s.expires_at.get_or_insert_with(|| old_expires_at.to_string());
            secrets.push(s);
        }
        sqlx::query("UPDATE webhook_endpoints SET secrets = $1 WHERE id = $2")
            .bind(serde_json::to_string(&secrets).expect("serialises"))
            .bind(id.to_string())
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(true)
    }

    /// Disables an endpoint with a reason, or enables it again (None).
    pub async fn set_webhook_disabled(&self, id: WebhookId, reason: Option<&str>) -> Result<bool> {
        let n = sqlx::query("UPDATE webhook_endpoints SET disabled_reason = $1 WHERE id = $2")
            .bind(reason)
            .bind(id.to_string())
            .execute(&self.writes)
            .await?
            .rows_affected();
        Ok(n == 1)
    }

    /// Deliveries due at `at` to enabled endpoints, oldest first.
    pub async fn due_deliveries(&self, at: &str, limit: i64) -> Result<Vec<DueDelivery>> {
        let rows = sqlx::query(
            "SELECT d.*, e.url, e.secrets FROM webhook_deliveries d JOIN webhook_endpoints e ON e.id = d.endpoint_id
             WHERE d.state = 'pending' AND d.next_attempt_at <= $1 AND e.disabled_reason IS NULL
             ORDER BY d.next_attempt_at, d.id LIMIT $2",
        )
        .bind(at)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                let secrets: String = r.get("secrets");
                let secrets: Vec<WebhookSecret> = serde_json::from_str(&secrets).map_err(|e| StoreError::Corrupt(e.to_string()))?;
                let signing = secrets.into_iter().filter(|s| s.expires_at.as_deref().is_none_or(|e| e > at)).map(|s| s.secret).collect();
                Ok(DueDelivery { delivery: delivery_row(r)?, url: r.get("url"), secrets: signing })
            })
            .collect()
    }

    /// Records an attempt made when the delivery had `attempts_before` attempts:
    /// delivered, to be tried again at `retry_at`, or failed for good (`retry_at` None
    /// and not delivered). A redelivery asked for meanwhile (which resets the count)
    /// wins: the attempt's result is then not recorded.
    pub async fn delivery_attempted(
        &self,
        id: MessageId,
        attempts_before: u32,
        delivered: bool,
        status: Option<u16>,
        error: Option<&str>,
        retry_at: Option<&str>,
    ) -> Result<()> {
        let state = attempt_state(delivered, retry_at);
        let at = now();
        sqlx::query(
            "UPDATE webhook_deliveries SET state = $1, attempts = attempts + 1, next_attempt_at = $2, last_status = $3, last_error = $4,
             delivered_at = CASE WHEN $5 THEN $6 ELSE delivered_at END WHERE id = $7 AND attempts = $8",
        )
        .bind(state)
        .bind(retry_at)
        .bind(status.map(i64::from))
        .bind(error)
        .bind(delivered)
        .bind(&at)
        .bind(id.to_string())
        .bind(i64::from(attempts_before))
        .execute(&self.writes)
        .await?;
        Ok(())
    }

    /// An endpoint's deliveries, newest first.
    pub async fn deliveries(&self, endpoint: WebhookId, limit: i64) -> Result<Vec<DeliveryRow>> {
        let rows = sqlx::query("SELECT * FROM webhook_deliveries WHERE endpoint_id = $1 ORDER BY created_at DESC, id DESC LIMIT $2")
            .bind(endpoint.to_string())
            .bind(limit)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(delivery_row).collect()
    }

    /// Sends a delivery again, now, with the same message id (receivers deduplicate on it).
    pub async fn redeliver(&self, endpoint: WebhookId, id: MessageId) -> Result<bool> {
        let n = sqlx::query(
            "UPDATE webhook_deliveries SET state = 'pending', attempts = 0, next_attempt_at = $1 WHERE id = $2 AND endpoint_id = $3",
        )
        .bind(now())
        .bind(id.to_string())
        .bind(endpoint.to_string())
        .execute(&self.writes)
        .await?
        .rows_affected();
        Ok(n == 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::store;
    use crate::NewEvent;
    use drover_core::activity::EventKind;

    #[tokio::test]
    async fn events_queue_deliveries_for_subscribed_enabled_endpoints_only() {
        let (s, _d) = store().await;
        let (ws, _) = s.bootstrap("w", "alice").await.unwrap();
        let lost = s.create_webhook(ws, "http://a", &["session.lost".into()], "whsec_a", "alice").await.unwrap();
        let all = s.create_webhook(ws, "http://b", &["session.lost".into(), "session.ended".into()], "whsec_b", "alice").await.unwrap();
        let off = s.create_webhook(ws, "http://c", &["session.lost".into()], "whsec_c", "alice").await.unwrap();
        assert!(s.set_webhook_disabled(off, Some("410")).await.unwrap());
        let e = |kind| NewEvent { workspace: ws, session: None, task: None, kind, actor: "x".into(), detail: serde_json::json!({}) };
        s.record_event(&e(EventKind::SessionConnectionLost)).await.unwrap();
        s.record_event(&e(EventKind::Comment)).await.unwrap();
        s.record_event(&e(EventKind::SessionEnded)).await.unwrap();
        assert_eq!(s.deliveries(lost, 10).await.unwrap().len(), 1);
        assert_eq!(s.deliveries(all, 10).await.unwrap().len(), 2);
        assert_eq!(s.deliveries(off, 10).await.unwrap().len(), 0);
        let due = s.due_deliveries(&now(), 10).await.unwrap();
        assert_eq!(due.len(), 3);
        let body: serde_json::Value = serde_json::from_str(&due[0].delivery.payload).unwrap();
        assert_eq!(body["type"], "session.lost");
        assert_eq!(body["data"]["kind"], "session_connection_lost");
        // Attempts: a retry later, then delivered; failed for good; redelivered.
        let d = due[0].delivery.id;
        s.delivery_attempted(d, 0, false, Some(500), Some("500"), Some("9999-01-01T00:00:00.000000Z")).await.unwrap();
        assert_eq!(s.due_deliveries(&now(), 10).await.unwrap().len(), 2, "not due until later");
        s.delivery_attempted(d, 1, true, Some(204), None, None).await.unwrap();
        let row = s.deliveries(lost, 10).await.unwrap().remove(0);
        assert_eq!((row.state.as_str(), row.attempts, row.last_status), ("delivered", 2, Some(204)));
        assert!(s.redeliver(lost, d).await.unwrap());
        assert!(!s.redeliver(all, d).await.unwrap(), "only through its own endpoint");
        assert_eq!(s.deliveries(lost, 10).await.unwrap()[0].state, "pending");
        // An attempt that was under way when the redelivery was asked for does not
        // overwrite it.
        s.delivery_attempted(d, 2, false, Some(500), None, None).await.unwrap();
        assert_eq!(s.deliveries(lost, 10).await.unwrap()[0].state, "pending");
    }

    #[tokio::test]
    async fn rotation_keeps_the_old_secret_signing_until_it_expires() {
        let (s, _d) = store().await;
        let (ws, _) = s.bootstrap("w", "alice").await.unwrap();
        let id = s.create_webhook(ws, "http://a", &["session.lost".into()], "whsec_one", "alice").await.unwrap();
        s.rotate_webhook_secret(id, "whsec_two", "9999-01-01T00:00:00.000000Z").await.unwrap();
        let w = s.webhook(id).await.unwrap().unwrap();
        assert_eq!(w.secrets.iter().map(|s| s.secret.as_str()).collect::<Vec<_>>(), ["whsec_two", "whsec_one"]);
        s.rotate_webhook_secret(id, "whsec_three", "2000-01-01T00:00:00.000000Z").await.unwrap();
        let w = s.webhook(id).await.unwrap().unwrap();
        // one still has its first expiry; two now expires (in the past here).
        assert_eq!(w.secrets.len(), 3);
        let e = NewEvent {
            workspace: ws,
            session: None,
            task: None,
            kind: EventKind::SessionConnectionLost,
            actor: "x".into(),
            detail: serde_json::json!({}),
        };
        s.record_event(&e).await.unwrap();
        let due = s.due_deliveries(&now(), 10).await.unwrap();
        assert_eq!(due[0].secrets, ["whsec_three", "whsec_one"], "expired secrets do not sign");
        assert!(s.delete_webhook(id).await.unwrap());
        assert!(s.webhook(id).await.unwrap().is_none());
    }
}

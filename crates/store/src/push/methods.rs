//! The store's Web Push calls: the key pair, subscriptions, choices, batches and the
//! push log.

use std::time::Duration;

use drover_core::notify::{self, Item};
use drover_core::{MemberId, PushMessageId, PushSubscriptionId, WorkspaceId};
use sqlx::Row;

use super::{choices_row, corrupt, queue, subscription_row, DuePush, NotifyChoices, PushSubscriptionRow};
use crate::{format_time, now, parse_id, Result, Store};

/// The one row of `push_keys`.
const VAPID: &str = "vapid";

impl Store {
    /// The server's VAPID key pair (private PKCS#8 base64, public base64url), made by
    /// `make` the first time any replica asks; every later call returns the stored one.
    pub async fn vapid_key(&self, make: impl FnOnce() -> (String, String)) -> Result<(String, String)> {
        let read = |r: sqlx::any::AnyRow| (r.get::<String, _>("private_key"), r.get::<String, _>("public_key"));
        let q = "SELECT private_key, public_key FROM push_keys WHERE id = $1";
        if let Some(r) = sqlx::query(q).bind(VAPID).fetch_optional(&self.pool).await? {
            return Ok(read(r));
        }
        let (private, public) = make();
        sqlx::query("INSERT INTO push_keys (id, private_key, public_key, created_at) VALUES ($1, $2, $3, $4) ON CONFLICT (id) DO NOTHING")
            .bind(VAPID)
            .bind(&private)
            .bind(&public)
            .bind(now())
            .execute(&self.writes)
            .await?;
        // Another replica may have won the race: everyone uses the stored pair.
        Ok(read(sqlx::query(q).bind(VAPID).fetch_one(&self.writes).await?))
    }

    /// Registers a browser for `member` (the same endpoint again replaces its keys and
    /// owner: a browser belongs to whoever subscribed it last).
    pub async fn add_push_subscription(
        &self,
        workspace: WorkspaceId,
        member: MemberId,
        endpoint: &str,
        p256dh: &str,
        auth: &str,
    ) -> Result<PushSubscriptionRow> {
        sqlx::query(
            "INSERT INTO push_subscriptions (id, workspace_id, member_id, endpoint, p256dh, auth, created_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7)
             ON CONFLICT (endpoint) DO UPDATE SET workspace_id = excluded.workspace_id, member_id = excluded.member_id,
                 p256dh = excluded.p256dh, auth = excluded.auth",
        )
        .bind(PushSubscriptionId::new().to_string())
        .bind(workspace.to_string())
        .bind(member.to_string())
        .bind(endpoint)
        .bind(p256dh)
        .bind(auth)
        .bind(now())
        .execute(&self.writes)
        .await?;
        let r = sqlx::query("SELECT * FROM push_subscriptions WHERE endpoint = $1").bind(endpoint).fetch_one(&self.writes).await?;
        subscription_row(&r)
    }

    /// `member`'s subscriptions, oldest first.
    pub async fn push_subscriptions(&self, member: MemberId) -> Result<Vec<PushSubscriptionRow>> {
        let rows = sqlx::query("SELECT * FROM push_subscriptions WHERE member_id = $1 ORDER BY created_at, id")
            .bind(member.to_string())
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(subscription_row).collect()
    }

    /// Removes one of `member`'s subscriptions, by id or endpoint, and what waits to go
    /// to it; false if they have no such subscription.
    pub async fn remove_push_subscription(&self, member: MemberId, id_or_endpoint: &str) -> Result<bool> {
        let r = sqlx::query("SELECT id FROM push_subscriptions WHERE member_id = $1 AND (id = $2 OR endpoint = $2)")
            .bind(member.to_string())
            .bind(id_or_endpoint)
            .fetch_optional(&self.pool)
            .await?;
        match r {
            Some(r) => self.drop_push_subscription(parse_id(r.get("id"))?).await,
            None => Ok(false),
        }
    }

    /// Removes a subscription the push service said is gone (404/410), and its queue.
    pub async fn drop_push_subscription(&self, id: PushSubscriptionId) -> Result<bool> {
        let mut tx = self.write().await?;
        sqlx::query("DELETE FROM push_deliveries WHERE subscription_id = $1").bind(id.to_string()).execute(&mut *tx).await?;
        let n = sqlx::query("DELETE FROM push_subscriptions WHERE id = $1").bind(id.to_string()).execute(&mut *tx).await?.rows_affected();
        tx.commit().await?;
        Ok(n == 1)
    }

    /// `member`'s choices (the defaults until they choose).
    pub async fn notify_choices(&self, member: MemberId) -> Result<NotifyChoices> {
        let r = sqlx::query("SELECT * FROM notification_choices WHERE member_id = $1")
            .bind(member.to_string())
            .fetch_optional(&self.pool)
            .await?;
        r.as_ref().map(choices_row).transpose().map(Option::unwrap_or_default)
    }

    /// Records `member`'s choices.
    pub async fn set_notify_choices(&self, member: MemberId, c: &NotifyChoices) -> Result<()> {
        let events: Vec<&str> = c.choices.events.iter().map(|k| k.as_str()).collect();
        sqlx::query(
            "INSERT INTO notification_choices (member_id, events, quiet, zone, cooldown_secs, updated_at) VALUES ($1, $2, $3, $4, $5, $6)
             ON CONFLICT (member_id) DO UPDATE SET events = excluded.events, quiet = excluded.quiet, zone = excluded.zone,
                 cooldown_secs = excluded.cooldown_secs, updated_at = excluded.updated_at",
        )
        .bind(member.to_string())
        .bind(serde_json::to_string(&events).expect("serialises"))
        .bind(c.choices.quiet.map(|w| w.to_string()))
        .bind(&c.zone)
        .bind(c.choices.cooldown.as_secs() as i64)
        .bind(now())
        .execute(&self.writes)
        .await?;
        Ok(())
    }

    /// Turns every batch opened at least `window` ago into one push per subscription of
    /// its member; returns how many pushes were queued.
    pub async fn close_push_batches(&self, window: Duration) -> Result<u64> {
        let at = chrono::Utc::now();
        let before = format_time(at - chrono::Duration::from_std(window).unwrap_or_default());
        let mut tx = self.write().await?;
        let rows = sqlx::query("SELECT id, member_id, items FROM push_batches WHERE sent_at IS NULL AND created_at <= $1")
            .bind(&before)
            .fetch_all(&mut *tx)
            .await?;
        let stamp = format_time(at);
        let mut queued = 0;
        for r in rows {
            let items: Vec<Item> = serde_json::from_str(&r.get::<String, _>("items")).map_err(corrupt)?;
            if !items.is_empty() {
                let payload = serde_json::to_string(&notify::compose(&items)).expect("serialises");
                queued += queue(&mut tx, &r.get::<String, _>("member_id"), &payload, &stamp).await?;
            }
            sqlx::query("UPDATE push_batches SET sent_at = $1 WHERE id = $2")
                .bind(&stamp)
                .bind(r.get::<String, _>("id"))
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(queued)
    }

    /// Queues `payload` to every subscription of `member` at once (a test push);
    /// returns how many.
    pub async fn queue_push(&self, member: MemberId, payload: &str) -> Result<u64> {
        let mut tx = self.write().await?;
        let n = queue(&mut tx, &member.to_string(), payload, &now()).await?;
        tx.commit().await?;
        Ok(n)
    }

    /// Pushes due at `at`, oldest first.
    pub async fn due_pushes(&self, at: &str, limit: i64) -> Result<Vec<DuePush>> {
        let rows = sqlx::query(
            "SELECT d.id AS push_id, d.payload, d.attempts, s.* FROM push_deliveries d JOIN push_subscriptions s ON s.id = d.subscription_id
             WHERE d.state = 'pending' AND d.next_attempt_at <= $1 ORDER BY d.next_attempt_at, d.id LIMIT $2",
        )
        .bind(at)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(DuePush {
                    id: parse_id(r.get("push_id"))?,
                    subscription: subscription_row(r)?,
                    payload: r.get("payload"),
                    attempts: r.get::<i64, _>("attempts") as u32,
                })
            })
            .collect()
    }

    /// Records an attempt: delivered, to be tried again at `retry_at`, or failed for
    /// good (`retry_at` None and not delivered).
    pub async fn push_attempted(
        &self,
        id: PushMessageId,
        delivered: bool,
        status: Option<u16>,
        error: Option<&str>,
        retry_at: Option<&str>,
    ) -> Result<()> {
        let state = crate::webhooks::attempt_state(delivered, retry_at);
        sqlx::query(
            "UPDATE push_deliveries SET state = $1, attempts = attempts + 1, next_attempt_at = $2, last_status = $3, last_error = $4,
                 delivered_at = $5 WHERE id = $6",
        )
        .bind(state)
        .bind(retry_at)
        .bind(status.map(i64::from))
        .bind(error)
        .bind(delivered.then(now))
        .bind(id.to_string())
        .execute(&self.writes)
        .await?;
        Ok(())
    }
}

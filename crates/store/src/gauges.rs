//! Counts a metrics scrape reports from the database, so every replica reports the
//! same: task stages waiting for a slot, what waits on a person, webhook deliveries
//! queued.

use drover_core::WorkspaceId;
use sqlx::Row;

use crate::{Result, Store};

/// What the database holds now that a metrics scrape reports as gauges.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Gauges {
    /// Open tasks whose current stage waits for a device slot.
    pub waiting_for_slot: u64,
    /// What waits on a person: open attention items and open questions (the inbox).
    pub attention_waiting: u64,
    /// Webhook deliveries not yet delivered or given up, to enabled endpoints.
    pub webhook_queue: u64,
}

impl Store {
    /// The workspace's [`Gauges`], in one statement.
    pub async fn gauges(&self, workspace: WorkspaceId) -> Result<Gauges> {
        let row = sqlx::query(
            "SELECT
               (SELECT COUNT(*) FROM tasks WHERE workspace_id = $1 AND queued_at IS NOT NULL AND status = 'open') AS waiting,
               (SELECT COUNT(*) FROM attention WHERE workspace_id = $1 AND closed_at IS NULL)
               + (SELECT COUNT(*) FROM notes n JOIN tasks t ON t.id = n.task_id
                  WHERE t.workspace_id = $1 AND n.kind = 'question' AND n.closed_at IS NULL) AS attention,
               (SELECT COUNT(*) FROM webhook_deliveries d JOIN webhook_endpoints e ON e.id = d.endpoint_id
                  WHERE e.workspace_id = $1 AND d.state = 'pending' AND e.disabled_reason IS NULL) AS webhooks",
        )
        .bind(workspace.to_string())
        .fetch_one(&self.pool)
        .await?;
        let count = |name: &str| row.get::<i64, _>(name).max(0) as u64;
        Ok(Gauges { waiting_for_slot: count("waiting"), attention_waiting: count("attention"), webhook_queue: count("webhooks") })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::store;

    #[tokio::test]
    async fn an_empty_workspace_counts_nothing_and_a_webhook_event_queues_one() {
        let (s, _d) = store().await;
        let (ws, _) = s.bootstrap("default", "owner").await.unwrap();
        assert_eq!(s.gauges(ws).await.unwrap(), Gauges::default());
        s.create_webhook(ws, "https://example.com/hook", &["session.ended".into()], "whsec_x", "owner").await.unwrap();
        let id = crate::testing::session(&s, ws).await;
        let ending = drover_core::RunEnd::Exited { status: drover_core::ExitStatus::code(0), stop_requested: false };
        let times = crate::RunTimes { started_at: None, ended_at: &crate::now() };
        s.end_session(id, &ending, times, 0, "device box").await.unwrap();
        let g = s.gauges(ws).await.unwrap();
        assert_eq!((g.waiting_for_slot, g.attention_waiting, g.webhook_queue), (0, 0, 1));
    }
}

//! Replicas sharing one PostgreSQL database: who is alive, which replica each connected
//! device's link is on, a mailbox per replica for what must reach a device linked to
//! another (input, stop, a snapshot request…), and PostgreSQL's LISTEN/NOTIFY to wake
//! the replica a message or new output is for and to pass on live-view changes. On
//! SQLite there is one server and none of this runs.

use std::sync::Arc;
use std::time::Duration;

use drover_core::{DeviceId, SessionId, WorkspaceId};
use sqlx::Row;

use crate::{now, parse_id, Change, Engine, Result, Store};

/// The notification channel every replica listens on.
const CHANNEL: &str = "drover";
/// Mail taken per read.
pub const MAIL_BATCH: usize = 500;

/// A wake-up from another replica.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClusterNote {
    /// Mail is waiting for `replica`.
    Mail {
        /// The replica it is for.
        replica: String,
    },
    /// More output of `session` is stored, for `replica`, which asked to follow it.
    Output {
        /// The replica following it.
        replica: String,
        /// The session.
        session: SessionId,
    },
}

/// The PostgreSQL side of a store: where to listen, and what was heard.
pub(crate) struct Cluster {
    /// This store's own name in change notices, so it does not hear itself.
    origin: String,
    notes: tokio::sync::broadcast::Sender<ClusterNote>,
}

impl Cluster {
    /// Starts listening on `url` for notices, passing changes on to `changes`.
    pub(crate) async fn start(url: &str, changes: tokio::sync::broadcast::Sender<Change>) -> Result<Arc<Cluster>> {
        let mut listener = sqlx::postgres::PgListener::connect(url).await?;
        listener.listen(CHANNEL).await?;
        let cluster =
            Arc::new(Cluster { origin: uuid::Uuid::now_v7().simple().to_string(), notes: tokio::sync::broadcast::channel(4096).0 });
        let weak = Arc::downgrade(&cluster);
        tokio::spawn(async move {
            loop {
                let note = listener.recv().await;
                let Some(cluster) = weak.upgrade() else { return };
                match note {
                    Ok(n) => cluster.heard(n.payload(), &changes),
                    Err(e) => {
                        // sqlx reconnects on the next receive; notices sent meanwhile are
                        // lost, which every reader covers by also looking on a timer.
                        tracing::warn!("listening for other replicas: {e}");
                        tokio::time::sleep(Duration::from_millis(500)).await;
                    }
                }
            }
        });
        Ok(cluster)
    }

    fn heard(&self, payload: &str, changes: &tokio::sync::broadcast::Sender<Change>) {
        let mut parts = payload.split(' ');
        match (parts.next(), parts.next(), parts.next(), parts.next()) {
            (Some("m"), Some(replica), None, None) => {
                let _ = self.notes.send(ClusterNote::Mail { replica: replica.to_string() });
            }
            (Some("o"), Some(replica), Some(session), None) => {
                if let Ok(session) = session.parse() {
                    let _ = self.notes.send(ClusterNote::Output { replica: replica.to_string(), session });
                }
            }
            (Some("c"), Some(origin), Some(workspace), Some(session)) if origin != self.origin => {
                if let Ok(workspace) = workspace.parse::<WorkspaceId>() {
                    let _ = changes.send(Change { workspace, session: session.parse().ok() });
                }
            }
            (Some("c"), ..) => {}
            _ => tracing::debug!("an unknown notice from another replica: {payload:?}"),
        }
    }
}

impl Store {
    /// Whether other replicas may share this database (PostgreSQL).
    pub fn is_shared(&self) -> bool {
        self.engine == Engine::Postgres
    }

    /// Wake-ups from other replicas (none on SQLite).
    pub fn cluster_notes(&self) -> Option<tokio::sync::broadcast::Receiver<ClusterNote>> {
        self.cluster.as_ref().map(|c| c.notes.subscribe())
    }

    /// Tells other replicas about a change (after its commit).
    pub(crate) fn announce_change(&self, change: Change) {
        let Some(cluster) = &self.cluster else { return };
        let payload =
            format!("c {} {} {}", cluster.origin, change.workspace, change.session.map(|s| s.to_string()).unwrap_or_else(|| "-".into()));
        let pool = self.pool.clone();
        tokio::spawn(async move {
            if let Err(e) = sqlx::query("SELECT pg_notify($1, $2)").bind(CHANNEL).bind(payload).execute(&pool).await {
                tracing::debug!("telling other replicas of a change: {e}");
            }
        });
    }

    /// Records that replica `replica` (serving at `url`) is alive now.
    /// Times are the database's clock (see [`Store::hold_lease`]).
    pub async fn replica_seen(&self, replica: &str, url: &str) -> Result<()> {
        let sql = format!(
            "INSERT INTO replicas (id, url, started_at, seen_at) VALUES ($1, $2, {now}, {now})
             ON CONFLICT (id) DO UPDATE SET seen_at = excluded.seen_at",
            now = self.engine.db_time("0")
        );
        sqlx::query(&sql).bind(replica).bind(url).execute(&self.writes).await?;
        Ok(())
    }

    /// Forgets replicas not seen for `gone` and what was theirs: device links and mail
    /// no one will read.
    pub async fn forget_replicas(&self, gone: Duration) -> Result<()> {
        let dead = format!("SELECT id FROM replicas WHERE seen_at < {}", self.engine.db_time("$1"));
        let mut tx = self.writes.begin().await?;
        let secs = -gone.as_secs_f64();
        for sql in [
            format!("DELETE FROM relay WHERE replica IN ({dead})"),
            format!("DELETE FROM device_links WHERE replica IN ({dead})"),
            format!("DELETE FROM replicas WHERE id IN ({dead})"),
        ] {
            sqlx::query(&sql).bind(secs).execute(&mut *tx).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Records that `device`'s link is on `replica` now.
    pub async fn link_device(&self, device: DeviceId, replica: &str) -> Result<()> {
        sqlx::query(
            "INSERT INTO device_links (device_id, replica, since) VALUES ($1, $2, $3)
             ON CONFLICT (device_id) DO UPDATE SET replica = excluded.replica, since = excluded.since",
        )
        .bind(device.to_string())
        .bind(replica)
        .bind(now())
        .execute(&self.writes)
        .await?;
        Ok(())
    }

    /// Forgets `device`'s link if it is still the one on `replica`.
    pub async fn unlink_device(&self, device: DeviceId, replica: &str) -> Result<()> {
        sqlx::query("DELETE FROM device_links WHERE device_id = $1 AND replica = $2")
            .bind(device.to_string())
            .bind(replica)
            .execute(&self.writes)
            .await?;
        Ok(())
    }

    /// Devices linked to replicas seen within `alive`, with their replica.
    pub async fn device_links(&self, alive: Duration) -> Result<Vec<(DeviceId, String)>> {
        let sql = format!(
            "SELECT l.device_id, l.replica FROM device_links l JOIN replicas r ON r.id = l.replica WHERE r.seen_at >= {}",
            self.engine.db_time("$1")
        );
        let rows = sqlx::query(&sql).bind(-alive.as_secs_f64()).fetch_all(&self.pool).await?;
        rows.iter().map(|r| Ok((parse_id(r.get("device_id"))?, r.get("replica")))).collect()
    }

    /// Posts `body` to `replica`'s mailbox and wakes it (at the commit).
    pub async fn post(&self, replica: &str, body: &str) -> Result<()> {
        let mut tx = self.writes.begin().await?;
        sqlx::query("INSERT INTO relay (replica, body) VALUES ($1, $2)").bind(replica).bind(body).execute(&mut *tx).await?;
        sqlx::query("SELECT pg_notify($1, $2)").bind(CHANNEL).bind(format!("m {replica}")).execute(&mut *tx).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Takes (removes and returns) the oldest mail of `replica`, oldest first.
    pub async fn take_mail(&self, replica: &str) -> Result<Vec<String>> {
        let rows = sqlx::query(
            "DELETE FROM relay WHERE seq IN (SELECT seq FROM relay WHERE replica = $1 ORDER BY seq LIMIT $2) RETURNING seq, body",
        )
        .bind(replica)
        .bind(MAIL_BATCH as i64)
        .fetch_all(&self.writes)
        .await?;
        let mut mail: Vec<(i64, String)> = rows.iter().map(|r| (r.get("seq"), r.get("body"))).collect();
        mail.sort_by_key(|(seq, _)| *seq);
        Ok(mail.into_iter().map(|(_, body)| body).collect())
    }

    /// Wakes `replica`, which follows `session`'s output: more of it is stored.
    pub async fn announce_output(&self, replica: &str, session: SessionId) -> Result<()> {
        sqlx::query("SELECT pg_notify($1, $2)").bind(CHANNEL).bind(format!("o {replica} {session}")).execute(&self.writes).await?;
        Ok(())
    }
}

//! Replicas sharing one PostgreSQL database: who is alive, which replica each connected
//! device's link is on, a mailbox per replica for what must reach a device linked to
//! another (input, stop, a snapshot request…), and PostgreSQL's LISTEN/NOTIFY to wake
//! the replica a message or new output is for and to pass on live-view changes. On
//! SQLite there is one server and none of this runs.

use std::collections::HashMap;
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
        /// The session whose viewers it counts.
        session: SessionId,
    },
}

/// How many viewers a session has: watching, and of those, able to type.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ViewerCount {
    /// Viewers attached.
    pub attached: u32,
    /// Attached viewers that can type (not read-only).
    pub interactive: u32,
}

/// A session's viewers on every live replica.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SessionViewers {
    /// All of them.
    pub total: ViewerCount,
    /// How many are attached on replicas other than the one asking.
    pub elsewhere: u32,
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

    /// Forgets replicas not seen for `gone` and what was theirs (device links, mail no
    /// one will read, viewers), and the viewers of sessions that have ended.
    pub async fn forget_replicas(&self, gone: Duration) -> Result<()> {
        let dead = format!("SELECT id FROM replicas WHERE seen_at < {}", self.engine.db_time("$1"));
        let mut tx = self.writes.begin().await?;
        let secs = -gone.as_secs_f64();
        for sql in [
            format!("DELETE FROM relay WHERE replica IN ({dead})"),
            format!("DELETE FROM device_links WHERE replica IN ({dead})"),
            format!("DELETE FROM replica_viewers WHERE replica IN ({dead})"),
            format!("DELETE FROM replicas WHERE id IN ({dead})"),
        ] {
            sqlx::query(&sql).bind(secs).execute(&mut *tx).await?;
        }
        // Viewers of sessions that have ended count no more.
        sqlx::query(concat!(
            "DELETE FROM replica_viewers v USING sessions s WHERE s.id = v.session_id AND s.outcome NOT IN ",
            live_outcomes!()
        ))
        .execute(&mut *tx)
        .await?;
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

    /// Records `replica`'s viewers of `session` as of `reading` (a number that grows
    /// with each reading on that replica): a write of an older reading than the one
    /// stored is ignored, so writes that cross on the way keep the latest.
    pub async fn set_viewers(&self, replica: &str, session: SessionId, count: ViewerCount, reading: u64) -> Result<()> {
        sqlx::query(
            "INSERT INTO replica_viewers (session_id, replica, attached, interactive, reading) VALUES ($1, $2, $3, $4, $5)
             ON CONFLICT (session_id, replica) DO UPDATE
             SET attached = excluded.attached, interactive = excluded.interactive, reading = excluded.reading
             WHERE replica_viewers.reading < excluded.reading",
        )
        .bind(session.to_string())
        .bind(replica)
        .bind(count.attached as i64)
        .bind(count.interactive as i64)
        .bind(reading as i64)
        .execute(&self.writes)
        .await?;
        Ok(())
    }

    /// The viewers of each of `sessions` on every replica seen within `alive` (a
    /// session no one watches is left out), and how many of them are on replicas other
    /// than `here`.
    pub async fn viewers(&self, sessions: &[SessionId], alive: Duration, here: &str) -> Result<HashMap<SessionId, SessionViewers>> {
        if sessions.is_empty() {
            return Ok(HashMap::new());
        }
        let sql = format!(
            "SELECT v.session_id, SUM(v.attached) AS attached, SUM(v.interactive) AS interactive,
                    SUM(CASE WHEN v.replica = $3 THEN 0 ELSE v.attached END) AS elsewhere
             FROM replica_viewers v JOIN replicas r ON r.id = v.replica
             WHERE v.session_id = ANY(string_to_array($1, ' ')) AND r.seen_at >= {}
             GROUP BY v.session_id",
            self.engine.db_time("$2")
        );
        let ids = sessions.iter().map(|s| s.to_string()).collect::<Vec<_>>().join(" ");
        let rows = sqlx::query(&sql).bind(ids).bind(-alive.as_secs_f64()).bind(here).fetch_all(&self.pool).await?;
        rows.iter()
            .map(|r| {
                let count = |c: &str| u32::try_from(r.get::<i64, _>(c)).unwrap_or(0);
                let total = ViewerCount { attached: count("attached"), interactive: count("interactive") };
                Ok((parse_id(r.get("session_id"))?, SessionViewers { total, elsewhere: count("elsewhere") }))
            })
            .collect()
    }

    /// Counts a sign-in attempt under each of `keys` (`(key, limit)`) on every replica,
    /// unless one of them has had `limit` attempts within `window` already: then how
    /// long until it may try again. Ok holds the attempt's ids, for
    /// [`Store::forgive_login_attempt`]. Attempts under one key are counted one at a
    /// time (a lock per key, not the write lock output waits on), so parallel ones on
    /// several replicas cannot slip past the limit.
    pub async fn count_login_attempt(&self, keys: &[(&str, usize)], window: Duration) -> Result<std::result::Result<Vec<i64>, Duration>> {
        let mut tx = self.writes.begin().await?;
        let mut sorted: Vec<&str> = keys.iter().map(|(k, _)| *k).collect();
        sorted.sort_unstable();
        sorted.dedup();
        for key in sorted {
            sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended($1, 0)) IS NULL AS locked")
                .bind(format!("drover login {key}"))
                .fetch_one(&mut *tx)
                .await?;
        }
        let (now, since) = (self.engine.db_time("0"), self.engine.db_time("$1"));
        let back = -window.as_secs_f64();
        let count = format!("SELECT count(*) AS n, {now} AS now FROM login_attempts WHERE key = $2 AND at >= {since}");
        // The attempt whose lapse brings the key under its limit.
        let lapsing = format!("SELECT at FROM login_attempts WHERE key = $2 AND at >= {since} ORDER BY at OFFSET $3 LIMIT 1");
        let mut wait: Option<Duration> = None;
        for (key, limit) in keys {
            let r = sqlx::query(&count).bind(back).bind(*key).fetch_one(&mut *tx).await?;
            let n = r.get::<i64, _>("n");
            if (n as usize) < *limit {
                continue;
            }
            let at = sqlx::query(&lapsing).bind(back).bind(*key).bind(n - *limit as i64).fetch_optional(&mut *tx).await?;
            let at = at.and_then(|a| crate::parse_time(&a.get::<String, _>("at")));
            let now = crate::parse_time(&r.get::<String, _>("now"));
            let since_then = at.zip(now).and_then(|(a, n)| (n - a).to_std().ok()).unwrap_or_default();
            let w = window.saturating_sub(since_then);
            wait = Some(wait.map_or(w, |x| x.max(w)));
        }
        if let Some(w) = wait {
            return Ok(Err(w.max(Duration::from_secs(1))));
        }
        let mut ids = Vec::with_capacity(keys.len());
        let insert = format!("INSERT INTO login_attempts (key, at) VALUES ($1, {now}) RETURNING seq");
        for (key, _) in keys {
            ids.push(sqlx::query(&insert).bind(*key).fetch_one(&mut *tx).await?.get::<i64, _>("seq"));
        }
        tx.commit().await?;
        Ok(Ok(ids))
    }

    /// Forgets sign-in attempts older than `window`: they count no more.
    pub async fn forget_login_attempts(&self, window: Duration) -> Result<()> {
        let sql = format!("DELETE FROM login_attempts WHERE at < {}", self.engine.db_time("$1"));
        sqlx::query(&sql).bind(-window.as_secs_f64()).execute(&self.writes).await?;
        Ok(())
    }

    /// How many attempts `key` has had in the last `window`.
    pub async fn login_attempts(&self, key: &str, window: Duration) -> Result<usize> {
        let since = self.engine.db_time("$1");
        let q = format!("SELECT count(*) AS n FROM login_attempts WHERE key = $2 AND at >= {since}");
        let n: i64 = sqlx::query(&q).bind(-window.as_secs_f64()).bind(key).fetch_one(&self.writes).await?.get("n");
        Ok(n.max(0) as usize)
    }

    /// Takes back a successful sign-in attempt ([`Store::count_login_attempt`]'s ids).
    pub async fn forgive_login_attempt(&self, ids: &[i64]) -> Result<()> {
        for id in ids {
            sqlx::query("DELETE FROM login_attempts WHERE seq = $1").bind(*id).execute(&self.writes).await?;
        }
        Ok(())
    }

    /// Posts `body` to `replica`'s mailbox and wakes it (at the commit), in one
    /// statement: one round trip, where a transaction of its own took four (a
    /// keystroke typed on another replica waits on it).
    pub async fn post(&self, replica: &str, body: &str) -> Result<()> {
        sqlx::query("WITH posted AS (INSERT INTO relay (replica, body) VALUES ($1, $2)) SELECT pg_notify($3, $4)")
            .bind(replica)
            .bind(body)
            .bind(CHANNEL)
            .bind(format!("m {replica}"))
            .execute(&self.writes)
            .await?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{database, session, store};

    /// Two stores on one database, as two replicas have; None on SQLite (replicas share
    /// PostgreSQL only).
    async fn two_replicas(dir: &tempfile::TempDir) -> Option<(Store, Store)> {
        let db = database(dir);
        let a = Store::open(&db).await.unwrap();
        if !a.is_shared() {
            return None;
        }
        Some((a, Store::open(&db).await.unwrap()))
    }

    #[tokio::test]
    async fn mail_wakes_its_replica_and_is_taken_once_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let Some((a, b)) = two_replicas(&dir).await else { return };
        let mut notes = b.cluster_notes().unwrap();
        a.post("rep_b", "one").await.unwrap();
        a.post("rep_b", "two").await.unwrap();
        a.post("rep_c", "other").await.unwrap();
        let woken = tokio::time::timeout(Duration::from_secs(10), async {
            loop {
                if let Ok(ClusterNote::Mail { replica }) = notes.recv().await {
                    if replica == "rep_b" {
                        return;
                    }
                }
            }
        });
        assert!(woken.await.is_ok(), "the post woke the replica it is for");
        assert_eq!(b.take_mail("rep_b").await.unwrap(), vec!["one", "two"]);
        assert!(b.take_mail("rep_b").await.unwrap().is_empty(), "mail is taken once");
        assert_eq!(b.take_mail("rep_c").await.unwrap(), vec!["other"]);
    }

    #[tokio::test]
    async fn sign_in_attempts_are_limited_across_replicas() {
        let dir = tempfile::tempdir().unwrap();
        let Some((a, b)) = two_replicas(&dir).await else { return };
        let window = Duration::from_secs(60);
        let keys = [("ip:10.0.0.1", 3), ("name:alice", 30)];
        let first = a.count_login_attempt(&keys, window).await.unwrap().unwrap();
        b.count_login_attempt(&keys, window).await.unwrap().unwrap();
        a.count_login_attempt(&keys, window).await.unwrap().unwrap();
        // Three counted on two replicas: the fourth is refused on either.
        let wait = b.count_login_attempt(&keys, window).await.unwrap().expect_err("the address is at its limit");
        assert!(wait > Duration::from_secs(55) && wait <= window, "{wait:?}");
        assert!(a.count_login_attempt(&[("ip:10.0.0.2", 3)], window).await.unwrap().is_ok(), "other addresses are not");
        // A success is forgiven.
        a.forgive_login_attempt(&first).await.unwrap();
        assert!(b.count_login_attempt(&keys, window).await.unwrap().is_ok());
        // A lower limit than there are attempts: the wait is until enough have lapsed.
        let wait = a.count_login_attempt(&[("ip:10.0.0.1", 1)], window).await.unwrap().expect_err("over a lower limit");
        assert!(wait > Duration::from_secs(55) && wait <= window, "{wait:?}");
        // Attempts older than the window no longer count, and are forgotten.
        sqlx::query("UPDATE login_attempts SET at = '2000-01-01T00:00:00.000000Z'").execute(&a.pool).await.unwrap();
        assert!(a.count_login_attempt(&keys, window).await.unwrap().is_ok());
        b.forget_login_attempts(window).await.unwrap();
        let left: i64 = sqlx::query("SELECT count(*) AS n FROM login_attempts").fetch_one(&a.pool).await.unwrap().get("n");
        assert_eq!(left, 2, "the two just counted");
    }

    #[tokio::test]
    async fn viewers_are_summed_over_live_replicas_only_and_the_latest_reading_wins() {
        let (s, _dir) = store().await;
        if !s.is_shared() {
            return; // replicas share PostgreSQL only
        }
        let (ws, _) = s.bootstrap("w", "alice").await.unwrap();
        let id = session(&s, ws).await;
        let alive = Duration::from_secs(30);
        let seen = |a: u32, i: u32, elsewhere: u32| SessionViewers { total: ViewerCount { attached: a, interactive: i }, elsewhere };
        let of = |id| {
            let s = &s;
            async move { s.viewers(&[id], alive, "a").await.unwrap().remove(&id).unwrap_or_default() }
        };
        s.replica_seen("a", "http://a").await.unwrap();
        s.replica_seen("b", "http://b").await.unwrap();
        assert_eq!(of(id).await, seen(0, 0, 0));
        s.set_viewers("a", id, ViewerCount { attached: 2, interactive: 1 }, 1).await.unwrap();
        s.set_viewers("b", id, ViewerCount { attached: 1, interactive: 1 }, 1).await.unwrap();
        assert_eq!(of(id).await, seen(3, 2, 1));
        s.set_viewers("a", id, ViewerCount { attached: 1, interactive: 0 }, 3).await.unwrap();
        // An older reading that arrives late changes nothing.
        s.set_viewers("a", id, ViewerCount { attached: 5, interactive: 5 }, 2).await.unwrap();
        assert_eq!(of(id).await, seen(2, 1, 1));
        s.set_viewers("b", id, ViewerCount::default(), 2).await.unwrap();
        assert_eq!(of(id).await, seen(1, 0, 0));

        let other = session(&s, ws).await;
        s.set_viewers("b", other, ViewerCount { attached: 4, interactive: 0 }, 3).await.unwrap();
        let both = s.viewers(&[id, other], alive, "a").await.unwrap();
        assert_eq!((both[&id], both[&other]), (seen(1, 0, 0), seen(4, 0, 4)));

        // A replica not seen lately no longer counts, and is forgotten with its viewers.
        s.set_viewers("b", id, ViewerCount { attached: 1, interactive: 1 }, 4).await.unwrap();
        sqlx::query("UPDATE replicas SET seen_at = '2000-01-01T00:00:00.000000Z' WHERE id = 'b'").execute(&s.pool).await.unwrap();
        assert_eq!(of(id).await, seen(1, 0, 0));
        s.forget_replicas(Duration::from_secs(3600)).await.unwrap();
        let rows =
            || async { sqlx::query("SELECT count(*) AS n FROM replica_viewers").fetch_one(&s.pool).await.unwrap().get::<i64, _>("n") };
        assert_eq!(rows().await, 1);
        // An ended session's viewers are forgotten too.
        sqlx::query("UPDATE sessions SET outcome = 'released' WHERE id = $1").bind(id.to_string()).execute(&s.pool).await.unwrap();
        s.forget_replicas(Duration::from_secs(3600)).await.unwrap();
        assert_eq!(rows().await, 0);
    }
}

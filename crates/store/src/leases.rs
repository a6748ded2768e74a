//! Leases on the background monitors: one server (of several replicas sharing a
//! PostgreSQL database) holds each at a time and renews it before it expires; when the
//! holder stops renewing (it died, or lost the database), another takes it over.

use std::time::Duration;

use crate::{Result, Store};

impl Store {
    /// Takes lease `name` for `holder` for `ttl` if it is free, lapsed, or already
    /// `holder`'s (a renewal); true if `holder` holds it now. One statement, so two
    /// replicas asking at once cannot both get it.
    /// Times are the database's clock, so replicas whose clocks disagree still agree on
    /// who holds what.
    pub async fn hold_lease(&self, name: &str, holder: &str, ttl: Duration) -> Result<bool> {
        let sql = format!(
            "INSERT INTO leases (name, holder, expires_at) VALUES ($1, $2, {until})
             ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
             WHERE leases.holder = excluded.holder OR leases.expires_at < {now}",
            until = self.engine.db_time("$3"),
            now = self.engine.db_time("0"),
        );
        let n = sqlx::query(&sql).bind(name).bind(holder).bind(ttl.as_secs_f64()).execute(&self.writes).await?.rows_affected();
        Ok(n == 1)
    }

    /// Gives up `holder`'s leases (a clean shutdown), so others take them at once.
    pub async fn release_leases(&self, holder: &str) -> Result<()> {
        sqlx::query("DELETE FROM leases WHERE holder = $1").bind(holder).execute(&self.writes).await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::store;
    use sqlx::Row;

    impl Store {
        /// Every lease not lapsed, as (name, holder), by name.
        async fn leases(&self) -> Vec<(String, String)> {
            let sql = format!("SELECT name, holder FROM leases WHERE expires_at >= {} ORDER BY name", self.engine.db_time("0"));
            let rows = sqlx::query(&sql).fetch_all(&self.pool).await.unwrap();
            rows.iter().map(|r| (r.get("name"), r.get("holder"))).collect()
        }
    }

    #[tokio::test]
    async fn one_holder_at_a_time_and_a_lapsed_lease_moves() {
        let (s, _d) = store().await;
        let long = Duration::from_secs(60);
        assert!(s.hold_lease("scheduler", "a", long).await.unwrap());
        assert!(!s.hold_lease("scheduler", "b", long).await.unwrap(), "held by a");
        assert!(s.hold_lease("scheduler", "a", long).await.unwrap(), "a renews");
        assert!(s.hold_lease("webhooks", "b", long).await.unwrap(), "leases are separate");
        // a stops renewing: once its lease lapses, b takes it.
        assert!(s.hold_lease("retention", "a", Duration::from_millis(50)).await.unwrap());
        assert!(!s.hold_lease("retention", "b", long).await.unwrap());
        tokio::time::sleep(Duration::from_millis(80)).await;
        assert!(s.hold_lease("retention", "b", long).await.unwrap());
        assert!(!s.hold_lease("retention", "a", long).await.unwrap(), "a lost it");
        let held: Vec<(String, String)> = s.leases().await;
        assert_eq!(held, [("retention".into(), "b".into()), ("scheduler".into(), "a".into()), ("webhooks".into(), "b".into())]);
        s.release_leases("a").await.unwrap();
        assert!(s.hold_lease("scheduler", "b", long).await.unwrap(), "released: free at once");
    }

    #[tokio::test]
    async fn racing_replicas_get_one_lease() {
        let (s, _d) = store().await;
        let tries = (0..8).map(|i| {
            let s = s.clone();
            tokio::spawn(async move { s.hold_lease("stale_monitor", &format!("r{i}"), Duration::from_secs(60)).await.unwrap() })
        });
        let mut won = 0;
        for t in tries {
            won += t.await.unwrap() as usize;
        }
        assert_eq!(won, 1);
    }
}

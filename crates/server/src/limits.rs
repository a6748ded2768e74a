//! Sign-in rate limiting, in a sliding window: at most N attempts per client address, and
//! per (address, member); a member whose name has had 10·N attempts from all addresses is
//! slowed, not locked out: only an address that has not tried that name in the window may,
//! once. So nobody can lock a member out, and guessing stays bounded by addresses. An
//! attempt is counted before its password is checked, so a burst of parallel requests
//! cannot slip past the limit; a successful one is then forgiven. In memory on one
//! server (a restart forgets, which only ever lets someone in sooner); in the shared
//! database with replicas, so the limit is not multiplied by their number.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Most keys of one kind (`ip:`, `pair:`, `name:`) tracked; beyond it the key of that kind
/// whose last attempt is oldest is forgotten (bounded memory under a flood, without
/// wiping everyone's counts, and a flood of addresses never evicts a member's count).
const MAX_KEYS: usize = 10_000;

/// Attempts per key in a sliding window.
#[derive(Debug)]
pub struct LoginLimiter {
    max: usize,
    window: Duration,
    /// Attempts by key, in one map per kind of key (so each kind is bounded by itself).
    attempts: Mutex<HashMap<String, HashMap<String, VecDeque<Instant>>>>,
}

/// An attempt counted in memory; [`LoginLimiter::forgive`] takes it back when it succeeded.
#[derive(Debug)]
pub struct Attempt {
    keys: Vec<String>,
    at: Instant,
}

/// An attempt counted where this server counts them; [`forgive`] takes it back.
#[derive(Debug)]
pub(crate) enum Counted {
    /// In this server's memory (one server).
    Here(Attempt),
    /// In the shared database (replicas), by its ids there.
    Shared(Vec<i64>),
}

impl LoginLimiter {
    /// At most `max` attempts per key in `window`.
    pub fn new(max: usize, window: Duration) -> LoginLimiter {
        LoginLimiter { max, window, attempts: Mutex::default() }
    }

    /// Keys with attempts kept (for `/metrics`).
    pub fn keys(&self) -> u64 {
        self.attempts.lock().expect("limiter lock").values().map(|m| m.len() as u64).sum()
    }

    /// Counts an attempt under each of `keys` (`(key, limit)`), unless one of them is at
    /// its limit: then how long until it may try again.
    pub fn attempt(&self, keys: &[(&str, usize)], now: Instant) -> Result<Attempt, Duration> {
        let mut kinds = self.attempts.lock().expect("limiter lock");
        let mut wait = None;
        for (k, limit) in keys {
            let Some(q) = kinds.get_mut(kind(k)).and_then(|m| m.get_mut(*k)) else { continue };
            while q.front().is_some_and(|t| now.duration_since(*t) >= self.window) {
                q.pop_front();
            }
            if q.len() >= *limit {
                let oldest = *q.front().expect("non-empty");
                let w = self.window.saturating_sub(now.duration_since(oldest));
                wait = Some(wait.map_or(w, |x: Duration| x.max(w)));
            }
        }
        if let Some(w) = wait {
            return Err(w.max(Duration::from_secs(1)));
        }
        for (k, _) in keys {
            let map = kinds.entry(kind(k).to_string()).or_default();
            if !map.contains_key(*k) && map.len() >= MAX_KEYS {
                let stalest = map.iter().min_by_key(|(_, q)| q.back().copied()).map(|(k, _)| k.clone());
                if let Some(s) = stalest {
                    map.remove(&s);
                }
            }
            map.entry(k.to_string()).or_default().push_back(now);
        }
        Ok(Attempt { keys: keys.iter().map(|(k, _)| k.to_string()).collect(), at: now })
    }

    /// How many attempts `key` has had in the window.
    pub fn count(&self, key: &str, now: Instant) -> usize {
        let kinds = self.attempts.lock().expect("limiter lock");
        let q = kinds.get(kind(key)).and_then(|m| m.get(key));
        q.map_or(0, |q| q.iter().filter(|t| now.duration_since(**t) < self.window).count())
    }

    /// The sliding window.
    pub fn window(&self) -> Duration {
        self.window
    }

    /// The limit for a client address (the configured one).
    pub fn per_address(&self) -> usize {
        self.max
    }

    /// The limit for one member name across all addresses: higher, so nobody can lock
    /// a member out from one address, while guessing from many stays bounded.
    pub fn per_name(&self) -> usize {
        self.max * 10
    }

    /// Takes back a successful attempt.
    pub fn forgive(&self, attempt: Attempt) {
        let mut kinds = self.attempts.lock().expect("limiter lock");
        for k in &attempt.keys {
            let Some(map) = kinds.get_mut(kind(k)) else { continue };
            if let Some(q) = map.get_mut(k) {
                if let Some(pos) = q.iter().position(|t| *t == attempt.at) {
                    q.remove(pos);
                }
                if q.is_empty() {
                    map.remove(k);
                }
            }
        }
    }
}

/// The kind of a key: what comes before its first `:`.
fn kind(key: &str) -> &str {
    key.split_once(':').map_or(key, |(k, _)| k)
}

/// Counts a sign-in attempt (a password, an invitation code, an enrollment token) from
/// the client at `ip`, and for `member` (the name of the member it is for, when one is
/// found: made-up names would crowd out real ones), before anything is checked; 429 when
/// one of its keys is at its limit.
pub(crate) async fn count_attempt(state: &crate::AppState, ip: std::net::IpAddr, member: Option<&str>) -> Result<Counted, crate::ApiError> {
    let ip_key = format!("ip:{ip}");
    let mut keys = vec![(ip_key.clone(), state.logins.per_address())];
    if let Some(n) = member {
        let name_key = format!("name:{n}");
        let tried = state.topology.attempts(state, &name_key).await?;
        // A name tried from everywhere: each address may still try it once.
        let pair_limit = if tried >= state.logins.per_name() { 1 } else { state.logins.per_address() };
        keys.push((format!("pair:{ip}|{n}"), pair_limit));
        keys.push((name_key, usize::MAX));
    }
    let keys: Vec<(&str, usize)> = keys.iter().map(|(k, l)| (k.as_str(), *l)).collect();
    let limited = |wait: Duration| {
        state.metrics.sign_in_failed(crate::metrics::SignInFailure::RateLimited);
        crate::ApiError::TooManyRequests(wait.as_secs().max(1))
    };
    state.topology.count_attempt(state, &keys).await?.map_err(limited)
}

/// Takes back an attempt that succeeded.
pub(crate) async fn forgive(state: &crate::AppState, counted: Counted) {
    match counted {
        Counted::Here(attempt) => state.logins.forgive(attempt),
        Counted::Shared(ids) => {
            if let Err(e) = state.store.forgive_login_attempt(&ids).await {
                tracing::warn!("taking back a successful sign-in attempt: {e}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_per_key_counting_before_the_check_and_slides() {
        let l = LoginLimiter::new(3, Duration::from_secs(60));
        let t0 = Instant::now();
        // Three attempts in flight at once: the fourth is refused before any finished.
        let held: Vec<Attempt> = (0..3).map(|i| l.attempt(&[("ip:1", 3), ("name:a", 30)], t0 + Duration::from_secs(i)).unwrap()).collect();
        let wait = l.attempt(&[("ip:1", 3), ("name:b", 30)], t0 + Duration::from_secs(10)).expect_err("the address is limited");
        assert_eq!(wait, Duration::from_secs(50));
        assert!(l.attempt(&[("ip:2", 3), ("name:b", 30)], t0 + Duration::from_secs(10)).is_ok(), "others are not");
        assert!(l.attempt(&[("ip:1", 3)], t0 + Duration::from_secs(61)).is_ok(), "the window slides");
        // A success is forgiven.
        let mut held = held;
        l.forgive(held.pop().unwrap());
        assert!(l.attempt(&[("ip:1", 3)], t0 + Duration::from_secs(10)).is_ok());
    }

    #[test]
    fn a_flood_of_addresses_never_evicts_a_members_count() {
        let l = LoginLimiter::new(3, Duration::from_secs(60));
        let t0 = Instant::now();
        for _ in 0..5 {
            l.attempt(&[("name:alice", usize::MAX)], t0).unwrap();
        }
        for i in 0..(MAX_KEYS + 10) {
            let _ = l.attempt(&[(&format!("ip:{i}"), 3)], t0);
        }
        assert_eq!(l.count("name:alice", t0), 5);
        assert_eq!(l.count("name:alice", t0 + Duration::from_secs(61)), 0, "the window slides");
    }

    #[test]
    fn memory_stays_bounded_without_wiping_counts() {
        let l = LoginLimiter::new(3, Duration::from_secs(60));
        let t0 = Instant::now();
        for _ in 0..3 {
            l.attempt(&[("ip:target", 3)], t0 + Duration::from_secs(30)).unwrap();
        }
        for i in 0..(MAX_KEYS + 10) {
            let _ = l.attempt(&[(&format!("ip:{i}"), 3)], t0);
        }
        assert!(l.attempts.lock().unwrap().values().map(HashMap::len).sum::<usize>() <= MAX_KEYS);
        assert!(l.attempt(&[("ip:target", 3)], t0 + Duration::from_secs(31)).is_err(), "the recent key kept its count");
    }
}

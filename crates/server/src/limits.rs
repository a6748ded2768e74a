//! Sign-in rate limiting: at most N failed attempts per key (client address, member name)
//! in a sliding window. In memory: a restart forgets, which only ever lets someone in
//! sooner, never locks anyone out.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Most keys tracked; beyond it the stalest are forgotten (bounded memory under a flood).
const MAX_KEYS: usize = 10_000;

/// Failed attempts per key in a sliding window.
#[derive(Debug)]
pub struct LoginLimiter {
    max: usize,
    window: Duration,
    failures: Mutex<HashMap<String, VecDeque<Instant>>>,
}

impl LoginLimiter {
    /// At most `max` failures per key in `window`.
    pub fn new(max: usize, window: Duration) -> LoginLimiter {
        LoginLimiter { max, window, failures: Mutex::default() }
    }

    /// How long until `keys` may try again; None if they may now.
    pub fn retry_after(&self, keys: &[&str], now: Instant) -> Option<Duration> {
        let mut map = self.failures.lock().expect("limiter lock");
        keys.iter()
            .filter_map(|k| {
                let q = map.get_mut(*k)?;
                while q.front().is_some_and(|t| now.duration_since(*t) >= self.window) {
                    q.pop_front();
                }
                let oldest = *q.front()?;
                (q.len() >= self.max).then(|| self.window.saturating_sub(now.duration_since(oldest)))
            })
            .max()
    }

    /// Records a failed attempt under each of `keys`.
    pub fn failed(&self, keys: &[&str], now: Instant) {
        let mut map = self.failures.lock().expect("limiter lock");
        if map.len() >= MAX_KEYS {
            let window = self.window;
            map.retain(|_, q| q.back().is_some_and(|t| now.duration_since(*t) < window));
            if map.len() >= MAX_KEYS {
                map.clear();
            }
        }
        for k in keys {
            let q = map.entry(k.to_string()).or_default();
            q.push_back(now);
            while q.len() > self.max {
                q.pop_front();
            }
        }
    }

    /// Forgets the failures of `key` (a successful sign-in under that name).
    pub fn succeeded(&self, key: &str) {
        self.failures.lock().expect("limiter lock").remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_per_key_and_slides() {
        let l = LoginLimiter::new(3, Duration::from_secs(60));
        let t0 = Instant::now();
        for i in 0..3 {
            assert_eq!(l.retry_after(&["ip:1", "name:a"], t0), None, "attempt {i}");
            l.failed(&["ip:1", "name:a"], t0 + Duration::from_secs(i));
        }
        let wait = l.retry_after(&["ip:1", "name:b"], t0 + Duration::from_secs(10)).expect("the address is limited");
        assert_eq!(wait, Duration::from_secs(50));
        assert_eq!(l.retry_after(&["ip:2", "name:b"], t0 + Duration::from_secs(10)), None, "others are not");
        assert_eq!(l.retry_after(&["ip:1"], t0 + Duration::from_secs(61)), None, "the window slides");
        l.succeeded("name:a");
        assert_eq!(l.retry_after(&["name:a"], t0 + Duration::from_secs(10)), None);
    }

    #[test]
    fn memory_stays_bounded() {
        let l = LoginLimiter::new(3, Duration::from_secs(60));
        let t0 = Instant::now();
        for i in 0..(MAX_KEYS + 10) {
            l.failed(&[&format!("ip:{i}")], t0);
        }
        assert!(l.failures.lock().unwrap().len() <= MAX_KEYS);
    }
}

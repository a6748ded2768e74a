//! Waiting between failed attempts: a wait that doubles up to a cap, spread by jitter so
//! that many clients of one server do not all try again at the same moment.

use std::time::Duration;

/// How the wait grows with failures in a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// The wait after the first failure; each further failure doubles it.
    pub first: Duration,
    /// The longest wait, however many failures.
    pub cap: Duration,
}

/// Where jitter puts a wait, relative to the backoff's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Jitter {
    /// Up to a quarter shorter.
    QuarterShorter,
    /// Up to a quarter longer.
    QuarterLonger,
    /// Between half and all of it ("full jitter").
    HalfToFull,
}

impl Backoff {
    /// The wait after the `failures`-th failure in a row (1-based; 0 counts as 1), before
    /// jitter.
    pub fn wait(&self, failures: u32) -> Duration {
        let doublings = failures.saturating_sub(1).min(30);
        self.first.saturating_mul(1 << doublings).min(self.cap)
    }

    /// [`Backoff::wait`] spread by `jitter`, with `draw` (0..=1, drawn by the caller)
    /// saying where in its range.
    pub fn jittered(&self, failures: u32, jitter: Jitter, draw: f64) -> Duration {
        let wait = self.wait(failures);
        let draw = draw.clamp(0.0, 1.0);
        match jitter {
            Jitter::QuarterShorter => wait - wait.mul_f64(0.25 * draw),
            Jitter::QuarterLonger => wait + wait.mul_f64(0.25 * draw),
            Jitter::HalfToFull => wait.mul_f64(0.5 + 0.5 * draw),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: fn(u64) -> Duration = Duration::from_millis;

    #[test]
    fn the_wait_doubles_from_the_first_to_the_cap() {
        let b = Backoff { first: MS(200), cap: MS(1000) };
        let waits: Vec<Duration> = (1..=5).map(|n| b.wait(n)).collect();
        assert_eq!(waits, [MS(200), MS(400), MS(800), MS(1000), MS(1000)]);
        assert_eq!(b.wait(0), MS(200));
        assert_eq!(b.wait(u32::MAX), MS(1000), "no overflow however many failures");
    }

    #[test]
    fn jitter_keeps_the_wait_within_its_range() {
        let b = Backoff { first: MS(400), cap: MS(10_000) };
        assert_eq!(b.jittered(1, Jitter::QuarterShorter, 0.0), MS(400));
        assert_eq!(b.jittered(1, Jitter::QuarterShorter, 1.0), MS(300));
        assert_eq!(b.jittered(1, Jitter::QuarterLonger, 1.0), MS(500));
        assert_eq!(b.jittered(2, Jitter::QuarterLonger, 0.5), MS(900));
        assert_eq!(b.jittered(1, Jitter::HalfToFull, 0.0), MS(200));
        assert_eq!(b.jittered(1, Jitter::HalfToFull, 1.0), MS(400));
        assert_eq!(b.jittered(1, Jitter::HalfToFull, 7.0), MS(400), "draws are clamped");
    }
}

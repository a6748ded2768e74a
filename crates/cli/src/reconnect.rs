//! Staying connected across a server restart: capped, jittered backoff between attempts,
//! and a one-line status on stderr while reconnecting (as the web terminal's pill).

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use drover_core::backoff::{self, Jitter};

/// The wait after the first failed attempt.
const FIRST_DELAY: Duration = Duration::from_millis(500);
/// The longest wait between attempts.
const DELAY_CAP: Duration = Duration::from_secs(5);
/// How the waits grow.
const WAITS: backoff::Backoff = backoff::Backoff { first: FIRST_DELAY, cap: DELAY_CAP };
/// How long attempts go on failing before giving up.
pub const GIVE_UP_AFTER: Duration = Duration::from_secs(600);

/// Attempts since the connection was last good.
#[derive(Debug, Default)]
pub struct Backoff {
    attempt: u32,
    since: Option<Instant>,
}

impl Backoff {
    /// The connection works again.
    pub fn reset(&mut self) {
        *self = Backoff::default();
    }

    /// Counts a failed attempt: the wait before the next one, or None once attempts
    /// have failed for [`GIVE_UP_AFTER`].
    pub fn failed(&mut self) -> Option<Duration> {
        let since = *self.since.get_or_insert_with(Instant::now);
        if since.elapsed() >= GIVE_UP_AFTER {
            return None;
        }
        self.attempt += 1;
        // Drawn from the process and the attempt, so many clients of one restarted
        // server spread out.
        let draw = f64::from(std::process::id() % 97 + self.attempt % 7) / 103.0;
        Some(WAITS.jittered(self.attempt, Jitter::QuarterShorter, draw))
    }

    /// Failed attempts so far.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }
}

/// Where the status line goes.
#[derive(Debug, Clone, Copy)]
pub enum Place {
    /// Its own line on stderr, rewritten in place on a terminal.
    Line,
    /// The bottom row of a raw-mode terminal (`rows` tall), drawn over and put back
    /// with the cursor saved and restored; the next screen snapshot repaints it.
    BottomRow(u16),
}

/// The reconnecting status on stderr.
#[derive(Debug)]
pub struct Status {
    place: Place,
    tty: bool,
    shown: bool,
}

impl Status {
    /// A status line at `place`.
    pub fn new(place: Place) -> Status {
        Status { place, tty: std::io::stderr().is_terminal(), shown: false }
    }

    /// Says the connection is down and when the next attempt is.
    pub fn reconnecting(&mut self, why: &str, attempt: u32, wait: Duration) {
        let text = format!(
            "[drover: connection lost ({}); reconnecting, attempt {attempt} in {:.1} s]",
            crate::table::sanitize(why),
            wait.as_secs_f64()
        );
        let mut err = std::io::stderr().lock();
        let _ = match (self.place, self.tty) {
            (Place::BottomRow(rows), true) => write!(err, "\x1b7\x1b[{rows};1H\x1b[2K\x1b[7m{text}\x1b[0m\x1b8"),
            (Place::Line, true) => write!(err, "\r\x1b[2K{text}"),
            // Not a terminal: one line when it drops, not one per attempt.
            (_, false) if self.shown => Ok(()),
            (_, false) => writeln!(err, "{text}"),
        };
        let _ = err.flush();
        self.shown = true;
    }

    /// Clears the status once connected again.
    pub fn connected(&mut self) {
        if !std::mem::take(&mut self.shown) {
            return;
        }
        let mut err = std::io::stderr().lock();
        let _ = match (self.place, self.tty) {
            (Place::BottomRow(rows), true) => write!(err, "\x1b7\x1b[{rows};1H\x1b[2K\x1b8"),
            (Place::Line, true) => write!(err, "\r\x1b[2K"),
            (Place::BottomRow(_), false) => write!(err, "[drover: reconnected]\r\n"),
            (Place::Line, false) => writeln!(err, "[drover: reconnected]"),
        };
        let _ = err.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_grow_to_the_cap_and_start_over_when_connected() {
        let mut b = Backoff::default();
        let waits: Vec<Duration> = (0..8).map(|_| b.failed().unwrap()).collect();
        assert!(waits[0] <= FIRST_DELAY && waits[0] >= FIRST_DELAY / 2);
        assert!(waits.windows(2).take(3).all(|w| w[0] < w[1]), "{waits:?}");
        assert!(waits.iter().all(|w| *w <= DELAY_CAP), "{waits:?}");
        assert_eq!(b.attempt(), 8);
        b.reset();
        assert_eq!(b.attempt(), 0);
    }
}

//! Waiting for a quiet machine before a timed run, so that what an earlier run left
//! behind (a shim's screen catching up, the server storing output, a browser closing)
//! does not fall on the next one, whichever side of a comparison that is.

use std::time::{Duration, Instant};

/// The share of the machine's CPU time that must be idle over one window.
const IDLE: f64 = 0.85;
/// How long each look at the machine lasts.
const WINDOW: Duration = Duration::from_millis(250);

/// Waits until the machine was at least 85% idle over a quarter of a second, or until
/// `max` has passed; returns whether it got quiet. Where `/proc/stat` cannot be read,
/// returns false at once.
pub fn wait_for_quiet(max: Duration) -> bool {
    let deadline = Instant::now() + max;
    let Some(mut before) = cpu_times() else { return false };
    while Instant::now() < deadline {
        std::thread::sleep(WINDOW);
        let Some(now) = cpu_times() else { return false };
        let (busy, idle) = (now.0.saturating_sub(before.0), now.1.saturating_sub(before.1));
        if busy + idle > 0 && idle as f64 / (busy + idle) as f64 >= IDLE {
            return true;
        }
        before = now;
    }
    false
}

/// The machine's busy and idle time so far, in clock ticks, from `/proc/stat`.
fn cpu_times() -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    parse_cpu_line(stat.lines().next()?)
}

/// Busy and idle ticks from `/proc/stat`'s first line (`cpu user nice system idle
/// iowait irq softirq steal …`); idle counts `iowait`.
fn parse_cpu_line(line: &str) -> Option<(u64, u64)> {
    let mut fields = line.split_whitespace();
    if fields.next()? != "cpu" {
        return None;
    }
    let ticks: Vec<u64> = fields.take(8).map(|f| f.parse().ok()).collect::<Option<_>>()?;
    let idle = ticks.get(3)? + ticks.get(4)?;
    Some((ticks.iter().sum::<u64>() - idle, idle))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cpu_line_splits_into_busy_and_idle_ticks() {
        assert_eq!(parse_cpu_line("cpu  10 1 5 100 4 2 3 0 0 0"), Some((21, 104)));
        assert_eq!(parse_cpu_line("cpu0 10 1 5 100 4 2 3 0"), None);
        assert_eq!(parse_cpu_line("cpu 10 x"), None);
    }
}

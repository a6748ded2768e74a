//! When a live session goes quiet (seed 001): the two warning signs a monitor looks for,
//! and what a recheck makes of them. A flag is a warning, not a verdict: a session is
//! marked lost only when it is still flagged at the next check.

use std::time::Duration;

/// Why a live session was flagged stale.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StaleFlag {
    /// Its device has not reported in for the silent window.
    DeviceSilent,
    /// It is still running, though its sandbox finished longer ago than the grace.
    SandboxRetired,
    /// An admin revoked its device's credential: the device is refused.
    DeviceRevoked,
}

impl StaleFlag {
    /// Every flag.
    pub const ALL: [StaleFlag; 3] = [StaleFlag::DeviceSilent, StaleFlag::SandboxRetired, StaleFlag::DeviceRevoked];

    /// The identifier used in the API and storage.
    pub fn as_str(self) -> &'static str {
        match self {
            StaleFlag::DeviceSilent => "device_silent",
            StaleFlag::SandboxRetired => "sandbox_retired",
            StaleFlag::DeviceRevoked => "device_revoked",
        }
    }

    /// Parses the identifier.
    pub fn parse(s: &str) -> Option<StaleFlag> {
        StaleFlag::ALL.into_iter().find(|f| f.as_str() == s)
    }

    /// The warning badge's words.
    pub fn label(self) -> &'static str {
        match self {
            StaleFlag::DeviceSilent => "Device silent",
            StaleFlag::SandboxRetired => "Sandbox retired",
            StaleFlag::DeviceRevoked => "Device revoked",
        }
    }

    /// The badge's one-line explanation.
    pub fn explanation(self) -> &'static str {
        match self {
            StaleFlag::DeviceSilent => {
                "The session's device hasn't reported in for the silent window; it is marked lost if still silent at the next check."
            }
            StaleFlag::SandboxRetired => {
                "The session is still running, though its sandbox has already finished; it is marked lost at the next check."
            }
            StaleFlag::DeviceRevoked => {
                "An admin revoked the session's device; it can no longer report, and the session is marked lost at the next check."
            }
        }
    }

    /// The reason recorded when a session still flagged is marked lost.
    pub fn lost_reason(self) -> &'static str {
        match self {
            StaleFlag::DeviceSilent => "the device dropped off and missed its check-ins",
            StaleFlag::SandboxRetired => "the session was still running after its sandbox had finished",
            StaleFlag::DeviceRevoked => "the device's credential was revoked",
        }
    }
}

/// The windows the checks use (DESIGN.md's defaults; every one configurable).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LivenessRules {
    /// No contact from the device for this long flags its sessions Device silent; a new
    /// session gets the same window from its start.
    pub device_silent_after: Duration,
    /// A session still running this long after its sandbox finished is Sandbox retired.
    pub sandbox_retired_grace: Duration,
}

impl Default for LivenessRules {
    fn default() -> Self {
        LivenessRules { device_silent_after: Duration::from_secs(15 * 60), sandbox_retired_grace: Duration::from_secs(5 * 60) }
    }
}

/// What the monitor knows about one live session at a check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Observed {
    /// Time since the later of the device's last contact and the session's creation.
    pub since_contact: Duration,
    /// Time since its sandbox finished, if it has.
    pub sandbox_finished_for: Option<Duration>,
    /// Its device's credential was revoked.
    pub device_revoked: bool,
}

/// The flag a session earns now, if any. A silent device comes first: nobody has seen
/// its session running, so it cannot be said to outlive its sandbox. Sandbox retired
/// does not depend on the session's own reports, so contact alone does not clear it.
pub fn flag(rules: &LivenessRules, seen: &Observed) -> Option<StaleFlag> {
    if seen.device_revoked {
        return Some(StaleFlag::DeviceRevoked);
    }
    if seen.since_contact >= rules.device_silent_after {
        return Some(StaleFlag::DeviceSilent);
    }
    seen.sandbox_finished_for.is_some_and(|d| d >= rules.sandbox_retired_grace).then_some(StaleFlag::SandboxRetired)
}

/// Whether a task's live run has stalled: nothing printed and no evidence of progress
/// (a commit, a hand-off, a comment, a blocker or question) for `stall_after` — counting
/// from its start when it never made any — while it is not waiting on a person (an open
/// question or blocker on its task). A stalled run is replaced with a fresh one.
pub fn stalled(
    stall_after: Duration,
    since_output: Duration,
    since_progress: Option<Duration>,
    since_start: Duration,
    waiting_on_person: bool,
) -> bool {
    !waiting_on_person && since_output >= stall_after && since_progress.unwrap_or(since_start) >= stall_after && since_start >= stall_after
}

/// The reason recorded when a stalled run is replaced.
pub fn stalled_reason(stall_after: Duration) -> String {
    format!("the session had stalled (no output or progress for {}) and was replaced with a fresh one", window(stall_after))
}

/// Whether a task-free session is idle-parked: with parking on (`park_after`), nothing
/// printed, typed or watched for that long (`idle_for` None: someone watches it now).
/// A task's run is never parked (the stall monitor looks after it).
pub fn idle_parked(park_after: Option<Duration>, task_run: bool, idle_for: Option<Duration>) -> bool {
    match (park_after, idle_for) {
        (Some(after), Some(idle)) => !task_run && idle >= after,
        _ => false,
    }
}

/// A window in words: `24 hours`, `90 minutes`, `45 seconds`.
fn window(d: Duration) -> String {
    let secs = d.as_secs();
    match secs {
        s if s >= 2 * 3600 && s % 3600 == 0 => format!("{} hours", s / 3600),
        s if s >= 120 => format!("{} minutes", s / 60),
        s => format!("{s} seconds"),
    }
}

/// The reason recorded when an idle session is parked (it ends `released`).
pub fn parked_reason(park_after: Duration) -> String {
    format!("idle-parked after {} with no output, input or viewer", window(park_after))
}

/// What a check does with a live session, given the flag it had and the one it earns now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Not flagged (a Device silent flag clears once the device reports in again).
    Clear,
    /// Flagged: shown in "Sessions needing attention".
    Flag(StaleFlag),
    /// Still flagged at the recheck: mark it lost with the flag's reason.
    Lost(StaleFlag),
}

/// Applies a check.
pub fn recheck(previous: Option<StaleFlag>, now: Option<StaleFlag>) -> Verdict {
    match (previous, now) {
        (_, None) => Verdict::Clear,
        (None, Some(f)) => Verdict::Flag(f),
        (Some(_), Some(f)) => Verdict::Lost(f),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: Duration = Duration::from_secs(60);

    fn seen(contact_min: u32, finished_min: Option<u32>) -> Observed {
        Observed { since_contact: MIN * contact_min, sandbox_finished_for: finished_min.map(|m| MIN * m), device_revoked: false }
    }

    #[test]
    fn only_an_unwatched_quiet_task_free_session_is_parked() {
        let day = Duration::from_secs(24 * 3600);
        assert!(idle_parked(Some(day), false, Some(day)));
        assert!(!idle_parked(Some(day), false, Some(day - Duration::from_secs(1))), "not idle long enough");
        assert!(!idle_parked(Some(day), false, None), "someone is watching");
        assert!(!idle_parked(Some(day), true, Some(day * 2)), "a task's run is the stall monitor's");
        assert!(!idle_parked(None, false, Some(day * 30)), "parking is off");
        assert_eq!(parked_reason(day), "idle-parked after 24 hours with no output, input or viewer");
        assert_eq!(parked_reason(Duration::from_secs(3)), "idle-parked after 3 seconds with no output, input or viewer");
        assert_eq!(
            stalled_reason(Duration::from_secs(1800)),
            "the session had stalled (no output or progress for 30 minutes) and was replaced with a fresh one"
        );
    }

    #[test]
    fn the_seeds_windows() {
        let r = LivenessRules::default();
        assert_eq!(flag(&r, &seen(14, None)), None);
        assert_eq!(flag(&r, &seen(15, None)), Some(StaleFlag::DeviceSilent));
        assert_eq!(flag(&r, &seen(0, Some(4))), None, "an ordinary teardown never trips it");
        assert_eq!(flag(&r, &seen(0, Some(5))), Some(StaleFlag::SandboxRetired));
        assert_eq!(flag(&r, &seen(30, Some(5))), Some(StaleFlag::DeviceSilent), "a silent device: nobody saw it outlive its sandbox");
        assert_eq!(flag(&r, &seen(1, Some(60))), Some(StaleFlag::SandboxRetired), "contact does not clear it");
        let revoked = Observed { device_revoked: true, ..seen(0, None) };
        assert_eq!(flag(&r, &revoked), Some(StaleFlag::DeviceRevoked), "flagged at once, whatever the contact");
    }

    #[test]
    fn a_flag_is_a_warning_and_the_recheck_decides() {
        assert_eq!(recheck(None, None), Verdict::Clear);
        assert_eq!(recheck(None, Some(StaleFlag::DeviceSilent)), Verdict::Flag(StaleFlag::DeviceSilent));
        // The device reported in again before the next check: the flag clears.
        assert_eq!(recheck(Some(StaleFlag::DeviceSilent), None), Verdict::Clear);
        assert_eq!(recheck(Some(StaleFlag::DeviceSilent), Some(StaleFlag::DeviceSilent)), Verdict::Lost(StaleFlag::DeviceSilent));
        assert_eq!(recheck(Some(StaleFlag::DeviceSilent), Some(StaleFlag::SandboxRetired)), Verdict::Lost(StaleFlag::SandboxRetired));
    }

    #[test]
    fn a_run_stalls_only_when_quiet_without_progress_and_not_waiting_on_a_person() {
        let w = MIN * 30;
        assert!(stalled(w, MIN * 31, None, MIN * 40, false));
        assert!(!stalled(w, MIN * 5, None, MIN * 40, false), "it printed recently");
        assert!(!stalled(w, MIN * 31, Some(MIN * 2), MIN * 40, false), "it made progress recently");
        assert!(stalled(w, MIN * 31, Some(MIN * 35), MIN * 40, false));
        assert!(!stalled(w, MIN * 31, None, MIN * 40, true), "it waits for an answer");
        assert!(!stalled(w, MIN * 31, None, MIN * 10, false), "too young");
        assert_eq!(stalled_reason(w), "the session had stalled (no output or progress for 30 minutes) and was replaced with a fresh one");
        assert!(stalled_reason(Duration::from_secs(2)).contains("2 seconds"));
    }

    #[test]
    fn words_round_trip() {
        for f in StaleFlag::ALL {
            assert_eq!(StaleFlag::parse(f.as_str()), Some(f));
        }
        assert_eq!(StaleFlag::parse("silent"), None);
    }

    #[test]
    fn each_flag_has_its_own_words() {
        for (i, a) in StaleFlag::ALL.iter().enumerate() {
            for b in &StaleFlag::ALL[i + 1..] {
                assert_ne!(a.label(), b.label());
                assert_ne!(a.lost_reason(), b.lost_reason());
                assert_ne!(a.explanation(), b.explanation());
            }
        }
    }
}

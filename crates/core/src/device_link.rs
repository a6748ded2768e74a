//! What a device's link may say (DESIGN.md, "Trust model": a device credential reaches
//! its own sessions only). Every message that names a session is checked against the
//! session's device; output must continue where the server's copy ends, with a bounded
//! gap, so a forged offset can neither overwrite what is stored nor make the server
//! allocate the gap. Pure: the server's link keeps one [`LinkGuard`] per connection and
//! tells it what the store says of each session it has not seen yet.

use std::collections::HashMap;

use crate::ids::SessionId;

/// The largest gap of lost output a device may ask the server to fill, whatever the time.
pub const MAX_OUTPUT_GAP: u64 = 16 << 20;

/// The fastest a terminal produces output, in bytes per second, with a wide margin over
/// what a bare PTY moves (the throughput benchmark measures it).
pub const MAX_OUTPUT_RATE: u64 = 1 << 30;

/// Output a session may have printed before any time passed (its first screens).
pub const OUTPUT_SLACK: u64 = 64 << 20;

/// What the store says of a session the link has not seen yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owner {
    /// It runs on this link's device: output it holds so far, and microseconds since it
    /// was created (by the server's clock).
    This {
        /// The committed output length.
        stored: u64,
        /// Microseconds since the session was created.
        age_micros: u64,
        /// Once it has ended: the length of its whole output, as its end reported it.
        /// Nothing is added past it (a finished recording is what was printed).
        end: Option<u64>,
    },
    /// It belongs to another device, or does not exist.
    Other,
}

/// What the link does with a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Take it.
    Take,
    /// The guard has not seen this session: look its owner up and [`LinkGuard::learn`] it.
    LookUp,
    /// Drop it and log why; the link stays open.
    Refuse(String),
    /// Drop it and close the link (a second offence, or output the device cannot have
    /// produced: when it reconnects it is told to resume from the stored offset).
    Close(String),
}

/// What one session's messages on this link are checked against.
#[derive(Debug, Clone, Copy)]
enum Known {
    /// Ours: the end of the output seen so far, and the age it was learnt at.
    Ours { next: u64, age_micros: u64, learnt_at_micros: u64, end: Option<u64> },
    /// Another device's (or no such session).
    Theirs,
}

/// One device link's view of which sessions it may speak for, and its offences.
#[derive(Debug, Default)]
pub struct LinkGuard {
    known: HashMap<SessionId, Known>,
    offences: u32,
}

impl LinkGuard {
    /// A guard for a new link.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records what the store says of `session`; `now_micros` is the link's clock (any
    /// monotonic microsecond count), used to age the session from here on.
    pub fn learn(&mut self, session: SessionId, owner: Owner, now_micros: u64) {
        let known = match owner {
            Owner::This { stored, age_micros, end } => Known::Ours { next: stored, age_micros, learnt_at_micros: now_micros, end },
            Owner::Other => Known::Theirs,
        };
        self.known.insert(session, known);
    }

    /// Forgets `session` (it ended): a later message is looked up again.
    pub fn forget(&mut self, session: SessionId) {
        self.known.remove(&session);
    }

    /// Whether the guard holds none.
    pub fn is_empty(&self) -> bool {
        self.known.is_empty()
    }

    /// A message other than output that names `session` (an end, a resize, a recording
    /// error, a start, usage, a commit, skills).
    pub fn check(&mut self, session: SessionId) -> Verdict {
        match self.known.get(&session) {
            None => Verdict::LookUp,
            Some(Known::Ours { .. }) => Verdict::Take,
            Some(Known::Theirs) => self.offence(format!("session {session} is not on this device")),
        }
    }

    /// Output of `len` bytes at `offset` for `session`, at `now_micros` on the link's clock.
    pub fn check_output(&mut self, session: SessionId, offset: u64, len: u64, now_micros: u64) -> Verdict {
        let (next, age_micros, learnt_at_micros, last) = match self.known.get(&session) {
            None => return Verdict::LookUp,
            Some(Known::Theirs) => return self.offence(format!("session {session} is not on this device")),
            Some(Known::Ours { next, age_micros, learnt_at_micros, end }) => (*next, *age_micros, *learnt_at_micros, *end),
        };
        let Some(end) = offset.checked_add(len) else {
            return Verdict::Close(format!("output for session {session} at offset {offset} runs past the end of any stream"));
        };
        if let Some(last) = last.filter(|last| end > *last) {
            return self.offence(format!("output for session {session} reaches offset {end}, past the {last} bytes it ended with"));
        }
        if offset > next && offset - next > MAX_OUTPUT_GAP {
            return Verdict::Close(format!(
                "output for session {session} starts at {offset}, {} bytes past the {next} it holds (at most {MAX_OUTPUT_GAP} may be lost)",
                offset - next
            ));
        }
        let age = age_micros.saturating_add(now_micros.saturating_sub(learnt_at_micros));
        let possible = possible_output(age);
        if end > possible {
            return Verdict::Close(format!(
                "output for session {session} reaches offset {end}, more than it can have printed in its {} s",
                age / 1_000_000
            ));
        }
        if end > next {
            self.known.insert(session, Known::Ours { next: end, age_micros, learnt_at_micros, end: last });
        }
        Verdict::Take
    }

    fn offence(&mut self, reason: String) -> Verdict {
        self.offences += 1;
        if self.offences >= 2 {
            Verdict::Close(format!("{reason} (a second message for a session of another device)"))
        } else {
            Verdict::Refuse(reason)
        }
    }
}

/// The most output a session `age_micros` old can have printed.
pub fn possible_output(age_micros: u64) -> u64 {
    OUTPUT_SLACK.saturating_add((age_micros as u128 * MAX_OUTPUT_RATE as u128 / 1_000_000).min(u64::MAX as u128) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids() -> (SessionId, SessionId) {
        (SessionId::new(), SessionId::new())
    }

    #[test]
    fn unknown_sessions_are_looked_up_first() {
        let (a, _) = ids();
        let mut g = LinkGuard::new();
        assert_eq!(g.check(a), Verdict::LookUp);
        assert_eq!(g.check_output(a, 0, 10, 0), Verdict::LookUp);
        g.learn(a, Owner::This { stored: 0, age_micros: 0, end: None }, 0);
        assert_eq!(g.check(a), Verdict::Take);
        assert_eq!(g.check_output(a, 0, 10, 0), Verdict::Take);
    }

    #[test]
    fn another_devices_session_is_refused_once_then_the_link_is_closed() {
        let (a, b) = ids();
        let mut g = LinkGuard::new();
        g.learn(a, Owner::Other, 0);
        g.learn(b, Owner::Other, 0);
        assert!(matches!(g.check_output(a, 0, 5, 0), Verdict::Refuse(_)));
        assert!(matches!(g.check(b), Verdict::Close(_)));
    }

    #[test]
    fn nothing_is_added_to_an_ended_session_past_its_final_offset() {
        let (a, _) = ids();
        let mut g = LinkGuard::new();
        g.learn(a, Owner::This { stored: 80, age_micros: 3_600_000_000, end: Some(100) }, 0);
        assert_eq!(g.check_output(a, 80, 20, 0), Verdict::Take, "its last bytes, resent after the end");
        assert!(matches!(g.check_output(a, 100, 1, 0), Verdict::Refuse(_)), "one byte past it");
        assert!(matches!(g.check_output(a, 90, 20, 0), Verdict::Close(_)), "a second offence closes the link");
    }

    #[test]
    fn a_gap_past_the_cap_or_past_what_can_have_been_printed_closes_the_link() {
        let (a, _) = ids();
        let mut g = LinkGuard::new();
        g.learn(a, Owner::This { stored: 100, age_micros: 3_600_000_000, end: None }, 0);
        assert_eq!(g.check_output(a, 100, 10, 0), Verdict::Take);
        assert_eq!(g.check_output(a, 50, 100, 0), Verdict::Take, "a resent overlap is fine");
        assert_eq!(g.check_output(a, 110 + MAX_OUTPUT_GAP, 1, 0), Verdict::Take, "a gap up to the cap");
        assert!(matches!(g.check_output(a, 111 + 2 * MAX_OUTPUT_GAP + 1, 1, 0), Verdict::Close(_)));
        assert!(matches!(g.check_output(a, 0x4000_0000_0000_0000, 1, 0), Verdict::Close(_)));
        assert!(matches!(g.check_output(a, u64::MAX, 2, 0), Verdict::Close(_)));
    }

    #[test]
    fn a_young_session_cannot_claim_more_than_it_can_have_printed() {
        let (a, _) = ids();
        let mut g = LinkGuard::new();
        g.learn(a, Owner::This { stored: 0, age_micros: 0, end: None }, 0);
        // Contiguous output far beyond the slack, with no time passed.
        let mut next = 0;
        let step = MAX_OUTPUT_GAP;
        let mut closed = false;
        for _ in 0..(OUTPUT_SLACK / step + 2) {
            match g.check_output(a, next, step, 0) {
                Verdict::Take => next += step,
                Verdict::Close(_) => {
                    closed = true;
                    break;
                }
                v => panic!("{v:?}"),
            }
        }
        assert!(closed && next <= OUTPUT_SLACK);
        // With time, more is possible.
        assert_eq!(g.check_output(a, next, step, 1_000_000), Verdict::Take);
    }

    #[test]
    fn possible_output_grows_with_age_and_never_overflows() {
        assert_eq!(possible_output(0), OUTPUT_SLACK);
        assert!(possible_output(1_000_000) > possible_output(0));
        assert_eq!(possible_output(u64::MAX), u64::MAX);
    }

    proptest::proptest! {
        /// Messages from two devices, each owning two of four sessions, in any order and
        /// with any offsets: nothing for the other device's session is ever taken, its
        /// second such message closes the link, and no output is taken past the allowed
        /// gap or past what its session can have printed.
        #[test]
        fn two_devices_never_touch_each_others_sessions(ops in proptest::collection::vec((0u8..=255, 0u8..=255, proptest::num::u64::ANY), 0..200)) {
            let sessions: [SessionId; 4] = std::array::from_fn(|_| SessionId::new());
            let mut gates = [LinkGuard::new(), LinkGuard::new()];
            let mut seen = [[0u64; 4]; 2];
            let mut offences = [0u32; 2];
            let mut closed = [false; 2];
            let mut now = 0u64;
            for (a, b, raw) in ops {
                let (device, s, other_kind) = ((a & 1) as usize, (a >> 1) as usize % 4, a & 0x80 != 0);
                if closed[device] {
                    continue;
                }
                now += u64::from(b) * 1000;
                let (offset, len) = (raw >> (b % 64), u64::from(b));
                let ask = |g: &mut LinkGuard| if other_kind { g.check(sessions[s]) } else { g.check_output(sessions[s], offset, len, now) };
                let mut verdict = ask(&mut gates[device]);
                if verdict == Verdict::LookUp {
                    let owner = if s % 2 == device { Owner::This { stored: 0, age_micros: 0, end: None } } else { Owner::Other };
                    gates[device].learn(sessions[s], owner, now);
                    verdict = ask(&mut gates[device]);
                }
                if s % 2 != device {
                    offences[device] += 1;
                    proptest::prop_assert_ne!(&verdict, &Verdict::Take);
                    if offences[device] >= 2 {
                        proptest::prop_assert!(matches!(verdict, Verdict::Close(_)));
                    }
                } else if verdict == Verdict::Take && !other_kind {
                    proptest::prop_assert!(offset <= seen[device][s].saturating_add(MAX_OUTPUT_GAP));
                    let end = offset.checked_add(len);
                    proptest::prop_assert!(end.is_some_and(|e| e <= possible_output(now)));
                    seen[device][s] = seen[device][s].max(end.unwrap_or(0));
                }
                closed[device] |= matches!(verdict, Verdict::Close(_));
            }
        }
    }

    #[test]
    fn a_forgotten_session_is_looked_up_again() {
        let (a, _) = ids();
        let mut g = LinkGuard::new();
        g.learn(a, Owner::This { stored: 0, age_micros: 0, end: None }, 0);
        g.forget(a);
        assert!(g.is_empty());
        assert_eq!(g.check(a), Verdict::LookUp);
    }
}

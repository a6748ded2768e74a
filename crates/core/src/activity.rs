//! The kinds of events in the activity record and the words the feed shows for them.

use serde::{Deserialize, Serialize};

/// What an event records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// A session was started (requested).
    SessionStarted,
    /// A session ended on its own or failed.
    SessionEnded,
    /// An operator stopped a session ("session killed"; outcome released).
    SessionKilled,
    /// Contact with a session was lost.
    SessionConnectionLost,
    /// Text sent through the audited Send path.
    InputSent,
    /// A session's recording could not be written (e.g. disk full); the session goes on.
    RecordingError,
}

impl EventKind {
    /// Every kind.
    pub const ALL: [EventKind; 6] = [
        EventKind::SessionStarted,
        EventKind::SessionEnded,
        EventKind::SessionKilled,
        EventKind::SessionConnectionLost,
        EventKind::InputSent,
        EventKind::RecordingError,
    ];

    /// The identifier used in the API and storage.
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::SessionStarted => "session_started",
            EventKind::SessionEnded => "session_ended",
            EventKind::SessionKilled => "session_killed",
            EventKind::SessionConnectionLost => "session_connection_lost",
            EventKind::InputSent => "input_sent",
            EventKind::RecordingError => "recording_error",
        }
    }

    /// Parses the identifier.
    pub fn parse(s: &str) -> Option<EventKind> {
        EventKind::ALL.into_iter().find(|k| k.as_str() == s)
    }

    /// The words the activity feed shows.
    pub fn label(self) -> &'static str {
        match self {
            EventKind::SessionStarted => "session started",
            EventKind::SessionEnded => "session ended",
            EventKind::SessionKilled => "session killed",
            EventKind::SessionConnectionLost => "session connection lost",
            EventKind::InputSent => "input sent (audited)",
            EventKind::RecordingError => "recording error",
        }
    }
}

/// The activity entry for a run that ended: killed by Stop, lost, or ended.
pub fn ending_kind(outcome: crate::Outcome, killed: bool) -> EventKind {
    match (outcome, killed) {
        (_, true) => EventKind::SessionKilled,
        (crate::Outcome::Lost, false) => EventKind::SessionConnectionLost,
        _ => EventKind::SessionEnded,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Outcome;

    #[test]
    fn round_trip_and_labels() {
        for k in EventKind::ALL {
            assert_eq!(EventKind::parse(k.as_str()), Some(k));
        }
        assert_eq!(EventKind::SessionKilled.label(), "session killed");
    }

    #[test]
    fn ending_kinds_follow_the_seed() {
        assert_eq!(ending_kind(Outcome::Released, true), EventKind::SessionKilled);
        assert_eq!(ending_kind(Outcome::Lost, false), EventKind::SessionConnectionLost);
        assert_eq!(ending_kind(Outcome::Failed, false), EventKind::SessionEnded);
        assert_eq!(ending_kind(Outcome::Incomplete, false), EventKind::SessionEnded);
    }
}

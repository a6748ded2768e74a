//! Webhooks (Standard Webhooks): which activity events a workspace can subscribe to,
//! and when a failed delivery is tried again.

use std::time::Duration;

use crate::activity::EventKind;
use crate::backoff::{Backoff, Jitter};

/// An event type an endpoint subscribes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WebhookEvent {
    /// A session was started.
    SessionStarted,
    /// A session ended (completed, released, incomplete or failed).
    SessionEnded,
    /// A session was marked lost.
    SessionLost,
    /// A task's stage was handed off and the task moved on.
    TaskStageAdvanced,
    /// An agent asked a human a question and waits for the answer.
    TaskInputRequested,
    /// A task finished (done, cancelled or abandoned).
    TaskFinished,
    /// A spend cap was reached and the run spending was stopped.
    SpendCapReached,
    /// A task was flagged for a person: its stage could not be set up, or its runs
    /// keep ending without a hand-off.
    TaskNeedsPerson,
    /// A run began waiting on a person: a held tool call, a finished turn, or a guess
    /// from a still screen (with the kind).
    SessionNeedsInput,
}

impl WebhookEvent {
    /// Every type.
    pub const ALL: [WebhookEvent; 9] = [
        WebhookEvent::SessionStarted,
        WebhookEvent::SessionEnded,
        WebhookEvent::SessionLost,
        WebhookEvent::TaskStageAdvanced,
        WebhookEvent::TaskInputRequested,
        WebhookEvent::TaskFinished,
        WebhookEvent::SpendCapReached,
        WebhookEvent::TaskNeedsPerson,
        WebhookEvent::SessionNeedsInput,
    ];

    /// The type's name in payloads and subscriptions (`session.lost`).
    pub fn as_str(self) -> &'static str {
        match self {
            WebhookEvent::SessionStarted => "session.started",
            WebhookEvent::SessionEnded => "session.ended",
            WebhookEvent::SessionLost => "session.lost",
            WebhookEvent::TaskStageAdvanced => "task.stage_advanced",
            WebhookEvent::TaskInputRequested => "task.input_requested",
            WebhookEvent::TaskFinished => "task.finished",
            WebhookEvent::SpendCapReached => "spend.cap_reached",
            WebhookEvent::TaskNeedsPerson => "task.needs_person",
            WebhookEvent::SessionNeedsInput => "session.needs_input",
        }
    }

    /// Parses a type's name.
    pub fn parse(s: &str) -> Option<WebhookEvent> {
        WebhookEvent::ALL.into_iter().find(|e| e.as_str() == s)
    }

    /// The webhook an activity event fires, if any.
    pub fn for_event(kind: EventKind) -> Option<WebhookEvent> {
        match kind {
            EventKind::SessionStarted => Some(WebhookEvent::SessionStarted),
            EventKind::SessionEnded | EventKind::SessionKilled => Some(WebhookEvent::SessionEnded),
            EventKind::SessionConnectionLost => Some(WebhookEvent::SessionLost),
            EventKind::StageAdvanced => Some(WebhookEvent::TaskStageAdvanced),
            EventKind::QuestionAsked => Some(WebhookEvent::TaskInputRequested),
            EventKind::TaskFinished => Some(WebhookEvent::TaskFinished),
            EventKind::TaskFlagged => Some(WebhookEvent::TaskNeedsPerson),
            EventKind::AttentionRaised => Some(WebhookEvent::SessionNeedsInput),
            EventKind::InputSent
            | EventKind::RecordingError
            | EventKind::TaskCreated
            | EventKind::Comment
            | EventKind::BlockerFiled
            | EventKind::BlockerResolved
            | EventKind::QuestionAnswered
            | EventKind::Commit
            | EventKind::Merged
            | EventKind::MergeRefused
            | EventKind::WebhookChanged
            | EventKind::FinishRequested
            | EventKind::MarkedDone
            | EventKind::Abandoned
            | EventKind::DeviceRevoked
            | EventKind::MemberInvited
            | EventKind::InviteRevoked
            | EventKind::MemberJoined
            | EventKind::RoleChanged
            | EventKind::MemberRemoved
            | EventKind::PasswordChanged
            | EventKind::TokenIssued
            | EventKind::TokenRevoked
            | EventKind::RouteChanged
            | EventKind::DeviceEnrolled
            | EventKind::SkillChanged
            | EventKind::UnconfinedStart
            | EventKind::TaskBaseChanged
            | EventKind::SandboxPrepared
            | EventKind::Activated
            | EventKind::AttentionDecided => None,
            EventKind::SpendCapReached => Some(WebhookEvent::SpendCapReached),
        }
    }
}

/// How failed deliveries are retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// The wait after the first failure; it doubles with each further one.
    pub base: Duration,
    /// The longest wait between two attempts (a Retry-After is capped at it too).
    pub max_wait: Duration,
    /// Attempts in all before a delivery is given up as failed.
    pub max_attempts: u32,
}

impl Default for RetryPolicy {
    /// 5 s, 10 s, 20 s … up to an hour between attempts, 12 attempts (about 5 hours).
    fn default() -> Self {
        RetryPolicy { base: Duration::from_secs(5), max_wait: Duration::from_secs(3600), max_attempts: 12 }
    }
}

/// What to do after a failed attempt.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Retry {
    /// Try again after this long.
    After(Duration),
    /// Attempts used up: the delivery failed (it can still be redelivered by hand).
    GiveUp,
}

/// After the `attempts`-th failed attempt (1-based): exponential backoff with "full
/// jitter" (`jitter` in 0..=1, drawn by the caller, takes the wait between half and all
/// of the backoff), or the receiver's Retry-After when it gave one.
pub fn retry(policy: &RetryPolicy, attempts: u32, jitter: f64, retry_after: Option<Duration>) -> Retry {
    if attempts >= policy.max_attempts {
        return Retry::GiveUp;
    }
    if let Some(after) = retry_after {
        return Retry::After(after.min(policy.max_wait));
    }
    let backoff = Backoff { first: policy.base, cap: policy.max_wait };
    Retry::After(backoff.jittered(attempts, Jitter::HalfToFull, jitter))
}

/// What a receiver's answer means for the delivery and its endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// 2xx: delivered.
    Delivered,
    /// 410 Gone: the endpoint asks to be disabled; nothing more is sent to it.
    Gone,
    /// Anything else (or no answer): try again.
    Failed,
}

/// Classifies an HTTP status.
pub fn answer(status: u16) -> Answer {
    match status {
        200..=299 => Answer::Delivered,
        410 => Answer::Gone,
        _ => Answer::Failed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_the_issue_s_five_are_there() {
        for e in WebhookEvent::ALL {
            assert_eq!(WebhookEvent::parse(e.as_str()), Some(e));
        }
        for name in ["session.started", "session.ended", "session.lost", "task.stage_advanced", "task.input_requested"] {
            assert!(WebhookEvent::parse(name).is_some(), "{name}");
        }
        assert_eq!(WebhookEvent::parse("session.*"), None);
    }

    #[test]
    fn events_map_to_webhooks() {
        assert_eq!(WebhookEvent::for_event(EventKind::SessionKilled), Some(WebhookEvent::SessionEnded));
        assert_eq!(WebhookEvent::for_event(EventKind::SessionConnectionLost), Some(WebhookEvent::SessionLost));
        assert_eq!(WebhookEvent::for_event(EventKind::QuestionAsked), Some(WebhookEvent::TaskInputRequested));
        assert_eq!(WebhookEvent::for_event(EventKind::TaskFlagged), Some(WebhookEvent::TaskNeedsPerson));
        assert_eq!(WebhookEvent::for_event(EventKind::Comment), None);
    }

    #[test]
    fn backoff_doubles_with_jitter_and_is_capped() {
        let p = RetryPolicy::default();
        assert_eq!(retry(&p, 1, 1.0, None), Retry::After(Duration::from_secs(5)));
        assert_eq!(retry(&p, 1, 0.0, None), Retry::After(Duration::from_millis(2500)));
        assert_eq!(retry(&p, 3, 1.0, None), Retry::After(Duration::from_secs(20)));
        assert_eq!(retry(&p, 11, 1.0, None), Retry::After(Duration::from_secs(3600)), "capped");
        assert_eq!(retry(&p, 12, 1.0, None), Retry::GiveUp);
    }

    #[test]
    fn retry_after_is_honoured_up_to_the_cap() {
        let p = RetryPolicy::default();
        assert_eq!(retry(&p, 1, 0.3, Some(Duration::from_secs(42))), Retry::After(Duration::from_secs(42)));
        assert_eq!(retry(&p, 1, 0.3, Some(Duration::from_secs(86_400))), Retry::After(Duration::from_secs(3600)));
        assert_eq!(retry(&p, 12, 0.3, Some(Duration::from_secs(1))), Retry::GiveUp);
    }

    #[test]
    fn answers() {
        assert_eq!(answer(204), Answer::Delivered);
        assert_eq!(answer(410), Answer::Gone);
        assert_eq!(answer(404), Answer::Failed);
        assert_eq!(answer(503), Answer::Failed);
    }
}

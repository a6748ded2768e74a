//! Whose turn it is on a task: a person's (a stage kept for people, a question, a
//! blocker, a flag), the scheduler's (queued for a slot) or an agent's (a live run),
//! decided from what is known about the task and shown in every task list.

use crate::attention::{waiting_words, AttentionKind};
use crate::task::TaskStatus;

/// What is known about a task when deciding whose turn it is.
#[derive(Debug, Clone, Copy)]
pub struct TurnFacts<'a> {
    /// The task's status.
    pub status: TaskStatus,
    /// Why it was flagged for a person, if it was.
    pub flagged: Option<&'a str>,
    /// Its oldest open note: (`question` or `blocker`, its text).
    pub open_note: Option<(&'a str, &'a str)>,
    /// What its live run waits on a person for, newest first: the kind, and a held
    /// call's tool.
    pub waiting: Option<(AttentionKind, Option<&'a str>)>,
    /// The current stage's name and whether an agent works it (None once finished).
    pub stage: Option<(&'a str, bool)>,
    /// Whether the stage waits for a slot.
    pub queued: bool,
    /// Its live run: Some(true) running, Some(false) still starting.
    pub live: Option<bool>,
    /// The current stage starts only when a person activates it (prepared, not started).
    pub awaiting_activation: bool,
}

/// Whose turn it is on a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Turn<'a> {
    /// The task has finished: nobody's.
    Finished,
    /// Flagged for a person, with why.
    Flagged(&'a str),
    /// An agent asked a question and waits for the answer.
    Answer(&'a str),
    /// A blocker is open.
    Blocked(&'a str),
    /// Its run waits on a person: a held tool call (with its tool), a finished turn, or
    /// a guess from a still screen.
    Waiting(AttentionKind, Option<&'a str>),
    /// The current stage is worked by people (kept for them, or no agent was put on it).
    Person(&'a str),
    /// Set up (or being set up) and waiting for a person to Activate it.
    Ready(&'a str),
    /// Waiting for a device slot.
    Queued,
    /// A run is being set up.
    Starting,
    /// A run is working.
    Running,
    /// Open at an agent's stage, yet nothing queued or live: a person must look.
    Stalled(&'a str),
}

/// Decides whose turn it is. A flag comes first (nothing moves until a person acts),
/// then what an agent waits on, then the stage's owner, then the scheduler and the run.
pub fn turn<'a>(f: &TurnFacts<'a>) -> Turn<'a> {
    if f.status.is_finished() {
        return Turn::Finished;
    }
    if let Some(why) = f.flagged {
        return Turn::Flagged(why);
    }
    match f.open_note {
        Some(("question", text)) => return Turn::Answer(text),
        Some((_, text)) => return Turn::Blocked(text),
        None => {}
    }
    if let (Some((kind, tool)), Some(_)) = (f.waiting, f.live) {
        return Turn::Waiting(kind, tool);
    }
    match (f.live, f.queued, f.stage) {
        (Some(true), _, _) => Turn::Running,
        (Some(false), _, _) => Turn::Starting,
        (None, true, Some((stage, _))) if f.awaiting_activation => Turn::Ready(stage),
        (None, true, _) => Turn::Queued,
        (None, false, Some((stage, true))) if f.awaiting_activation => Turn::Ready(stage),
        (None, false, Some((stage, false))) => Turn::Person(stage),
        (None, false, Some((stage, true))) => Turn::Stalled(stage),
        (None, false, None) => Turn::Finished,
    }
}

impl Turn<'_> {
    /// A stable word for the API and the web app's styling.
    pub fn kind(&self) -> &'static str {
        match self {
            Turn::Finished => "finished",
            Turn::Flagged(_) => "flagged",
            Turn::Answer(_) => "answer",
            Turn::Blocked(_) => "blocked",
            Turn::Waiting(..) => "waiting",
            Turn::Person(_) => "person",
            Turn::Ready(_) => "ready",
            Turn::Queued => "queued",
            Turn::Starting => "starting",
            Turn::Running => "running",
            Turn::Stalled(_) => "stalled",
        }
    }

    /// Whether a person must act before the task moves on.
    pub fn needs_person(&self) -> bool {
        matches!(
            self,
            Turn::Flagged(_) | Turn::Answer(_) | Turn::Blocked(_) | Turn::Waiting(..) | Turn::Person(_) | Turn::Ready(_) | Turn::Stalled(_)
        )
    }

    /// What a task list says: `needs a person: review`, `waiting for an answer: …`.
    pub fn label(&self) -> String {
        match self {
            Turn::Finished => "-".into(),
            Turn::Flagged(why) => format!("needs a person: {why}"),
            Turn::Answer(q) => format!("waiting for an answer: {q}"),
            Turn::Blocked(b) => format!("blocked: {b}"),
            Turn::Waiting(kind, tool) => waiting_words(*kind, *tool),
            Turn::Person(stage) => format!("needs a person: {stage}"),
            Turn::Ready(stage) => format!("ready to start: {stage} (Activate starts it)"),
            Turn::Queued => "queued for a slot".into(),
            Turn::Starting => "starting".into(),
            Turn::Running => "running".into(),
            Turn::Stalled(stage) => format!("needs a person: {stage} has no run"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open<'a>() -> TurnFacts<'a> {
        TurnFacts {
            status: TaskStatus::Open,
            flagged: None,
            open_note: None,
            waiting: None,
            stage: Some(("code", true)),
            queued: false,
            live: None,
            awaiting_activation: false,
        }
    }

    #[test]
    fn a_stage_kept_for_people_is_their_turn() {
        let f = TurnFacts { stage: Some(("review", false)), ..open() };
        assert_eq!(turn(&f), Turn::Person("review"));
        assert_eq!(turn(&f).label(), "needs a person: review");
        assert!(turn(&f).needs_person());
    }

    #[test]
    fn a_question_shows_while_the_run_waits() {
        let f = TurnFacts { open_note: Some(("question", "which db?")), live: Some(true), ..open() };
        assert_eq!(turn(&f).label(), "waiting for an answer: which db?");
        let f = TurnFacts { open_note: Some(("blocker", "no creds")), live: Some(true), ..open() };
        assert_eq!(turn(&f).label(), "blocked: no creds");
        assert!(turn(&f).needs_person());
    }

    #[test]
    fn a_run_waiting_on_a_person_says_for_what_while_it_lives() {
        let held = TurnFacts { waiting: Some((AttentionKind::Permission, Some("Bash"))), live: Some(true), ..open() };
        assert_eq!(turn(&held).label(), "needs approval: Bash");
        assert!(turn(&held).needs_person());
        let idle = TurnFacts { waiting: Some((AttentionKind::Idle, None)), ..held };
        assert_eq!(turn(&idle).label(), "waiting for its next instruction");
        let guess = TurnFacts { waiting: Some((AttentionKind::ProbablyWaiting, None)), ..held };
        assert!(turn(&guess).label().contains("a guess"));
        // A question comes first; without a live run nothing waits.
        assert_eq!(turn(&TurnFacts { open_note: Some(("question", "q")), ..held }), Turn::Answer("q"));
        assert_eq!(turn(&TurnFacts { live: None, ..held }), Turn::Stalled("code"));
    }

    #[test]
    fn agents_and_the_scheduler_have_their_turns() {
        assert_eq!(turn(&TurnFacts { queued: true, ..open() }).label(), "queued for a slot");
        assert_eq!(turn(&TurnFacts { live: Some(false), ..open() }), Turn::Starting);
        assert_eq!(turn(&TurnFacts { live: Some(true), ..open() }).label(), "running");
        assert!(!turn(&TurnFacts { live: Some(true), ..open() }).needs_person());
        assert!(!turn(&TurnFacts { queued: true, ..open() }).needs_person());
    }

    #[test]
    fn a_flag_comes_first_and_a_finished_task_has_no_turn() {
        let f = TurnFacts { flagged: Some("ended 3 times"), open_note: Some(("question", "q")), ..open() };
        assert_eq!(turn(&f).label(), "needs a person: ended 3 times");
        // A cancelled task that was flagged no longer needs anyone.
        let f = TurnFacts { status: TaskStatus::Cancelled, flagged: Some("ended 3 times"), stage: None, ..open() };
        assert_eq!(turn(&f), Turn::Finished);
        assert!(!turn(&f).needs_person());
        assert_eq!(turn(&f).label(), "-");
    }

    #[test]
    fn a_stage_that_waits_for_activate_is_a_persons_turn_until_it_runs() {
        let f = TurnFacts { awaiting_activation: true, ..open() };
        assert_eq!(turn(&f), Turn::Ready("code"));
        assert_eq!(turn(&f).label(), "ready to start: code (Activate starts it)");
        assert!(turn(&f).needs_person());
        // Queued to be prepared: still the person's turn; once activated, the scheduler's.
        assert_eq!(turn(&TurnFacts { queued: true, ..f }), Turn::Ready("code"));
        assert_eq!(turn(&TurnFacts { live: Some(true), ..f }), Turn::Running);
    }

    #[test]
    fn an_agent_stage_with_nothing_moving_is_called_out() {
        assert_eq!(turn(&open()), Turn::Stalled("code"));
        assert!(turn(&open()).needs_person());
    }
}

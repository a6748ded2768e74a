//! A sandbox's durable lifecycle (seed 001): `provision → ready → active → completing →
//! done`, or `abandoned`; a task-free ("Remote") sandbox started on a device ends `stopped`.

use serde::{Deserialize, Serialize};

/// The sandbox's own lifecycle state (distinct from a run's outcome).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SandboxState {
    /// Being created (worktree checkout, files).
    Provision,
    /// Set up, no run yet.
    Ready,
    /// A run is (or was last) working in it.
    Active,
    /// Wrapping up after Finish session.
    Completing,
    /// Finished; work kept.
    Done,
    /// Torn down without merging.
    Abandoned,
    /// A task-free sandbox whose run ended.
    Stopped,
}

/// What a sandbox may be asked to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SandboxEvent {
    /// Provisioning finished.
    Provisioned,
    /// A run started in it.
    RunStarted,
    /// Finish session was requested.
    Finish,
    /// Mark done.
    MarkDone,
    /// Abandon: tear down without merging.
    Abandon,
    /// A task-free sandbox's run ended.
    RemoteRunEnded,
    /// Its task finished (every stage handed off, or cancelled): the work is kept.
    TaskEnded,
}

/// A sandbox transition that is not allowed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("sandbox is {from}; {event:?} is not possible from there")]
pub struct SandboxTransitionError {
    /// The state it was in.
    pub from: SandboxState,
    /// What was asked.
    pub event: SandboxEvent,
}

impl SandboxState {
    /// Every state.
    pub const ALL: [SandboxState; 7] = [
        SandboxState::Provision,
        SandboxState::Ready,
        SandboxState::Active,
        SandboxState::Completing,
        SandboxState::Done,
        SandboxState::Abandoned,
        SandboxState::Stopped,
    ];

    /// The lowercase word used in the API and storage.
    pub fn as_str(self) -> &'static str {
        match self {
            SandboxState::Provision => "provision",
            SandboxState::Ready => "ready",
            SandboxState::Active => "active",
            SandboxState::Completing => "completing",
            SandboxState::Done => "done",
            SandboxState::Abandoned => "abandoned",
            SandboxState::Stopped => "stopped",
        }
    }

    /// Parses the lowercase word.
    pub fn parse(s: &str) -> Option<SandboxState> {
        SandboxState::ALL.into_iter().find(|o| o.as_str() == s)
    }

    /// True once the sandbox has finished for good (done, abandoned, stopped).
    pub fn is_finished(self) -> bool {
        match self {
            SandboxState::Done | SandboxState::Abandoned | SandboxState::Stopped => true,
            SandboxState::Provision | SandboxState::Ready | SandboxState::Active | SandboxState::Completing => false,
        }
    }

    /// Applies `event`, returning the next state.
    pub fn apply(self, event: SandboxEvent) -> Result<SandboxState, SandboxTransitionError> {
        use SandboxEvent as E;
        use SandboxState as S;
        let next = match (self, event) {
            (S::Provision, E::Provisioned) => S::Ready,
            (S::Ready | S::Active, E::RunStarted) => S::Active,
            (S::Active | S::Ready, E::Finish) => S::Completing,
            (S::Completing, E::MarkDone) => S::Done,
            (S::Provision | S::Ready | S::Active | S::Completing, E::Abandon) => S::Abandoned,
            (S::Active | S::Ready, E::RemoteRunEnded) => S::Stopped,
            (S::Provision | S::Ready | S::Active | S::Completing, E::TaskEnded) => S::Done,
            (from, event) => return Err(SandboxTransitionError { from, event }),
        };
        Ok(next)
    }
}

impl SandboxEvent {
    /// The activity event a person's move records (Finish, Mark done, Abandon); None for
    /// the moves the system makes.
    pub fn audited(self) -> Option<crate::activity::EventKind> {
        use crate::activity::EventKind as K;
        match self {
            SandboxEvent::Finish => Some(K::FinishRequested),
            SandboxEvent::MarkDone => Some(K::MarkedDone),
            SandboxEvent::Abandon => Some(K::Abandoned),
            SandboxEvent::Provisioned | SandboxEvent::RunStarted | SandboxEvent::RemoteRunEnded | SandboxEvent::TaskEnded => None,
        }
    }
}

impl std::fmt::Display for SandboxState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::SandboxEvent as E;
    use super::SandboxState as S;

    #[test]
    fn happy_path() {
        let s = S::Provision.apply(E::Provisioned).unwrap();
        let s = s.apply(E::RunStarted).unwrap();
        let s = s.apply(E::RunStarted).unwrap();
        assert_eq!(s, S::Active);
        let s = s.apply(E::Finish).unwrap();
        assert_eq!(s, S::Completing);
        assert_eq!(s.apply(E::MarkDone).unwrap(), S::Done);
    }

    #[test]
    fn finished_states_accept_nothing() {
        for s in S::ALL.into_iter().filter(|s| s.is_finished()) {
            for e in [E::Provisioned, E::RunStarted, E::Finish, E::MarkDone, E::Abandon, E::RemoteRunEnded, E::TaskEnded] {
                assert!(s.apply(e).is_err(), "{s} {e:?}");
            }
        }
    }

    #[test]
    fn abandon_from_any_open_state() {
        for s in S::ALL.into_iter().filter(|s| !s.is_finished()) {
            assert_eq!(s.apply(E::Abandon).unwrap(), S::Abandoned);
        }
    }

    #[test]
    fn remote_run_end_stops_the_sandbox() {
        assert_eq!(S::Active.apply(E::RemoteRunEnded).unwrap(), S::Stopped);
        assert!(S::Completing.apply(E::RemoteRunEnded).is_err());
    }

    #[test]
    fn mark_done_needs_completing() {
        assert!(S::Active.apply(E::MarkDone).is_err());
        assert!(S::Ready.apply(E::MarkDone).is_err());
    }

    #[test]
    fn a_completing_sandbox_takes_no_new_run() {
        assert!(S::Completing.apply(E::RunStarted).is_err());
        assert!(S::Completing.apply(E::Finish).is_err());
    }

    #[test]
    fn a_finished_task_closes_any_open_sandbox_keeping_the_work() {
        for s in S::ALL.into_iter().filter(|s| !s.is_finished()) {
            assert_eq!(s.apply(E::TaskEnded).unwrap(), S::Done);
        }
    }

    #[test]
    fn a_persons_moves_are_audited() {
        assert!(E::Finish.audited().is_some() && E::MarkDone.audited().is_some() && E::Abandon.audited().is_some());
        assert!(E::TaskEnded.audited().is_none() && E::RunStarted.audited().is_none());
    }

    #[test]
    fn words_round_trip() {
        for s in S::ALL {
            assert_eq!(S::parse(s.as_str()), Some(s));
        }
    }
}

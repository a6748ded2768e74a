//! A run's outcome (seed 001 "Sandbox state vs. a run's outcome") and the state machine
//! that decides it from what was observed: started, exited (how), stopped (by whom),
//! failed to start, lost.

use serde::{Deserialize, Serialize};

/// A session run's outcome: Drover's answer to "did this run finish its work?".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// The session is being set up.
    Starting,
    /// The session is live right now.
    Running,
    /// The work was handed off.
    Completed,
    /// Deliberately stopped before finishing; not a failure.
    Released,
    /// The process ended on its own without handing the stage off.
    Incomplete,
    /// The process ended badly, or could not start.
    Failed,
    /// Contact with the device or the process was lost.
    Lost,
}

impl Outcome {
    /// Every outcome, in the order the seed lists them.
    pub const ALL: [Outcome; 7] =
        [Outcome::Starting, Outcome::Running, Outcome::Completed, Outcome::Released, Outcome::Incomplete, Outcome::Failed, Outcome::Lost];

    /// The lowercase word used in the API, the CLI and storage.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Starting => "starting",
            Outcome::Running => "running",
            Outcome::Completed => "completed",
            Outcome::Released => "released",
            Outcome::Incomplete => "incomplete",
            Outcome::Failed => "failed",
            Outcome::Lost => "lost",
        }
    }

    /// Parses the lowercase word.
    pub fn parse(s: &str) -> Option<Outcome> {
        Outcome::ALL.into_iter().find(|o| o.as_str() == s)
    }

    /// True while the run has not ended (starting or running).
    pub fn is_live(self) -> bool {
        match self {
            Outcome::Starting | Outcome::Running => true,
            Outcome::Completed | Outcome::Released | Outcome::Incomplete | Outcome::Failed | Outcome::Lost => false,
        }
    }
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a process ended, as the shim observed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExitStatus {
    /// The exit code, when the process exited normally.
    pub code: Option<i32>,
    /// The signal that ended it, when it was killed by one.
    pub signal: Option<i32>,
}

impl ExitStatus {
    /// A normal exit with `code`.
    pub fn code(code: i32) -> Self {
        ExitStatus { code: Some(code), signal: None }
    }

    /// Death by `signal`.
    pub fn signal(signal: i32) -> Self {
        ExitStatus { code: None, signal: Some(signal) }
    }

    /// The shell convention: the code, or 128 + signal.
    pub fn shell_code(self) -> i32 {
        match (self.code, self.signal) {
            (Some(c), _) => c,
            (None, Some(s)) => 128 + s,
            (None, None) => -1,
        }
    }

    /// True for exit code 0.
    pub fn success(self) -> bool {
        self.code == Some(0)
    }
}

/// Why a run ended, as reported by whoever saw it end. The outcome follows from this.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RunEnd {
    /// The process exited; `stop_requested` says whether an operator's Stop preceded it.
    Exited {
        /// How the process ended.
        status: ExitStatus,
        /// A Stop was requested before the process ended.
        stop_requested: bool,
    },
    /// The process could not be started (command not found, bad directory…).
    StartFailed {
        /// What went wrong, for a person.
        reason: String,
    },
    /// The process is gone without a record of how it ended.
    Lost {
        /// What was observed, for a person.
        reason: String,
    },
    /// Its device went silent, was revoked, or came back without it: the run is gone
    /// through no fault of its own (its stage is staffed again without counting it).
    DeviceLost {
        /// What was observed, for a person.
        reason: String,
    },
    /// An operator stopped it while its device was offline: nobody can confirm the
    /// process stopped yet (its device stops it when it reconnects).
    StoppedOffline {
        /// What happened, for a person.
        reason: String,
    },
    /// Still running after its sandbox finished (the stale monitor's Sandbox retired):
    /// never seen stopping, so lost even if its work was handed off or retired.
    OutlivedSandbox {
        /// What was observed, for a person.
        reason: String,
    },
}

/// Whose doing a run's end was: what its task does next depends on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The run's own: it exited, stalled or was stopped (an attempt of its stage).
    Run,
    /// Its device's: the run is gone through no fault of the agent (not an attempt).
    Device,
    /// It could not be set up (no such command, no repository, no base branch): trying
    /// again fails the same way until a person fixes the cause.
    Setup,
}

impl RunEnd {
    /// The end as a device may report it: only the server decides that a device lost a
    /// run (a device claiming so would have its runs' failures cost no attempt).
    pub fn as_device_reported(self) -> RunEnd {
        match self {
            RunEnd::DeviceLost { reason } => RunEnd::Lost { reason },
            other => other,
        }
    }

    /// Whose doing this end was.
    pub fn fault(&self) -> Fault {
        match self {
            RunEnd::StartFailed { .. } => Fault::Setup,
            RunEnd::DeviceLost { .. } => Fault::Device,
            RunEnd::Exited { .. } | RunEnd::Lost { .. } | RunEnd::StoppedOffline { .. } | RunEnd::OutlivedSandbox { .. } => Fault::Run,
        }
    }
}

/// A transition of a run that is not allowed from its current outcome.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("session is {from}; it cannot be {action}")]
pub struct TransitionError {
    /// The outcome the run had.
    pub from: Outcome,
    /// What was attempted, in words.
    pub action: &'static str,
}

/// The result of ending a run: its final outcome, the reason to record and the activity
/// label ("session ended" / "session killed").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ending {
    /// The final outcome.
    pub outcome: Outcome,
    /// The exit code to record, if the process exited.
    pub exit_code: Option<i32>,
    /// Free text: why the session ended.
    pub reason: String,
    /// True when an operator's Stop ended the process ("session killed").
    pub killed: bool,
    /// The outcome stands even when the run's work was handed off or retired (a run
    /// still running after its sandbox finished is lost, never completed).
    pub survives_hand_off: bool,
}

/// Why a run completes when its stage is handed off: the reason its session ends with.
pub const HANDED_OFF: &str = "the stage was handed off";

/// The ending of a run whose work was handed off (or retired with Mark done) with
/// `why`: `completed`, unless its outcome survives a hand-off.
fn settle_handed_off(ending: Ending, why: &str) -> Ending {
    if ending.survives_hand_off || ending.outcome == Outcome::Completed {
        return ending;
    }
    Ending { outcome: Outcome::Completed, reason: why.to_string(), killed: false, ..ending }
}

/// What is known of a run when its end is stored, read from its row under the same lock
/// as the write, so that a hand-off or a Stop committed while the end was on its way
/// still counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EndEvidence<'a> {
    /// Its outcome as stored: only a live run can end.
    pub outcome: Outcome,
    /// Why it completes, when its work was handed off or retired with Mark done.
    pub handed_off: Option<&'a str>,
    /// Who asked for a Stop (a person), named as the end's actor when the Stop ended it.
    pub stop_requested_by: Option<&'a str>,
    /// Why a rule, not a person, asked for the Stop (a spend cap): the reason a Stop
    /// ending it records instead of the exit.
    pub stop_reason: Option<&'a str>,
    /// Who reported the end (`device box`): the actor unless a person's Stop ended it.
    pub reporter: &'a str,
}

/// A run's end as decided: what to store and whom its activity names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndDecision {
    /// The outcome, exit code and reason to store.
    pub ending: Ending,
    /// The actor of the "session ended/killed" activity.
    pub actor: String,
}

/// Decides a run's end from how it ended and what its row says: the one place an
/// outcome is decided (the store applies exactly this). An error if it has ended already.
pub fn decide_end(evidence: &EndEvidence<'_>, end: &RunEnd) -> Result<EndDecision, TransitionError> {
    let mut ending = on_end(evidence.outcome, end)?;
    if let Some(why) = evidence.handed_off {
        ending = settle_handed_off(ending, why);
    }
    // A stop asked for by a rule (a spend cap), not a person, ends with the rule's reason.
    if let (true, Some(reason)) = (ending.killed, evidence.stop_reason) {
        ending.reason = reason.to_string();
    }
    let actor = match (ending.killed, evidence.stop_requested_by) {
        (true, Some(by)) => by,
        _ => evidence.reporter,
    };
    Ok(EndDecision { actor: actor.to_string(), ending })
}

/// The run's state machine: `starting → running → ended`, or `starting → ended`.
pub fn on_started(from: Outcome) -> Result<Outcome, TransitionError> {
    match from {
        Outcome::Starting => Ok(Outcome::Running),
        other => Err(TransitionError { from: other, action: "started" }),
    }
}

/// Ends a live run: decides the outcome and reason from how it ended.
pub fn on_end(from: Outcome, end: &RunEnd) -> Result<Ending, TransitionError> {
    if !from.is_live() {
        return Err(TransitionError { from, action: "ended again" });
    }
    Ok(match end {
        RunEnd::Exited { status, stop_requested: true } => Ending {
            outcome: Outcome::Released,
            exit_code: status.code.or(status.signal.map(|s| 128 + s)),
            reason: format!("stopped by an operator ({})", describe_exit(*status)),
            killed: true,
            survives_hand_off: false,
        },
        RunEnd::Exited { status, stop_requested: false } if status.success() => Ending {
            outcome: Outcome::Incomplete,
            exit_code: Some(0),
            reason: "the process exited on its own with code 0 without handing off".to_string(),
            killed: false,
            survives_hand_off: false,
        },
        RunEnd::Exited { status, stop_requested: false } => Ending {
            outcome: Outcome::Failed,
            exit_code: Some(status.shell_code()),
            reason: format!("the process {}", describe_exit(*status)),
            killed: false,
            survives_hand_off: false,
        },
        RunEnd::StartFailed { reason } => Ending {
            outcome: Outcome::Failed,
            exit_code: None,
            reason: format!("could not start: {reason}"),
            killed: false,
            survives_hand_off: false,
        },
        RunEnd::Lost { reason } => {
            Ending { outcome: Outcome::Lost, exit_code: None, reason: reason.clone(), killed: false, survives_hand_off: false }
        }
        RunEnd::DeviceLost { reason } => {
            Ending { outcome: Outcome::Lost, exit_code: None, reason: reason.clone(), killed: false, survives_hand_off: false }
        }
        RunEnd::StoppedOffline { reason } => {
            Ending { outcome: Outcome::Released, exit_code: None, reason: reason.clone(), killed: true, survives_hand_off: false }
        }
        RunEnd::OutlivedSandbox { reason } => {
            Ending { outcome: Outcome::Lost, exit_code: None, reason: reason.clone(), killed: false, survives_hand_off: true }
        }
    })
}

/// "exited with code 3" / "was killed by signal 9 (SIGKILL)".
pub fn describe_exit(status: ExitStatus) -> String {
    match (status.code, status.signal) {
        (Some(c), _) => format!("exited with code {c}"),
        (None, Some(s)) => format!("was killed by signal {s}{}", signal_name(s).map(|n| format!(" ({n})")).unwrap_or_default()),
        (None, None) => "ended with an unknown status".to_string(),
    }
}

fn signal_name(sig: i32) -> Option<&'static str> {
    Some(match sig {
        1 => "SIGHUP",
        2 => "SIGINT",
        3 => "SIGQUIT",
        6 => "SIGABRT",
        9 => "SIGKILL",
        11 => "SIGSEGV",
        13 => "SIGPIPE",
        15 => "SIGTERM",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_device_that_loses_a_run_is_not_the_runs_fault() {
        let e = on_end(Outcome::Starting, &RunEnd::DeviceLost { reason: "device silent".into() }).unwrap();
        assert_eq!((e.outcome, e.reason.as_str()), (Outcome::Lost, "device silent"));
        assert_eq!(RunEnd::DeviceLost { reason: String::new() }.fault(), Fault::Device);
        assert_eq!(RunEnd::StartFailed { reason: String::new() }.fault(), Fault::Setup);
        assert_eq!(RunEnd::Lost { reason: String::new() }.fault(), Fault::Run);
        // A device cannot claim its own loss to spare a run's attempt.
        let claimed = RunEnd::DeviceLost { reason: "trust me".into() }.as_device_reported();
        assert_eq!((claimed.fault(), claimed), (Fault::Run, RunEnd::Lost { reason: "trust me".into() }));
        let exit = RunEnd::Exited { status: ExitStatus { code: Some(1), signal: None }, stop_requested: false };
        assert_eq!(exit.fault(), Fault::Run);
    }

    #[test]
    fn words_round_trip() {
        for o in Outcome::ALL {
            assert_eq!(Outcome::parse(o.as_str()), Some(o));
        }
        assert_eq!(Outcome::parse("Running"), None);
    }

    #[test]
    fn only_starting_and_running_are_live() {
        let live: Vec<_> = Outcome::ALL.into_iter().filter(|o| o.is_live()).collect();
        assert_eq!(live, vec![Outcome::Starting, Outcome::Running]);
    }

    #[test]
    fn start_moves_starting_to_running_only() {
        assert_eq!(on_started(Outcome::Starting), Ok(Outcome::Running));
        for o in Outcome::ALL.into_iter().filter(|o| *o != Outcome::Starting) {
            assert!(on_started(o).is_err(), "{o}");
        }
    }

    #[test]
    fn exit_zero_without_hand_off_is_incomplete() {
        let e = on_end(Outcome::Running, &RunEnd::Exited { status: ExitStatus::code(0), stop_requested: false }).unwrap();
        assert_eq!(e.outcome, Outcome::Incomplete);
        assert_eq!(e.exit_code, Some(0));
        assert!(!e.killed);
    }

    #[test]
    fn non_zero_exit_is_failed_with_the_code() {
        let e = on_end(Outcome::Running, &RunEnd::Exited { status: ExitStatus::code(3), stop_requested: false }).unwrap();
        assert_eq!(e.outcome, Outcome::Failed);
        assert_eq!(e.exit_code, Some(3));
        assert_eq!(e.reason, "the process exited with code 3");
    }

    #[test]
    fn death_by_signal_is_failed_with_shell_code() {
        let e = on_end(Outcome::Running, &RunEnd::Exited { status: ExitStatus::signal(11), stop_requested: false }).unwrap();
        assert_eq!(e.outcome, Outcome::Failed);
        assert_eq!(e.exit_code, Some(139));
        assert!(e.reason.contains("SIGSEGV"));
    }

    #[test]
    fn stop_is_released_and_killed_whatever_the_exit() {
        for status in [ExitStatus::signal(15), ExitStatus::signal(9), ExitStatus::code(0), ExitStatus::code(1)] {
            let e = on_end(Outcome::Running, &RunEnd::Exited { status, stop_requested: true }).unwrap();
            assert_eq!(e.outcome, Outcome::Released);
            assert!(e.killed);
            assert!(e.reason.starts_with("stopped by an operator"));
        }
    }

    #[test]
    fn start_failure_is_failed_with_reason() {
        let e = on_end(Outcome::Starting, &RunEnd::StartFailed { reason: "command not found: nope".into() }).unwrap();
        assert_eq!(e.outcome, Outcome::Failed);
        assert_eq!(e.exit_code, None);
        assert_eq!(e.reason, "could not start: command not found: nope");
    }

    #[test]
    fn lost_keeps_the_reason() {
        let e = on_end(Outcome::Running, &RunEnd::Lost { reason: "process gone".into() }).unwrap();
        assert_eq!(e.outcome, Outcome::Lost);
        assert_eq!(e.reason, "process gone");
    }

    #[test]
    fn an_ended_run_cannot_end_again() {
        for o in Outcome::ALL.into_iter().filter(|o| !o.is_live()) {
            let err = on_end(o, &RunEnd::Lost { reason: String::new() }).unwrap_err();
            assert_eq!(err.from, o);
        }
    }

    #[test]
    fn shell_code_convention() {
        assert_eq!(ExitStatus::code(2).shell_code(), 2);
        assert_eq!(ExitStatus::signal(9).shell_code(), 137);
        assert_eq!(ExitStatus { code: None, signal: None }.shell_code(), -1);
    }

    #[test]
    fn the_end_is_decided_from_what_the_row_says_when_it_is_stored() {
        let exited = RunEnd::Exited { status: ExitStatus::code(0), stop_requested: false };
        let stopped = RunEnd::Exited { status: ExitStatus::signal(15), stop_requested: true };
        let row =
            EndEvidence { outcome: Outcome::Running, handed_off: None, stop_requested_by: None, stop_reason: None, reporter: "device box" };
        let d = decide_end(&row, &exited).unwrap();
        assert_eq!((d.ending.outcome, d.actor.as_str()), (Outcome::Incomplete, "device box"));
        // A hand-off committed while the end was on its way completes the run.
        let d = decide_end(&EndEvidence { handed_off: Some(HANDED_OFF), ..row }, &exited).unwrap();
        assert_eq!((d.ending.outcome, d.ending.reason.as_str()), (Outcome::Completed, HANDED_OFF));
        // A person's Stop: released, by that person.
        let d = decide_end(&EndEvidence { stop_requested_by: Some("alice"), ..row }, &stopped).unwrap();
        assert_eq!((d.ending.outcome, d.ending.killed, d.actor.as_str()), (Outcome::Released, true, "alice"));
        assert!(d.ending.reason.starts_with("stopped by an operator"), "{}", d.ending.reason);
        // A rule's Stop ends with the rule's reason.
        let capped = EndEvidence { stop_requested_by: Some("alice"), stop_reason: Some("spend cap: $5 reached"), ..row };
        assert_eq!(decide_end(&capped, &stopped).unwrap().ending.reason, "spend cap: $5 reached");
        // Handed off, then stopped: completed, not killed, so the reporter is the actor.
        let d = decide_end(&EndEvidence { handed_off: Some(HANDED_OFF), ..capped }, &stopped).unwrap();
        assert_eq!((d.ending.outcome, d.ending.reason.as_str(), d.actor.as_str()), (Outcome::Completed, HANDED_OFF, "device box"));
        // A run that ended does not end again.
        assert!(decide_end(&EndEvidence { outcome: Outcome::Lost, ..row }, &exited).is_err());
    }

    /// [`decide_end`] for a run whose work was handed off with `why`, nothing else known.
    fn on_completed_end(from: Outcome, end: &RunEnd, why: &str) -> Result<Ending, TransitionError> {
        let evidence = EndEvidence { outcome: from, handed_off: Some(why), stop_requested_by: None, stop_reason: None, reporter: "" };
        decide_end(&evidence, end).map(|d| d.ending)
    }

    #[test]
    fn a_handed_off_run_completes_however_its_process_ends() {
        for end in [
            RunEnd::Exited { status: ExitStatus::code(0), stop_requested: false },
            RunEnd::Exited { status: ExitStatus::signal(15), stop_requested: true },
            RunEnd::Lost { reason: "gone".into() },
        ] {
            let e = on_completed_end(Outcome::Running, &end, "the stage was handed off").unwrap();
            assert_eq!(e.outcome, Outcome::Completed);
            assert_eq!(e.reason, "the stage was handed off");
            assert!(!e.killed);
        }
        assert!(on_completed_end(Outcome::Completed, &RunEnd::Lost { reason: String::new() }, "x").is_err());
        // A Stop while the device was offline is a deliberate stop: released, killed.
        let e = on_end(Outcome::Running, &RunEnd::StoppedOffline { reason: "stopped offline".into() }).unwrap();
        assert_eq!((e.outcome, e.killed, e.exit_code), (Outcome::Released, true, None));
        // Still running after its sandbox retired: lost, whatever its work came to.
        let end = RunEnd::OutlivedSandbox { reason: "still running".into() };
        let lost = on_completed_end(Outcome::Running, &end, "the sandbox was retired with Mark done").unwrap();
        assert_eq!((lost.outcome, lost.reason.as_str()), (Outcome::Lost, "still running"));
        assert_eq!(on_end(Outcome::Running, &end).unwrap().outcome, Outcome::Lost);
    }
}

//! What each outcome means to a person, with every way a run comes to it: the one text the
//! API serves, so the web app and the CLI never keep their own copies.

use crate::Outcome;

impl Outcome {
    /// The outcome's explanation for a person (a badge's hover text, `drover session
    /// show`): what it says about the run's work, and each path that ends a run so
    /// (`on_end`, the stale monitor, hand-offs), so a reader can tell which applied.
    pub fn meaning(self) -> &'static str {
        match self {
            Outcome::Starting => "The session is being set up.",
            Outcome::Running => "The session is live right now.",
            Outcome::Completed => "The work was handed off: the task's stage advanced, or the sandbox was retired with Mark done.",
            Outcome::Released => "The session was deliberately stopped before finishing — not a failure.",
            Outcome::Incomplete => "The agent's process ended on its own without handing the stage off.",
            Outcome::Failed => "The process ended badly: a non-zero exit, killed by a signal, or it could not start.",
            Outcome::Lost => {
                "Contact with the device or the process was lost: the device went silent or was revoked, \
                 the session stalled and was replaced, or it outlived its sandbox."
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::outcome::on_end;
    use crate::{ExitStatus, Outcome, RunEnd};
    use std::time::Duration;

    /// Every way `on_end` ends a run, with the words its explanation must use for it.
    fn ends() -> Vec<(RunEnd, &'static str)> {
        let stalled = crate::liveness::stalled_reason(Duration::from_secs(600));
        vec![
            (RunEnd::Exited { status: ExitStatus::code(2), stop_requested: false }, "non-zero exit"),
            (RunEnd::Exited { status: ExitStatus::signal(9), stop_requested: false }, "signal"),
            (RunEnd::StartFailed { reason: "no such command".into() }, "could not start"),
            (RunEnd::Exited { status: ExitStatus::code(0), stop_requested: false }, "ended on its own"),
            (RunEnd::Exited { status: ExitStatus::signal(15), stop_requested: true }, "deliberately stopped"),
            (RunEnd::StoppedOffline { reason: "stopped offline".into() }, "deliberately stopped"),
            (RunEnd::DeviceLost { reason: "device silent".into() }, "went silent"),
            (RunEnd::Lost { reason: stalled }, "stalled and was replaced"),
            (RunEnd::OutlivedSandbox { reason: "sandbox retired".into() }, "outlived its sandbox"),
        ]
    }

    #[test]
    fn each_way_a_run_ends_is_explained_under_the_outcome_it_gets() {
        for (end, words) in ends() {
            let outcome = on_end(Outcome::Running, &end).expect("a live run ends").outcome;
            assert!(outcome.meaning().contains(words), "{end:?} ends {outcome}, whose explanation does not say {words:?}");
        }
    }

    #[test]
    fn a_stalled_run_is_not_explained_as_failed() {
        assert!(!Outcome::Failed.meaning().contains("stall"));
        assert!(Outcome::Lost.meaning().contains("stalled"));
    }

    #[test]
    fn explanations_are_distinct_sentences() {
        let all: Vec<&str> = Outcome::ALL.into_iter().map(Outcome::meaning).collect();
        for (i, a) in all.iter().enumerate() {
            assert!(a.ends_with('.'), "{a}");
            assert!(all[i + 1..].iter().all(|b| b != a), "{a} is given twice");
        }
    }
}

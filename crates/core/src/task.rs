//! Tasks and their workflows: a task moves through its stages one hand-off at a time;
//! a stage left without a live session is staffed again, a bounded number of times.

use serde::{Deserialize, Serialize};

use crate::outcome::Fault;

/// A task's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TaskStatus {
    /// Being worked.
    Open,
    /// Every stage handed off.
    Done,
    /// Called off by a person.
    Cancelled,
    /// Torn down without merging.
    Abandoned,
}

impl TaskStatus {
    /// Every status.
    pub const ALL: [TaskStatus; 4] = [TaskStatus::Open, TaskStatus::Done, TaskStatus::Cancelled, TaskStatus::Abandoned];

    /// The lowercase word used in the API and storage.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Open => "open",
            TaskStatus::Done => "done",
            TaskStatus::Cancelled => "cancelled",
            TaskStatus::Abandoned => "abandoned",
        }
    }

    /// Parses the lowercase word.
    pub fn parse(s: &str) -> Option<TaskStatus> {
        TaskStatus::ALL.into_iter().find(|t| t.as_str() == s)
    }

    /// Whether the task has finished (a session still open on it is a leftover).
    pub fn is_finished(self) -> bool {
        !matches!(self, TaskStatus::Open)
    }
}

/// The default workflow (DESIGN.md).
pub const DEFAULT_STAGES: [&str; 5] = ["plan", "code", "review", "merge", "verify"];

/// Whether a stage merges the task's branch when it is handed off, unless the workflow
/// says otherwise: the default workflow's `merge` stage does.
pub fn merges_by_default(stage: &str) -> bool {
    stage == "merge"
}

/// The assignee that keeps a stage with people (`--assign review=human`): no agent is
/// ever put on it, whatever a task's `--agent` says; no agent may take this name.
pub const HUMAN: &str = "human";

/// The agent that works a stage assigned to `assignee`: None for a stage people work
/// ([`HUMAN`]) or nobody was put on (then a person works it too).
pub fn stage_agent(assignee: Option<&str>) -> Option<&str> {
    assignee.filter(|a| !a.eq_ignore_ascii_case(HUMAN))
}

/// Most stages a workflow may have.
pub const MAX_STAGES: usize = 20;

/// Why a workflow is not valid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorkflowError {
    /// No stages.
    #[error("a workflow needs at least one stage")]
    Empty,
    /// Too many stages.
    #[error("a workflow has at most {MAX_STAGES} stages")]
    TooLong,
    /// A stage name is not a short lowercase word.
    #[error("stage `{0}` is not a valid name: use 1–32 lowercase letters, digits, `-` or `_`")]
    BadName(String),
    /// A stage appears twice.
    #[error("stage `{0}` appears twice")]
    Duplicate(String),
}

/// Checks a workflow's stage names.
pub fn check_workflow(stages: &[String]) -> Result<(), WorkflowError> {
    if stages.is_empty() {
        return Err(WorkflowError::Empty);
    }
    if stages.len() > MAX_STAGES {
        return Err(WorkflowError::TooLong);
    }
    for (i, s) in stages.iter().enumerate() {
        let ok = (1..=32).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
        if !ok {
            return Err(WorkflowError::BadName(s.chars().take(40).collect()));
        }
        if stages[..i].contains(s) {
            return Err(WorkflowError::Duplicate(s.clone()));
        }
    }
    Ok(())
}

/// Where a task goes when its current stage is handed off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterHandOff {
    /// The next stage, by index.
    Stage(usize),
    /// That was the last stage: the task is done.
    Done,
}

/// The step after handing off stage `current` of a workflow of `len` stages.
pub fn after_hand_off(current: usize, len: usize) -> AfterHandOff {
    if current + 1 < len {
        AfterHandOff::Stage(current + 1)
    } else {
        AfterHandOff::Done
    }
}

/// What to do when a task's run ended without handing its stage off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Restaff {
    /// Staff the stage again (this is attempt number `n`, 1-based).
    Again(u32),
    /// Staff it again without counting the run that ended (its device lost it).
    Uncounted,
    /// Its devices keep losing its runs: flag the task for a person (a flapping or
    /// hostile device must not staff runs without end).
    FlagDevices,
    /// Attempts used up: flag the task for a person instead of looping.
    Flag,
    /// The run could not be set up: flag the task at once with the cause (trying again
    /// would fail the same way).
    FlagSetup,
}

/// How many times more runs than `max_runs` a stage's devices may lose before the task
/// is flagged.
pub const DEVICE_LOSS_FACTOR: u32 = 5;

/// Whether a stage whose run ended without a hand-off is staffed again, given whose
/// fault the end was, the runs counted on it (the one that ended included), the runs
/// its devices lost (likewise) and the most runs a stage gets.
pub fn restaff(fault: Fault, runs_made: u32, device_losses: u32, max_runs: u32) -> Restaff {
    match fault {
        Fault::Setup => Restaff::FlagSetup,
        Fault::Device if device_losses >= max_runs.max(1).saturating_mul(DEVICE_LOSS_FACTOR) => Restaff::FlagDevices,
        Fault::Device => Restaff::Uncounted,
        Fault::Run if runs_made < max_runs => Restaff::Again(runs_made + 1),
        Fault::Run => Restaff::Flag,
    }
}

/// Why a task is flagged when its next run cannot start in its sandbox, which is `state`
/// (wrapping up after Finish session), and what a person does about it.
pub fn busy_sandbox_flag(state: crate::SandboxState) -> String {
    format!("the task's sandbox is {state} (after Finish session): Mark done closes it, then Launch session starts a fresh one")
}

/// A stage's display name: `Code`.
pub fn stage_label(stage: &str) -> String {
    let mut c = stage.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stage_for_people_has_no_agent() {
        assert_eq!(stage_agent(Some("human")), None);
        assert_eq!(stage_agent(Some("Human")), None);
        assert_eq!(stage_agent(None), None);
        assert_eq!(stage_agent(Some("claude-1")), Some("claude-1"));
    }

    #[test]
    fn statuses_round_trip() {
        for s in TaskStatus::ALL {
            assert_eq!(TaskStatus::parse(s.as_str()), Some(s));
        }
        assert!(!TaskStatus::Open.is_finished());
        assert!(TaskStatus::Done.is_finished() && TaskStatus::Cancelled.is_finished() && TaskStatus::Abandoned.is_finished());
        assert_eq!(TaskStatus::parse("closed"), None);
    }

    #[test]
    fn workflows_are_checked() {
        let ok: Vec<String> = DEFAULT_STAGES.iter().map(|s| s.to_string()).collect();
        assert_eq!(check_workflow(&ok), Ok(()));
        assert_eq!(check_workflow(&[]), Err(WorkflowError::Empty));
        assert!(matches!(check_workflow(&["Plan".into()]), Err(WorkflowError::BadName(_))));
        assert!(matches!(check_workflow(&["a b".into()]), Err(WorkflowError::BadName(_))));
        assert!(matches!(check_workflow(&["".into()]), Err(WorkflowError::BadName(_))));
        assert_eq!(check_workflow(&["a".into(), "a".into()]), Err(WorkflowError::Duplicate("a".into())));
        let long: Vec<String> = (0..21).map(|i| format!("s{i}")).collect();
        assert_eq!(check_workflow(&long), Err(WorkflowError::TooLong));
    }

    #[test]
    fn hand_offs_walk_the_stages_then_finish() {
        assert_eq!(after_hand_off(0, 5), AfterHandOff::Stage(1));
        assert_eq!(after_hand_off(3, 5), AfterHandOff::Stage(4));
        assert_eq!(after_hand_off(4, 5), AfterHandOff::Done);
        assert_eq!(after_hand_off(0, 1), AfterHandOff::Done);
    }

    #[test]
    fn only_the_merge_stage_merges_by_default() {
        let merging: Vec<&str> = DEFAULT_STAGES.into_iter().filter(|s| merges_by_default(s)).collect();
        assert_eq!(merging, ["merge"]);
    }

    #[test]
    fn restaffing_is_bounded() {
        assert_eq!(restaff(Fault::Run, 0, 0, 3), Restaff::Again(1));
        assert_eq!(restaff(Fault::Run, 2, 0, 3), Restaff::Again(3));
        assert_eq!(restaff(Fault::Run, 3, 0, 3), Restaff::Flag);
        assert_eq!(restaff(Fault::Run, 0, 0, 0), Restaff::Flag);
    }

    #[test]
    fn a_lost_device_costs_no_attempt_and_a_set_up_failure_is_flagged_at_once() {
        assert_eq!(restaff(Fault::Device, 3, 1, 3), Restaff::Uncounted);
        assert_eq!(restaff(Fault::Device, 1, 14, 3), Restaff::Uncounted);
        assert_eq!(restaff(Fault::Device, 1, 15, 3), Restaff::FlagDevices, "bounded all the same");
        assert_eq!(restaff(Fault::Setup, 1, 0, 3), Restaff::FlagSetup);
    }

    #[test]
    fn stage_labels() {
        assert_eq!(stage_label("code"), "Code");
        assert_eq!(stage_label(""), "");
    }
}

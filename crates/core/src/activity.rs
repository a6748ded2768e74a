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
    /// A task was filed.
    TaskCreated,
    /// A stage was handed off and the task moved on (with the hand-off note).
    StageAdvanced,
    /// A comment on a task.
    Comment,
    /// A blocker was filed.
    BlockerFiled,
    /// A blocker was resolved.
    BlockerResolved,
    /// An agent asked a human a question.
    QuestionAsked,
    /// A human answered.
    QuestionAnswered,
    /// The task finished (done, cancelled or abandoned).
    TaskFinished,
    /// A stage was left without a live session too many times: a human must look.
    TaskFlagged,
    /// New commits in a task run's worktree.
    Commit,
    /// A merge stage's hand-off merged the task's branch into its base branch.
    Merged,
    /// A merge stage's hand-off could not merge (conflicts, uncommitted work…): the
    /// stage stays where it is.
    MergeRefused,
    /// A webhook endpoint was added, removed, re-enabled or had its secret rotated.
    WebhookChanged,
    /// Finish session: a person moved a task's sandbox toward a normal close.
    FinishRequested,
    /// Mark done: a person closed a task's sandbox for good.
    MarkedDone,
    /// Abandon: a person tore a task's sandbox down without merging.
    Abandoned,
    /// An admin revoked a device's credential.
    DeviceRevoked,
    /// An owner invited someone to the workspace (with the role they will get).
    MemberInvited,
    /// An owner withdrew an unused invitation.
    InviteRevoked,
    /// Someone accepted an invitation and became a member.
    MemberJoined,
    /// An owner changed a member's role.
    RoleChanged,
    /// An owner removed a member (their tokens and sign-ins revoked; their history kept).
    MemberRemoved,
    /// A member set or changed their password.
    PasswordChanged,
    /// A personal API token was issued (`drover login`).
    TokenIssued,
    /// A personal API token was revoked.
    TokenRevoked,
    /// A run's model changed mid-session (a `/model` switch seen in its records).
    RouteChanged,
    /// A task's or the workspace's spend cap was reached; the spending run is stopped.
    SpendCapReached,
    /// A device traded its one-time enrollment token for its own credential.
    DeviceEnrolled,
    /// A skill was added, changed or removed.
    SkillChanged,
    /// An owner or admin started a session outside the sandbox (`--unconfined`).
    UnconfinedStart,
    /// A person changed the branch a task starts from (before its first run).
    TaskBaseChanged,
    /// A task's sandbox was set up (worktree made, skills placed) for a stage that starts
    /// only when a person activates it.
    SandboxPrepared,
    /// A person activated a prepared stage: its run starts.
    Activated,
    /// A run began waiting on a person (a held tool call, a finished turn, a guess).
    AttentionRaised,
    /// A person decided what a run waited on (approve, approve always, deny).
    AttentionDecided,
}

impl EventKind {
    /// Every kind.
    pub const ALL: [EventKind; 41] = [
        EventKind::SessionStarted,
        EventKind::SessionEnded,
        EventKind::SessionKilled,
        EventKind::SessionConnectionLost,
        EventKind::InputSent,
        EventKind::RecordingError,
        EventKind::TaskCreated,
        EventKind::StageAdvanced,
        EventKind::Comment,
        EventKind::BlockerFiled,
        EventKind::BlockerResolved,
        EventKind::QuestionAsked,
        EventKind::QuestionAnswered,
        EventKind::TaskFinished,
        EventKind::TaskFlagged,
        EventKind::Commit,
        EventKind::Merged,
        EventKind::MergeRefused,
        EventKind::WebhookChanged,
        EventKind::FinishRequested,
        EventKind::MarkedDone,
        EventKind::Abandoned,
        EventKind::DeviceRevoked,
        EventKind::MemberInvited,
        EventKind::InviteRevoked,
        EventKind::MemberJoined,
        EventKind::RoleChanged,
        EventKind::MemberRemoved,
        EventKind::PasswordChanged,
        EventKind::TokenIssued,
        EventKind::TokenRevoked,
        EventKind::RouteChanged,
        EventKind::SpendCapReached,
        EventKind::DeviceEnrolled,
        EventKind::SkillChanged,
        EventKind::UnconfinedStart,
        EventKind::TaskBaseChanged,
        EventKind::SandboxPrepared,
        EventKind::Activated,
        EventKind::AttentionRaised,
        EventKind::AttentionDecided,
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
            EventKind::TaskCreated => "task_created",
            EventKind::StageAdvanced => "stage_advanced",
            EventKind::Comment => "comment",
            EventKind::BlockerFiled => "blocker_filed",
            EventKind::BlockerResolved => "blocker_resolved",
            EventKind::QuestionAsked => "question_asked",
            EventKind::QuestionAnswered => "question_answered",
            EventKind::TaskFinished => "task_finished",
            EventKind::TaskFlagged => "task_flagged",
            EventKind::Commit => "commit",
            EventKind::Merged => "merged",
            EventKind::MergeRefused => "merge_refused",
            EventKind::WebhookChanged => "webhook_changed",
            EventKind::FinishRequested => "finish_requested",
            EventKind::MarkedDone => "marked_done",
            EventKind::Abandoned => "abandoned",
            EventKind::DeviceRevoked => "device_revoked",
            EventKind::MemberInvited => "member_invited",
            EventKind::InviteRevoked => "invite_revoked",
            EventKind::MemberJoined => "member_joined",
            EventKind::RoleChanged => "role_changed",
            EventKind::MemberRemoved => "member_removed",
            EventKind::PasswordChanged => "password_changed",
            EventKind::TokenIssued => "token_issued",
            EventKind::TokenRevoked => "token_revoked",
            EventKind::RouteChanged => "route_changed",
            EventKind::SpendCapReached => "spend_cap_reached",
            EventKind::DeviceEnrolled => "device_enrolled",
            EventKind::SkillChanged => "skill_changed",
            EventKind::UnconfinedStart => "unconfined_start",
            EventKind::TaskBaseChanged => "task_base_changed",
            EventKind::SandboxPrepared => "sandbox_prepared",
            EventKind::Activated => "activated",
            EventKind::AttentionRaised => "attention_raised",
            EventKind::AttentionDecided => "attention_decided",
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
            EventKind::TaskCreated => "task created",
            EventKind::StageAdvanced => "stage advanced",
            EventKind::Comment => "comment",
            EventKind::BlockerFiled => "blocker filed",
            EventKind::BlockerResolved => "blocker resolved",
            EventKind::QuestionAsked => "question asked",
            EventKind::QuestionAnswered => "question answered",
            EventKind::TaskFinished => "task finished",
            EventKind::TaskFlagged => "task needs a human",
            EventKind::Commit => "commit",
            EventKind::Merged => "branch merged",
            EventKind::MergeRefused => "merge refused",
            EventKind::WebhookChanged => "webhook changed",
            EventKind::FinishRequested => "finish session",
            EventKind::MarkedDone => "marked done",
            EventKind::Abandoned => "sandbox abandoned",
            EventKind::DeviceRevoked => "device revoked",
            EventKind::MemberInvited => "member invited",
            EventKind::InviteRevoked => "invitation withdrawn",
            EventKind::MemberJoined => "member joined",
            EventKind::RoleChanged => "role changed",
            EventKind::MemberRemoved => "member removed",
            EventKind::PasswordChanged => "password changed",
            EventKind::TokenIssued => "API token issued",
            EventKind::TokenRevoked => "API token revoked",
            EventKind::RouteChanged => "route changed",
            EventKind::SpendCapReached => "spend cap reached",
            EventKind::DeviceEnrolled => "device enrolled",
            EventKind::SkillChanged => "skill changed",
            EventKind::UnconfinedStart => "session started unconfined",
            EventKind::TaskBaseChanged => "base branch changed",
            EventKind::SandboxPrepared => "sandbox prepared",
            EventKind::Activated => "activated",
            EventKind::AttentionRaised => "waiting on a person",
            EventKind::AttentionDecided => "decided",
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

/// What only those who may drop in to a session see of it: the text typed into it (Send
/// box input) and its full command line (which can carry keys and prompts). Everyone
/// else in the workspace sees that it happened, by whom and when.
pub mod need_to_know {
    use super::EventKind;

    /// A command line as those who may not drop in see it: the program, then `…` if
    /// there was more.
    pub fn command(command: &[String]) -> Vec<String> {
        let mut out: Vec<String> = command.iter().take(1).cloned().collect();
        if command.len() > 1 {
            out.push("…".into());
        }
        out
    }

    /// The private part of an event's detail.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Private {
        /// A field holding typed text: removed.
        Text(&'static str),
        /// A field holding a command line: cut to its program ([`command`]).
        CommandLine(&'static str),
    }

    /// Conceals the private part of an event's detail (`kind` as stored) in place, and
    /// marks it `concealed`: what members who may not drop in see, and what webhooks
    /// carry.
    pub fn conceal(kind: &str, detail: &mut serde_json::Value) {
        let (Some(part), Some(obj)) = (EventKind::parse(kind).and_then(private), detail.as_object_mut()) else { return };
        let concealed = match part {
            Private::Text(field) => obj.remove(field).is_some(),
            Private::CommandLine(field) => match obj.get(field).and_then(|c| c.as_array()) {
                Some(argv) => {
                    let argv: Vec<String> = argv.iter().filter_map(|a| a.as_str().map(str::to_string)).collect();
                    obj.insert(field.into(), serde_json::json!(command(&argv)));
                    true
                }
                None => false,
            },
        };
        if concealed {
            obj.insert("concealed".into(), serde_json::Value::Bool(true));
        }
    }

    /// What of an event of `kind` is private, if anything.
    pub fn private(kind: EventKind) -> Option<Private> {
        match kind {
            EventKind::InputSent => Some(Private::Text("text")),
            EventKind::SessionStarted => Some(Private::CommandLine("command")),
            EventKind::AttentionRaised => Some(Private::Text("subject")),
            EventKind::AttentionDecided => Some(Private::Text("message")),
            _ => None,
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn typed_text_and_command_lines_are_private_and_nothing_else() {
            assert_eq!(private(EventKind::InputSent), Some(Private::Text("text")));
            assert_eq!(private(EventKind::SessionStarted), Some(Private::CommandLine("command")));
            assert_eq!(private(EventKind::Comment), None, "a task comment is for the workspace");
            assert_eq!(command(&["claude".into(), "-p".into(), "secret plan".into()]), vec!["claude".to_string(), "…".to_string()]);
            assert_eq!(command(&["bash".into()]), vec!["bash".to_string()]);
        }

        #[test]
        fn concealing_removes_typed_text_and_cuts_command_lines() {
            let mut typed = serde_json::json!({ "text": "secret", "by": "ann" });
            conceal("input_sent", &mut typed);
            assert_eq!(typed, serde_json::json!({ "by": "ann", "concealed": true }));
            let mut started = serde_json::json!({ "command": ["claude", "--", "plan"] });
            conceal("session_started", &mut started);
            assert_eq!(started, serde_json::json!({ "command": ["claude", "…"], "concealed": true }));
            let mut held = serde_json::json!({ "kind": "permission", "subject": "make deploy" });
            conceal("attention_raised", &mut held);
            assert_eq!(held, serde_json::json!({ "kind": "permission", "concealed": true }));
            let mut comment = serde_json::json!({ "text": "public" });
            conceal("comment", &mut comment);
            assert_eq!(comment, serde_json::json!({ "text": "public" }));
        }
    }
}

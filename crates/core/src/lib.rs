//! Drover's domain: the vocabulary of DESIGN.md as plain types, the state machines
//! (a run's outcome, a sandbox's lifecycle), the permission rules and the small pure
//! functions the edges share (how audited input is encoded, how names are checked).
//!
//! Nothing in this crate does I/O or is async; every rule is unit-tested here.

pub mod activity;
pub mod argv;
pub mod attention;
pub mod backoff;
pub mod branch;
pub mod confinement;
pub mod device_link;
pub mod doctor;
pub mod egress;
pub mod harness;
pub mod ids;
pub mod input;
pub mod liveness;
pub mod names;
pub mod notify;
pub mod outcome;
mod outcome_words;
pub mod permissions;
pub mod sandbox;
pub mod schedule;
pub mod skill;
pub mod spend;
pub mod task;
pub mod turn;
pub mod webhook;
pub mod why;

pub use ids::{
    AgentId, AttentionId, DeviceId, EventId, IdError, InviteId, MemberId, MessageId, NoteId, PushMessageId, PushSubscriptionId, RepoId,
    SandboxId, SessionId, TaskId, TokenId, WebhookId, WorkspaceId,
};
pub use outcome::{ExitStatus, Outcome, RunEnd};
pub use sandbox::SandboxState;

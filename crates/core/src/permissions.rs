//! The permission matrix of DESIGN.md, as a pure function of who asks and what for.

use serde::{Deserialize, Serialize};

/// A member's role in a workspace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Full control, including roles.
    Owner,
    /// Administers devices, sessions and settings.
    Admin,
    /// Works with tasks and agents they operate.
    Member,
}

impl Role {
    /// The lowercase word.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Owner => "owner",
            Role::Admin => "admin",
            Role::Member => "member",
        }
    }

    /// Parses the lowercase word.
    pub fn parse(s: &str) -> Option<Role> {
        [Role::Owner, Role::Admin, Role::Member].into_iter().find(|r| r.as_str() == s)
    }

    /// Owners and admins.
    pub fn is_admin(self) -> bool {
        match self {
            Role::Owner | Role::Admin => true,
            Role::Member => false,
        }
    }
}

/// Who is calling, as far as permissions care.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Caller {
    /// A human member with a role; `operates_agent` says whether they are the operator of
    /// the session's agent (or, for a task-free session, the person who started it).
    Member {
        /// The member's role.
        role: Role,
        /// True when they operate the session's agent.
        operates_agent: bool,
        /// True when they are the stage's pinned assignee.
        pinned_assignee: bool,
    },
    /// An agent calling with its own session's token; `own_session` says whether the
    /// target is that same session.
    Agent {
        /// True when acting on its own session/stage.
        own_session: bool,
    },
    /// A device daemon (only speaks the device protocol).
    Device,
}

/// Something a caller may want to do to a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Open the live terminal, type, Send box, scrollback, Stop.
    DropIn,
    /// See a session in lists and its summary.
    View,
    /// Finish session.
    Finish,
    /// Mark done, Abandon.
    Retire,
    /// Hand off a stage, comment, file/resolve a blocker, ask a human.
    AgentReport,
}

/// Whether `caller` may perform `action`.
pub fn allowed(caller: Caller, action: Action) -> bool {
    match (caller, action) {
        (Caller::Member { .. }, Action::View) => true,
        (Caller::Member { role, operates_agent, .. }, Action::DropIn) => role.is_admin() || operates_agent,
        (Caller::Member { role, pinned_assignee, .. }, Action::Finish) => role.is_admin() || pinned_assignee,
        (Caller::Member { role, .. }, Action::Retire) => role.is_admin(),
        (Caller::Member { .. }, Action::AgentReport) => false,
        (Caller::Agent { own_session }, Action::AgentReport) => own_session,
        (Caller::Agent { .. }, Action::DropIn | Action::View | Action::Finish | Action::Retire) => false,
        (Caller::Device, _) => false,
    }
}

/// Something a member may want to do to the workspace itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkspaceAction {
    /// Invite someone, or change a member's role.
    ManageMembers,
    /// Register or revoke devices, manage webhooks, export the audit trail.
    Administer,
    /// Read the workspace: lists, tasks, events; file tasks; register agents they operate.
    Work,
    /// Start a session outside the sandbox (`--unconfined`): it reaches everything the
    /// device's user can.
    StartUnconfined,
}

/// Whether a member with `role` may perform `action` on the workspace.
pub fn workspace_allowed(role: Role, action: WorkspaceAction) -> bool {
    match action {
        WorkspaceAction::ManageMembers => role == Role::Owner,
        WorkspaceAction::Administer | WorkspaceAction::StartUnconfined => role.is_admin(),
        WorkspaceAction::Work => true,
    }
}

/// Something a member may want to do to a task itself, rather than to its runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskAction {
    /// Call the task off (it will not run again).
    Cancel,
    /// Change the task before its first run (its base branch).
    Change,
}

/// Whether a member with `role` may perform `action` on a task; `filed_it` says whether
/// they are the member who filed it.
pub fn task_allowed(role: Role, filed_it: bool, action: TaskAction) -> bool {
    match action {
        TaskAction::Cancel | TaskAction::Change => role.is_admin() || filed_it,
    }
}

/// Why a role change is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RoleChangeRefused {
    /// Only owners change roles.
    #[error("only a workspace owner can change roles")]
    NotOwner,
    /// The workspace would be left without an owner.
    #[error("the workspace must keep at least one owner: make someone else owner first")]
    LastOwner,
}

/// Whether a member with `caller` role may change a member whose role is `from` to `to`,
/// when the workspace has `owners` owners.
pub fn role_change(caller: Role, from: Role, to: Role, owners: usize) -> Result<(), RoleChangeRefused> {
    if caller != Role::Owner {
        return Err(RoleChangeRefused::NotOwner);
    }
    if from == Role::Owner && to != Role::Owner && owners <= 1 {
        return Err(RoleChangeRefused::LastOwner);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workspace_actions_follow_roles() {
        assert!(workspace_allowed(Role::Owner, WorkspaceAction::ManageMembers));
        assert!(!workspace_allowed(Role::Admin, WorkspaceAction::ManageMembers));
        assert!(workspace_allowed(Role::Admin, WorkspaceAction::Administer));
        assert!(!workspace_allowed(Role::Member, WorkspaceAction::Administer));
        assert!(workspace_allowed(Role::Owner, WorkspaceAction::StartUnconfined));
        assert!(workspace_allowed(Role::Admin, WorkspaceAction::StartUnconfined));
        assert!(!workspace_allowed(Role::Member, WorkspaceAction::StartUnconfined));
        for r in [Role::Owner, Role::Admin, Role::Member] {
            assert!(workspace_allowed(r, WorkspaceAction::Work));
        }
    }

    #[test]
    fn a_task_is_changed_or_cancelled_by_who_filed_it_or_an_admin() {
        for action in [TaskAction::Cancel, TaskAction::Change] {
            assert!(task_allowed(Role::Member, true, action));
            assert!(!task_allowed(Role::Member, false, action));
            assert!(task_allowed(Role::Admin, false, action));
            assert!(task_allowed(Role::Owner, false, action));
        }
    }

    #[test]
    fn role_changes_are_owners_and_keep_an_owner() {
        assert_eq!(role_change(Role::Admin, Role::Member, Role::Admin, 1), Err(RoleChangeRefused::NotOwner));
        assert_eq!(role_change(Role::Owner, Role::Member, Role::Admin, 1), Ok(()));
        assert_eq!(role_change(Role::Owner, Role::Owner, Role::Admin, 1), Err(RoleChangeRefused::LastOwner));
        assert_eq!(role_change(Role::Owner, Role::Owner, Role::Member, 2), Ok(()));
        assert_eq!(role_change(Role::Owner, Role::Owner, Role::Owner, 1), Ok(()));
    }

    fn member(role: Role, operates_agent: bool) -> Caller {
        Caller::Member { role, operates_agent, pinned_assignee: false }
    }

    #[test]
    fn drop_in_is_admins_and_the_operator() {
        assert!(allowed(member(Role::Owner, false), Action::DropIn));
        assert!(allowed(member(Role::Admin, false), Action::DropIn));
        assert!(allowed(member(Role::Member, true), Action::DropIn));
        assert!(!allowed(member(Role::Member, false), Action::DropIn));
    }

    #[test]
    fn agents_never_drop_in_even_on_their_own_session() {
        assert!(!allowed(Caller::Agent { own_session: true }, Action::DropIn));
        assert!(allowed(Caller::Agent { own_session: true }, Action::AgentReport));
        assert!(!allowed(Caller::Agent { own_session: false }, Action::AgentReport));
    }

    #[test]
    fn retire_is_admins_only_finish_also_assignee() {
        assert!(!allowed(member(Role::Member, true), Action::Retire));
        assert!(allowed(member(Role::Admin, false), Action::Retire));
        let assignee = Caller::Member { role: Role::Member, operates_agent: false, pinned_assignee: true };
        assert!(allowed(assignee, Action::Finish));
        assert!(!allowed(member(Role::Member, false), Action::Finish));
    }

    #[test]
    fn devices_act_only_through_the_device_protocol() {
        for a in [Action::DropIn, Action::View, Action::Finish, Action::Retire, Action::AgentReport] {
            assert!(!allowed(Caller::Device, a));
        }
    }

    #[test]
    fn roles_round_trip() {
        for r in [Role::Owner, Role::Admin, Role::Member] {
            assert_eq!(Role::parse(r.as_str()), Some(r));
        }
    }
}

//! Arguments of the workspace commands: members, sign-in, tokens, skills, prices, spend, audit, webhooks.

use std::path::PathBuf;

use clap::{Args, Subcommand};

/// `drover skill …`.
#[derive(Debug, Subcommand)]
pub enum SkillCmd {
    /// List the workspace's skills.
    List,
    /// Add or replace a skill from a folder holding a SKILL.md (owners and admins).
    Add {
        /// The skill's name.
        name: String,
        /// The folder (text files only; at most 64 files, 256 KB).
        dir: PathBuf,
    },
    /// Remove a skill (owners and admins); runs started later no longer get it.
    Remove {
        /// The skill's name.
        name: String,
    },
}

/// `drover prices …`.
#[derive(Debug, Subcommand)]
pub enum PricesCmd {
    /// The shipped prices and the workspace's own, USD per million tokens.
    List,
    /// Price a model for this workspace (wins over the shipped price); running sessions are re-priced.
    Set {
        /// The model id (or the start of dated ids).
        model: String,
        /// Uncached input, USD per million tokens.
        input: f64,
        /// Output, USD per million tokens.
        output: f64,
        /// Cache writes (5-minute), USD per million tokens (default: the input price).
        #[arg(long)]
        cache_write: Option<f64>,
        /// Cache writes (1-hour), USD per million tokens (default: the 5-minute price).
        #[arg(long)]
        cache_write_1h: Option<f64>,
        /// Cache reads, USD per million tokens (default: the input price).
        #[arg(long)]
        cache_read: Option<f64>,
    },
    /// Drop the workspace's own price of a model (the shipped one, if any, applies again).
    Unset {
        /// The model id.
        model: String,
    },
}

/// `drover spend`.
#[derive(Debug, Args)]
pub struct SpendArgs {
    /// Days to show.
    #[arg(long, default_value_t = 30)]
    pub days: u32,
    /// Set the workspace's monthly cap in USD (owners and admins); `--cap none` clears it.
    #[arg(long)]
    pub cap: Option<String>,
}

/// `drover login`.
#[derive(Debug, Args)]
pub struct LoginArgs {
    /// The server's URL (default: DROVER_URL, the saved one, or http://127.0.0.1:7070).
    #[arg(long)]
    pub url: Option<String>,
    /// Your member name.
    #[arg(long)]
    pub name: String,
    /// Read the password from standard input (for scripts) instead of prompting.
    #[arg(long)]
    pub password_stdin: bool,
    /// What the token is for, shown in `drover token list` (default: this machine's name).
    #[arg(long)]
    pub label: Option<String>,
}

/// `drover password`.
#[derive(Debug, Args)]
pub struct PasswordArgs {
    /// Also revoke every API token of yours but the one this command uses (after a
    /// leak: every `drover login` elsewhere must sign in again).
    #[arg(long)]
    pub revoke_tokens: bool,
}

/// `drover token …`.
#[derive(Debug, Subcommand)]
pub enum TokenCmd {
    /// List your tokens (or, owners, a member's), revoked ones included.
    List {
        /// Whose tokens (owners; default: yours).
        #[arg(long)]
        member: Option<String>,
    },
    /// Issue another token (printed once), e.g. for CI.
    Create {
        /// What it is for.
        label: String,
    },
    /// Revoke one of your tokens (owners: anyone's).
    Revoke {
        /// The token's id (tok_…).
        id: String,
    },
}

/// `drover member …`.
#[derive(Debug, Subcommand)]
pub enum MemberCmd {
    /// List members and roles.
    List,
    /// Create an invitation link (owners); the invitee picks a name and password.
    Invite {
        /// The role they get: member, admin or owner.
        #[arg(long, default_value = "member")]
        role: String,
        /// How long the link works, in hours.
        #[arg(long, default_value_t = 72)]
        hours: u32,
    },
    /// List invitations not yet used (owners).
    Invites,
    /// Withdraw an unused invitation (owners).
    Uninvite {
        /// The invitation's id (inv_…).
        id: String,
    },
    /// Change a member's role (owners).
    Role {
        /// The member's name.
        name: String,
        /// The new role: member, admin or owner.
        role: String,
    },
    /// Remove a member (owners; never the last owner): their tokens and browser sign-ins
    /// stop working at once and their open terminals close; what they did stays theirs.
    Remove {
        /// The member's name.
        name: String,
    },
}

/// Audit commands.
#[derive(Debug, Subcommand)]
pub enum AuditCmd {
    /// Every event from a time on, as JSON lines (actor, time, kind, session, task, details).
    Export {
        /// From this time (2026-11-30T09:00:00Z) or date (2026-11-30, midnight UTC).
        #[arg(long)]
        since: String,
        /// Up to this time or date (exclusive).
        #[arg(long)]
        until: Option<String>,
    },
}

/// Webhook commands.
#[derive(Debug, Subcommand)]
pub enum WebhookCmd {
    /// Register an endpoint; prints its id and signing secret (shown once).
    Add {
        /// Where deliveries go (http or https).
        url: String,
        /// An event type to receive (repeat): session.started, session.ended,
        /// session.lost, task.stage_advanced, task.input_requested, task.finished,
        /// spend.cap_reached, task.needs_person.
        #[arg(long = "event", required = true)]
        events: Vec<String>,
    },
    /// List endpoints.
    List,
    /// Remove an endpoint and its delivery log.
    Remove {
        /// The endpoint's id.
        id: String,
    },
    /// Give an endpoint a new secret (the old one signs too for a day); prints it.
    Rotate {
        /// The endpoint's id.
        id: String,
    },
    /// Send to a disabled endpoint again.
    Enable {
        /// The endpoint's id.
        id: String,
    },
    /// An endpoint's delivery log, newest first.
    Deliveries {
        /// The endpoint's id.
        id: String,
    },
    /// Send a delivery again now, with the same message id.
    Redeliver {
        /// The endpoint's id.
        id: String,
        /// The delivery's message id (msg_…).
        message: String,
    },
}

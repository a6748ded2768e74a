//! The command line, as typed (validated by clap; resolved in the command modules).

use std::path::PathBuf;

use clap::{Parser, Subcommand};

mod config;
mod daemons;
mod doctor;
mod inbox;
mod install;
mod session;
mod task;
mod workspace;

pub use config::*;
pub use daemons::*;
pub use doctor::*;
pub use inbox::*;
pub use install::*;
pub use session::*;
pub use task::*;
pub use workspace::*;

/// Drover runs coding-agent sessions on your machines and lets you watch and steer them.
#[derive(Debug, Parser)]
#[command(name = "drover", version, propagate_version = true)]
#[command(about = "Drover runs coding-agent sessions on your machines and lets you watch and steer them.")]
pub struct Cli {
    /// Print machine-readable JSON instead of tables.
    #[arg(long, global = true)]
    pub json: bool,
    /// A private CA's certificate (PEM) to trust for an `https://` server, besides the
    /// system's roots (which `SSL_CERT_FILE` and `SSL_CERT_DIR` also set).
    #[arg(long, global = true, env = "DROVER_CA_CERT", value_name = "FILE")]
    pub ca_cert: Option<PathBuf>,
    /// How `up`, `server` and `device` write their logs to stderr: `text`, or `json`
    /// (one object a line, with the span fields: request id, device, session, task).
    /// `RUST_LOG` says what is logged.
    #[arg(long, global = true, env = "DROVER_LOG_FORMAT", value_enum, default_value_t = crate::logging::LogFormat::Text)]
    pub log_format: crate::logging::LogFormat,
    /// The configuration file of `up`, `server` and `device` (default:
    /// $DROVER_HOME/drover.toml, if it exists). Flags and environment variables win over it.
    #[arg(long, global = true, env = "DROVER_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Top-level commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a server and a local device in one process (SQLite under $DROVER_HOME).
    Up(UpArgs),
    /// Run only the server.
    Server(ServerArgs),
    /// Create the database if needed and bring its schema up to date (before starting
    /// replicas of a new version), then exit.
    Migrate(DatabaseArgs),
    /// Write every workspace's data (rows and session output) to a file: one half of a
    /// move between databases (stop the servers first).
    Export(ExportArgs),
    /// Load a `drover export` file into a new, empty database (SQLite or PostgreSQL).
    Import(ImportArgs),
    /// Copy the SQLite database while the server runs, into a file that can be put in
    /// its place (for PostgreSQL it says how to use pg_dump instead).
    Backup(BackupArgs),
    /// Check this machine for what would break Drover here (server, TLS, clock, sandbox,
    /// PTYs, git, harnesses, disk, file modes, slots), each with its fix.
    Doctor(DoctorArgs),
    /// Run the device daemon (`drover device --server URL --token T`), or manage devices.
    #[command(args_conflicts_with_subcommands = true)]
    Device(DeviceCmd),
    /// Start, list, watch and steer sessions.
    #[command(subcommand)]
    Session(SessionCmd),
    /// Print a one-time link that signs this browser in to the web app.
    Ui,
    /// The workspace's model spend by agent, model and day; set its monthly cap.
    Spend(SpendArgs),
    /// Skills: folders of instructions installed into each task run's sandbox.
    #[command(subcommand)]
    Skill(SkillCmd),
    /// The price table: the shipped prices and the workspace's own (owners and admins set them).
    #[command(subcommand)]
    Prices(PricesCmd),
    /// Sign in with your name and password; saves a personal API token for the CLI.
    Login(LoginArgs),
    /// Set or change your password (for `drover login` and the web sign-in form).
    Password(PasswordArgs),
    /// Your personal API tokens: list, create, revoke.
    #[command(subcommand)]
    Token(TokenCmd),
    /// The workspace's members: list, invite and change roles (owners).
    #[command(subcommand)]
    Member(MemberCmd),
    /// File, follow and steer tasks; inside an agent's run, hand off, comment, block, ask.
    #[command(subcommand)]
    Task(TaskCmd),
    /// Register and list agents.
    #[command(subcommand)]
    Agent(AgentCmd),
    /// Show or set the workspace's workflow: the stages new tasks go through.
    #[command(subcommand)]
    Workflow(WorkflowCmd),
    /// Webhook endpoints: add, list, remove, rotate secrets, deliveries (owners and admins).
    #[command(subcommand)]
    Webhook(WebhookCmd),
    /// The audit trail (owners and admins).
    #[command(subcommand)]
    Audit(AuditCmd),
    /// Register repositories and the device clones that have them.
    #[command(subcommand)]
    Repo(RepoCmd),
    /// List sandboxes (the Sessions page's list).
    #[command(subcommand)]
    Sandbox(SandboxCmd),
    /// What waits on a person: held tool calls, finished turns, questions (newest first).
    Inbox(InboxArgs),
    /// Approve a held tool call (only those who may drop in to its run).
    Approve(ApproveArgs),
    /// Deny a held tool call, with a message to the agent.
    Deny(DenyArgs),
    /// What you are told of in your browsers (Web Push): show, set, test.
    #[command(subcommand)]
    Notify(NotifyCmd),
    /// The hooks a harness runs inside a Drover run (not for direct use).
    #[command(subcommand, hide = true)]
    Hook(HookCmd),
    /// The configuration file (drover.toml): show the effective settings and where each came from.
    #[command(subcommand)]
    Config(ConfigCmd),
    /// Serve an agent's task tools (advance, comment, block, unblock, ask) over MCP on stdio.
    Mcp,
    /// Print a completion script for a shell (`drover completions bash >/etc/bash_completion.d/drover`).
    Completions(CompletionsArgs),
    /// Print the manual page, or write one per command into a directory (`--out DIR`).
    Man(ManArgs),
    /// The device daemon's shim launcher, which forks each session's shim (started by
    /// the daemon, its socket as standard input; not for direct use).
    #[command(hide = true, name = "shim-launcher")]
    ShimLauncher,
}

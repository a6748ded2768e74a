//! The command line, as typed (validated by clap; resolved in the command modules).

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

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
    /// Serve an agent's task tools (advance, comment, block, unblock, ask) over MCP on stdio.
    Mcp,
    /// The per-session shim (started by the device daemon; not for direct use).
    #[command(hide = true)]
    Shim {
        /// The session directory.
        dir: PathBuf,
    },
}

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

/// Settings shared by `up` and `server`.
#[derive(Debug, Args)]
pub struct ServerArgs {
    /// Address to listen on. Plain HTTP only on loopback, unless --insecure-http or a
    /// --trusted-proxy says TLS ends in front of it; with --tls-cert, anywhere.
    #[arg(long, default_value = "127.0.0.1:7070", env = "DROVER_LISTEN")]
    pub listen: SocketAddr,
    /// The server's TLS certificate chain (PEM, leaf first): it then serves only HTTPS and
    /// WSS. Reloaded when the file changes, and on SIGHUP.
    #[arg(long, env = "DROVER_TLS_CERT", value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM).
    #[arg(long, env = "DROVER_TLS_KEY", value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Serve plain HTTP on a non-loopback address: every credential, keystroke and line of
    /// output crosses the network readable by anyone on the way.
    #[arg(long)]
    pub insecure_http: bool,
    /// A reverse proxy in front of this server, which ends TLS (an address or CIDR;
    /// repeatable). Only from these are `X-Forwarded-For`, `Forwarded` and
    /// `X-Forwarded-Proto` believed.
    #[arg(long = "trusted-proxy", value_name = "CIDR", value_parser = parse_net)]
    pub trusted_proxies: Vec<ipnet::IpNet>,
    /// A webhook host that may resolve to an address inside (loopback, a private network,
    /// this server's own): by default deliveries go only to the public internet.
    /// Repeatable.
    #[arg(long = "allow-webhook-host", value_name = "HOST")]
    pub allow_webhook_hosts: Vec<String>,
    /// Let webhooks reach any address inside (loopback, private and link-local ranges).
    #[arg(long)]
    pub allow_local_webhooks: bool,
    /// The URL people, devices and agents reach this server at (default: built from
    /// --listen, `https://` with --tls-cert). Set it to the name on the certificate, or to
    /// the proxy's address.
    #[arg(long, env = "DROVER_PUBLIC_URL", value_name = "URL")]
    pub public_url: Option<String>,
    /// The database: `sqlite:PATH` (default: drover.db in $DROVER_HOME) for one server,
    /// or `postgres://USER:PASSWORD@HOST:PORT/DATABASE` (PostgreSQL 14 or newer), which
    /// several `drover server` replicas may share. Created if missing.
    #[arg(long, env = "DROVER_DATABASE", value_parser = parse_database, value_name = "URL")]
    pub database: Option<drover_store::Database>,
    /// Grace period in seconds between SIGTERM and SIGKILL when a session is stopped.
    #[arg(long, default_value_t = 5.0)]
    pub stop_grace: f64,
    /// How long a browser stays signed in, in seconds (default a week).
    #[arg(long, default_value_t = 7 * 24 * 3600, hide = true)]
    pub web_session_secs: u64,
    /// Seconds without contact from a device before its live sessions are flagged
    /// "Device silent" (and marked lost at the next check if still silent).
    #[arg(long, default_value_t = 15.0 * 60.0)]
    pub device_silent_secs: f64,
    /// Seconds a session may keep running after its sandbox finished before it is
    /// flagged "Sandbox retired".
    #[arg(long, default_value_t = 5.0 * 60.0)]
    pub sandbox_retired_secs: f64,
    /// Seconds between the stale monitor's checks of every live session.
    #[arg(long, default_value_t = 30.0)]
    pub monitor_secs: f64,
    /// Seconds a task's run may print nothing and show no progress (while not waiting
    /// on a person) before it is replaced with a fresh one.
    #[arg(long, default_value_t = 30.0 * 60.0)]
    pub stall_secs: f64,
    /// Runs a task's stage gets without a hand-off (the first and its replacements)
    /// before the task is flagged for a person. Runs lost with their device do not count.
    #[arg(long, default_value_t = 3)]
    pub stage_runs: u32,
    /// Seconds a task-free session may go with no output, no input and no viewer before
    /// it is stopped and ends `released` ("idle-parked"); 0: never.
    #[arg(long, default_value_t = 24.0 * 3600.0)]
    pub park_after: f64,
    /// Seconds before the first retry of a failed webhook delivery (doubling after).
    #[arg(long, default_value_t = 5.0)]
    pub webhook_retry_secs: f64,
    /// Attempts at a webhook delivery before it is given up as failed.
    #[arg(long, default_value_t = 12)]
    pub webhook_attempts: u32,
    /// Seconds finished sessions' recordings and events are kept (default 30 days).
    #[arg(long, default_value_t = 30.0 * 24.0 * 3600.0)]
    pub retention_secs: f64,
    /// Seconds between runs of the pruning job.
    #[arg(long, default_value_t = 3600.0)]
    pub prune_secs: f64,
    /// Seconds a replica's lease on a background monitor lasts unless renewed: how soon
    /// another replica takes over the monitors of one that died.
    #[arg(long, default_value_t = 6.0, hide = true)]
    pub lease_secs: f64,
}

/// `drover up`.
#[derive(Debug, Args)]
pub struct UpArgs {
    /// Server settings.
    #[command(flatten)]
    pub server: ServerArgs,
    /// The local device's name (default: this machine's host name).
    #[arg(long)]
    pub name: Option<String>,
    /// Sessions the local device may run at once.
    #[arg(long, default_value_t = 8)]
    pub slots: u32,
    /// Seconds between the local device's heartbeats.
    #[arg(long, default_value_t = drover_device::HEARTBEAT.as_secs_f64())]
    pub heartbeat_secs: f64,
    /// The local device's sandbox.
    #[command(flatten)]
    pub sandbox: SandboxArgs,
}

/// How a device sandboxes the runs it starts (see the README's "Security model").
#[derive(Debug, Args)]
pub struct SandboxArgs {
    /// Run every session and task run on this device unconfined: they reach everything
    /// this user can (Drover's home and credentials included). The device is shown with
    /// a warning everywhere. Without it, a device whose kernel cannot sandbox refuses runs.
    #[arg(long)]
    pub unsandboxed: bool,
    /// A directory every run may also read (repeatable).
    #[arg(long, value_name = "DIR")]
    pub sandbox_read: Vec<std::path::PathBuf>,
    /// A directory every run may also write, e.g. a shared cache (repeatable).
    #[arg(long, value_name = "DIR")]
    pub sandbox_write: Vec<std::path::PathBuf>,
    /// Let runs make Unix-domain sockets of their own. Without it they cannot (pairs of
    /// connected sockets still work), because such a socket could reach any named socket
    /// of this user: the D-Bus session bus, a tmux server, Docker, each able to run
    /// commands outside the sandbox. Needed by tools that serve or dial a socket by path.
    #[arg(long)]
    pub sandbox_unix_sockets: bool,
    /// An environment variable of this daemon that runs also inherit (repeatable; the
    /// harnesses' API keys, locale, proxies and PATH are passed already; DROVER_* never are).
    #[arg(long, value_name = "NAME")]
    pub pass_env: Vec<String>,
    /// Memory each process of a run may allocate, in MiB (RLIMIT_DATA; 0: no limit).
    #[arg(long, default_value_t = drover_core::confinement::DEFAULT_MEMORY_BYTES >> 20, value_name = "MIB")]
    pub run_memory_mib: u64,
    /// Processes this user may have while a run starts more (RLIMIT_NPROC, which the
    /// kernel counts per user and does not apply to root; 0: no limit).
    #[arg(long, default_value_t = drover_core::confinement::DEFAULT_PROCESSES, value_name = "N")]
    pub run_processes: u64,
}

/// `drover device …`.
#[derive(Debug, Args)]
pub struct DeviceCmd {
    /// Device management commands.
    #[command(subcommand)]
    pub command: Option<DeviceSub>,
    /// Run the daemon with these settings.
    #[command(flatten)]
    pub run: DeviceRunArgs,
}

/// Running the device daemon.
#[derive(Debug, Args)]
pub struct DeviceRunArgs {
    /// The server's URL.
    #[arg(long, env = "DROVER_SERVER")]
    pub server: Option<String>,
    /// The one-time enrollment token from `drover device add` (traded for the device's
    /// own credential, kept in $DROVER_HOME/device-daemon/credential.json), or a device
    /// credential. Not needed once the device has enrolled: it starts from the saved one.
    #[arg(long, env = "DROVER_DEVICE_TOKEN")]
    pub token: Option<String>,
    /// The device's name, as registered.
    #[arg(long)]
    pub name: Option<String>,
    /// Sessions it may run at once; without it, the slots `drover device add --slots`
    /// registered (the server keeps one number for the device).
    #[arg(long)]
    pub slots: Option<u32>,
    /// Seconds between heartbeats to the server.
    #[arg(long, default_value_t = drover_device::HEARTBEAT.as_secs_f64())]
    pub heartbeat_secs: f64,
    /// The device's sandbox.
    #[command(flatten)]
    pub sandbox: SandboxArgs,
}

/// Device management.
#[derive(Debug, Subcommand)]
pub enum DeviceSub {
    /// List devices: slots, live sessions, connection, last contact.
    List,
    /// Revoke a device's credential (owners and admins): it is refused from now on and
    /// its live sessions are marked lost; `device add` registers it again.
    Revoke {
        /// The device's name.
        name: String,
    },
    /// Register a device and print its one-time enrollment token (owners and admins).
    Add {
        /// The device's name.
        name: String,
        /// Sessions it may run at once.
        #[arg(long, default_value_t = 4)]
        slots: u32,
    },
}

/// Session commands.
#[derive(Debug, Subcommand)]
pub enum SessionCmd {
    /// Start a task-free session on a device and print its id.
    Start {
        /// The device to run on.
        #[arg(long)]
        device: String,
        /// Working directory on the device (default: a fresh private directory of the
        /// session when sandboxed, the device user's home when unconfined). A sandboxed
        /// run cannot be given the home directory or one that holds it.
        #[arg(long)]
        cwd: Option<String>,
        /// A title for the session.
        #[arg(long)]
        title: Option<String>,
        /// Terminal columns (default: this terminal's, else 120).
        #[arg(long)]
        cols: Option<u32>,
        /// Terminal rows (default: this terminal's, else 40).
        #[arg(long)]
        rows: Option<u32>,
        /// Run it outside the sandbox, reaching everything the device's user can
        /// (owners and admins only; recorded in the activity feed).
        #[arg(long)]
        unconfined: bool,
        /// The program and its arguments (after `--`).
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
    /// List live sessions (all with --all).
    List {
        /// Include ended sessions.
        #[arg(long)]
        all: bool,
        /// At most this many.
        #[arg(long, default_value_t = 100)]
        limit: u32,
    },
    /// Show one session.
    Show {
        /// The session id.
        id: String,
    },
    /// Print what the session showed, as plain text.
    ///
    /// The output is rendered as a terminal showed it (cursor moves, overwrites and
    /// redraws land where they did): the lines that scrolled off its screen, then the
    /// screen as it was left — a full-screen program still running shows its screen.
    Tail {
        /// The session id.
        id: String,
        /// Only the last N lines.
        #[arg(long, short = 'n', default_value_t = 50)]
        lines: usize,
        /// Keep printing until the session ends. Each line prints once, when it is
        /// settled: as it scrolls off the top of the screen, or, after a second of
        /// quiet, once the cursor has moved below it (so line-by-line output shows
        /// as it comes; a full-screen program's screen shows when it ends). Survives a
        /// server restart: it reconnects and resumes where it was.
        #[arg(long, short = 'f')]
        follow: bool,
        /// Print the raw output stream (escape sequences and all) from the start.
        #[arg(long, conflicts_with = "lines")]
        raw: bool,
    },
    /// Attach this terminal to a live session (detach with Ctrl-]).
    Attach {
        /// The session id.
        id: String,
        /// Only watch: nothing typed is sent.
        #[arg(long)]
        read_only: bool,
    },
    /// Send text to a session through the audited path, then Enter.
    Input {
        /// The session id.
        id: String,
        /// The text (newlines and tabs are kept).
        text: String,
    },
    /// Send text like `input`, wait for the reply to settle, print it.
    ///
    /// The reply is settled when the program shows its prompt again (line editors such
    /// as bash, zsh or Python's say so themselves), when the session ends, or — for a
    /// program that gives no such signal — when its screen has been still for
    /// --still-ms. A program still busy with the line is never taken as done. Exits 3,
    /// printing the reply so far, when --timeout comes first.
    Ask {
        /// The session id.
        id: String,
        /// The text.
        text: String,
        /// Give up after this many seconds (exit status 3).
        #[arg(long, default_value_t = 60.0)]
        timeout: f64,
        /// For a program that gives no prompt signal: the screen counts as still after
        /// this many milliseconds without output.
        #[arg(long, default_value_t = 1500)]
        still_ms: u64,
    },
    /// Stop a session: SIGTERM to its process group, SIGKILL after the grace period.
    Stop {
        /// The session id.
        id: String,
    },
    /// Write the session's recording as an asciicast v3 file.
    Export {
        /// The session id.
        id: String,
        /// Write to this file instead of standard output.
        #[arg(long, short = 'o')]
        output: Option<PathBuf>,
    },
    /// Show a session's activity events.
    Events {
        /// The session id.
        id: String,
    },
}

/// Stages of a workflow, as given on the command line.
#[derive(Debug, Args, Default)]
pub struct WorkflowArgs {
    /// The stages, comma-separated (default: the workspace's, or plan,code,review,merge,verify).
    #[arg(long, value_delimiter = ',')]
    pub stages: Vec<String>,
    /// Pin an assignee to a stage: STAGE=AGENT (or STAGE=human).
    #[arg(long = "assign")]
    pub assign: Vec<String>,
    /// Hand-offs of this stage merge the task's branch into the repository's base branch
    /// (default: the stage called `merge`).
    #[arg(long = "merge-at", conflicts_with = "no_merge")]
    pub merge_at: Vec<String>,
    /// No stage merges: the work stays on the task's branch.
    #[arg(long)]
    pub no_merge: bool,
    /// This stage's run is set up (worktree, skills) but starts only when a person
    /// activates it (`drover task activate`, or Activate in the web app). Repeatable.
    #[arg(long = "activate")]
    pub activate: Vec<String>,
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

/// Workflow commands.
#[derive(Debug, Subcommand)]
pub enum WorkflowCmd {
    /// Show the stages new tasks get.
    Show,
    /// Set the stages new tasks get (tasks already filed keep theirs).
    Set {
        /// The stages.
        #[command(flatten)]
        workflow: WorkflowArgs,
    },
}

/// Task commands. Inside an agent's run, `--task` defaults to `$DROVER_TASK`.
#[derive(Debug, Subcommand)]
pub enum TaskCmd {
    /// File a task (its first stage is staffed when an agent is pinned to it).
    Create {
        /// The repository it works in.
        #[arg(long)]
        repo: String,
        /// Title.
        #[arg(long)]
        title: String,
        /// Body, in plain language.
        #[arg(long, default_value = "")]
        body: String,
        /// Type (story, bug, chore, …).
        #[arg(long = "type", default_value = "story")]
        kind: String,
        /// Pin this agent to every stage without an assignee.
        #[arg(long)]
        agent: Option<String>,
        /// Stop its runs once its lifetime model spend reaches this many USD.
        #[arg(long)]
        spend_cap: Option<f64>,
        /// Set its first run up without starting it: Activate starts it (as
        /// `--activate FIRST_STAGE`).
        #[arg(long)]
        prepare_only: bool,
        /// The stages and who works them (default: the workspace's workflow).
        #[command(flatten)]
        workflow: WorkflowArgs,
    },
    /// List tasks.
    List,
    /// Show a task: its stages, runs, blockers, questions and activity.
    Show {
        /// The task id (default $DROVER_TASK).
        id: Option<String>,
    },
    /// Hand the current stage off with a note (the run ends completed; the task moves on).
    Advance {
        /// The task id (default $DROVER_TASK).
        #[arg(long)]
        task: Option<String>,
        /// What was done, for whoever works the next stage.
        #[arg(long, default_value = "")]
        note: String,
    },
    /// Post a comment on the task.
    Comment {
        /// The text.
        text: String,
        /// The task id (default $DROVER_TASK).
        #[arg(long)]
        task: Option<String>,
    },
    /// File a blocker; prints its id.
    Block {
        /// What blocks the work.
        text: String,
        /// The task id (default $DROVER_TASK).
        #[arg(long)]
        task: Option<String>,
    },
    /// Resolve a blocker.
    Unblock {
        /// The blocker's id.
        note: String,
    },
    /// Ask a human a question and wait for the answer (printed).
    Ask {
        /// The question.
        question: String,
        /// The task id (default $DROVER_TASK).
        #[arg(long)]
        task: Option<String>,
        /// Give up after this many seconds.
        #[arg(long, default_value_t = 3600.0)]
        timeout: f64,
    },
    /// Answer a question an agent asked.
    Answer {
        /// The question's id.
        note: String,
        /// The answer.
        text: String,
    },
    /// Activate: start the current stage's prepared run (a stage set to wait for it).
    Activate {
        /// The task id.
        id: String,
    },
    /// Change a task before its first run: the branch it starts from and merges into.
    Set {
        /// The task id (default: $DROVER_TASK).
        id: Option<String>,
        /// The base branch (it must exist in the device's clone).
        #[arg(long)]
        base: String,
    },
    /// Launch session: a fresh run for the current stage when none is live.
    Launch {
        /// The task id.
        id: String,
    },
    /// Finish session: move the sandbox toward a normal close.
    Finish {
        /// The task id.
        id: String,
    },
    /// Mark done: stop a live run (it completes) and close the sandbox, keeping the branch.
    MarkDone {
        /// The task id.
        id: String,
    },
    /// Abandon: tear the task's sandbox down without merging and release its run (admins
    /// and owners). The task stays open (`task launch` starts it afresh) unless `--task`.
    Abandon {
        /// The task id.
        id: String,
        /// Abandon the task itself too: it will not run again.
        #[arg(long)]
        task: bool,
    },
    /// Cancel the task (a live run is stopped).
    Cancel {
        /// The task id.
        id: String,
    },
}

/// Agent commands.
#[derive(Debug, Subcommand)]
pub enum AgentCmd {
    /// Register an agent (you become its operator).
    Create {
        /// Its name.
        name: String,
        /// claude, codex, gemini, aider, opencode, goose or custom.
        #[arg(long)]
        harness: String,
        /// Model.
        #[arg(long)]
        model: Option<String>,
        /// Provider.
        #[arg(long)]
        provider: Option<String>,
        /// Account.
        #[arg(long)]
        account: Option<String>,
        /// Reasoning effort.
        #[arg(long)]
        effort: Option<String>,
        /// For custom: the command after `--`; `{prompt}` in an argument is replaced by the stage's prompt.
        #[arg(last = true)]
        template: Vec<String>,
    },
    /// List agents.
    List,
    /// Show an agent: its harness and route, operator, sessions (live first), tasks and
    /// total spend.
    Show {
        /// Its name.
        name: String,
    },
}

/// Repository commands.
#[derive(Debug, Subcommand)]
pub enum RepoCmd {
    /// Register a repository and the device clone that has it.
    Add {
        /// The repository's name.
        name: String,
        /// The device with the clone.
        #[arg(long)]
        device: String,
        /// The clone's absolute path on that device.
        #[arg(long)]
        path: String,
        /// The branch tasks start from and merge into (default: the branch the clone has
        /// checked out).
        #[arg(long)]
        base: Option<String>,
    },
    /// List repositories and the devices that have them.
    List,
    /// Show a repository: its devices and clone paths, base branch, sessions (live
    /// first), tasks and total spend.
    Show {
        /// Its name.
        name: String,
    },
}

/// Sandbox commands.
#[derive(Debug, Subcommand)]
pub enum SandboxCmd {
    /// List sandboxes: live (default), open or all.
    List {
        /// live, open or all.
        #[arg(long, default_value = "live")]
        filter: String,
        /// Search text.
        #[arg(long)]
        search: Option<String>,
    },
}

/// Parses `--database` (a clap value parser).
fn parse_database(s: &str) -> Result<drover_store::Database, String> {
    drover_store::Database::parse(s).map_err(|e| e.to_string())
}

/// Which database a maintenance command works on.
#[derive(Debug, Args)]
pub struct DatabaseArgs {
    /// `sqlite:PATH` or `postgres://USER:PASSWORD@HOST:PORT/DATABASE` (default:
    /// drover.db in $DROVER_HOME).
    #[arg(long, env = "DROVER_DATABASE", value_parser = parse_database, value_name = "URL")]
    pub database: Option<drover_store::Database>,
}

/// `drover export`.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// The database to export.
    #[command(flatten)]
    pub db: DatabaseArgs,
    /// The file to write (JSON lines); it must not exist yet.
    #[arg(long, short, value_name = "FILE")]
    pub out: std::path::PathBuf,
}

/// `drover import`.
#[derive(Debug, Args)]
pub struct ImportArgs {
    /// The file `drover export` wrote.
    pub file: std::path::PathBuf,
    /// The database to load it into: new or empty.
    #[command(flatten)]
    pub db: DatabaseArgs,
}

/// A network (`10.0.0.0/8`) or one address (`192.0.2.7`, `::1`).
fn parse_net(s: &str) -> Result<ipnet::IpNet, String> {
    s.parse::<ipnet::IpNet>()
        .or_else(|_| s.parse::<std::net::IpAddr>().map(ipnet::IpNet::from))
        .map_err(|_| format!("`{s}` is not an address or CIDR network (like 10.0.0.0/8 or 192.0.2.7)"))
}

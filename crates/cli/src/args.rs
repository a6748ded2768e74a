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
    /// Run the device daemon (`drover device --server URL --token T`), or manage devices.
    #[command(args_conflicts_with_subcommands = true)]
    Device(DeviceCmd),
    /// Start, list, watch and steer sessions.
    #[command(subcommand)]
    Session(SessionCmd),
    /// Print a one-time link that signs this browser in to the web app.
    Ui,
    /// The per-session shim (started by the device daemon; not for direct use).
    #[command(hide = true)]
    Shim {
        /// The session directory.
        dir: PathBuf,
    },
}

/// Settings shared by `up` and `server`.
#[derive(Debug, Args)]
pub struct ServerArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:7070", env = "DROVER_LISTEN")]
    pub listen: SocketAddr,
    /// Grace period in seconds between SIGTERM and SIGKILL when a session is stopped.
    #[arg(long, default_value_t = 5.0)]
    pub stop_grace: f64,
    /// How long a browser stays signed in, in seconds (default a week).
    #[arg(long, default_value_t = 7 * 24 * 3600, hide = true)]
    pub web_session_secs: u64,
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
    /// The device credential (from `drover device add`).
    #[arg(long, env = "DROVER_DEVICE_TOKEN")]
    pub token: Option<String>,
    /// The device's name, as registered.
    #[arg(long)]
    pub name: Option<String>,
    /// Sessions it may run at once.
    #[arg(long, default_value_t = 8)]
    pub slots: u32,
}

/// Device management.
#[derive(Debug, Subcommand)]
pub enum DeviceSub {
    /// List devices: slots, live sessions, connection, last contact.
    List,
    /// Register a device and print its credential (owners and admins).
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
        /// Working directory on the device.
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
    /// Print what the session printed, as plain text.
    Tail {
        /// The session id.
        id: String,
        /// Only the last N lines.
        #[arg(long, short = 'n', default_value_t = 50)]
        lines: usize,
        /// Keep printing new output until the session ends.
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
    /// Send text like `input`, wait for the screen to go still, print the reply.
    Ask {
        /// The session id.
        id: String,
        /// The text.
        text: String,
        /// Give up after this many seconds.
        #[arg(long, default_value_t = 60.0)]
        timeout: f64,
        /// The screen counts as still after this many milliseconds without output.
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

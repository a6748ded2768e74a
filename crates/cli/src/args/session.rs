//! Arguments of `drover session …`.

use std::path::PathBuf;

use clap::Subcommand;

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
        /// Take the bytes and keys through the server even when the session runs on
        /// this machine under this user (by default they go straight to its shim there).
        #[arg(long)]
        via_server: bool,
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

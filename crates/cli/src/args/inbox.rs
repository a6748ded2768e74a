//! Arguments of the "Needs you" commands: the inbox, approving and denying held calls,
//! and the hook a run's harness calls.

use clap::{Args, Subcommand};

/// `drover inbox`.
#[derive(Debug, Args)]
pub struct InboxArgs {
    /// Keep watching: print each new item as it comes and ring the terminal (BEL, and
    /// an OSC 9 notification where the terminal shows them).
    #[arg(long)]
    pub follow: bool,
}

/// `drover approve`.
#[derive(Debug, Args)]
pub struct ApproveArgs {
    /// The held call (`att_…`, from `drover inbox`).
    pub id: String,
    /// Also allow what the harness's suggested rule covers, for the rest of this task
    /// (`drover inbox` shows the rule).
    #[arg(long)]
    pub always: bool,
}

/// `drover deny`.
#[derive(Debug, Args)]
pub struct DenyArgs {
    /// The held call (`att_…`, from `drover inbox`).
    pub id: String,
    /// What the agent is told (why, or what to do instead).
    #[arg(long, short)]
    pub message: Option<String>,
}

/// `drover hook …`: run by a harness inside a Drover run, never by people.
#[derive(Debug, Subcommand)]
pub enum HookCmd {
    /// A Claude Code hook: reads the event on stdin, reports it, and for a held tool
    /// call waits for a person's decision and prints it. Never fails the harness.
    Claude,
    /// Codex's `notify` program: reports the event it is handed (a finished turn).
    Codex {
        /// The event, as Codex hands it (JSON).
        event: String,
    },
}

/// `drover notify`: what you are told of in your browsers (Web Push), and when.
#[derive(Debug, Subcommand)]
pub enum NotifyCmd {
    /// Your choices and the browsers registered for you.
    Show,
    /// Changes your choices; what you leave out stays as it was.
    Set(NotifySetArgs),
    /// Sends a test notification to each of your browsers.
    Test,
}

/// `drover notify set`.
#[derive(Debug, Args)]
pub struct NotifySetArgs {
    /// What you are told of, comma-separated: permission, question, idle, finished,
    /// failed, lost, spend_cap (`none`: nothing).
    #[arg(long, value_name = "LIST")]
    pub events: Option<String>,
    /// A daily window when nothing is pushed (`22:00-07:00`; `off`: none); what waits
    /// stays in the inbox.
    #[arg(long, value_name = "HH:MM-HH:MM")]
    pub quiet: Option<String>,
    /// The time zone of the quiet hours: a name (`Europe/Paris`), `UTC` or an offset
    /// (`+02:00`).
    #[arg(long, value_name = "ZONE")]
    pub tz: Option<String>,
    /// After a notification about a run, how long further ones about it wait (`90s`,
    /// `5m`, `1h`, `0`).
    #[arg(long, value_name = "DURATION")]
    pub cooldown: Option<String>,
}

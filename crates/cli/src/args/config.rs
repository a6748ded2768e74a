//! Arguments of `drover config`.

use std::ffi::OsString;

use clap::Subcommand;

/// `drover config …`.
#[derive(Debug, Subcommand)]
pub enum ConfigCmd {
    /// Print the settings `up` (the default), `server` or `device` would run with: every
    /// key, its value, and where it came from (flag, environment, file, default).
    #[command(after_help = "Examples:\n  drover config show\n  drover config show server --listen 0.0.0.0:7070 --json")]
    Show {
        /// The command (`up`, `server` or `device`), then any flags as you would give them to it.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, value_name = "COMMAND [FLAGS]")]
        args: Vec<OsString>,
    },
}

//! Arguments of the commands that install Drover into a machine: the device's service
//! unit, shell completions and manual pages.

use std::path::PathBuf;

use clap::{ArgGroup, Args};

/// `drover device install`.
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("scope").required(true).args(["user", "system"])))]
pub struct DeviceInstallArgs {
    /// A user service (`$XDG_CONFIG_HOME/systemd/user/drover-device.service`): runs as you
    /// while you are logged in, or always after `loginctl enable-linger`.
    #[arg(long)]
    pub user: bool,
    /// A system service (`/etc/systemd/system/drover-device.service`; needs root), run as
    /// the owner of $DROVER_HOME.
    #[arg(long)]
    pub system: bool,
    /// Only write the unit: do not reload systemd, enable or start it.
    #[arg(long)]
    pub no_enable: bool,
    /// More arguments for the daemon, after `--` (e.g. `-- --sandbox-write /srv/cache`);
    /// never a token: the daemon starts from its saved credential.
    #[arg(last = true, value_name = "DAEMON_ARGS")]
    pub daemon_args: Vec<String>,
}

/// `drover completions`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to complete in.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// `drover man`.
#[derive(Debug, Args)]
pub struct ManArgs {
    /// Write `drover.1` and one page per command (`drover-session-start.1`, …) into this
    /// directory (made if missing) instead of printing the top-level page.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

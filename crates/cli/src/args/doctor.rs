//! Arguments of the commands that look after a machine and its data: `drover doctor`
//! and `drover backup`.

use clap::Args;

use super::DatabaseArgs;

/// `drover doctor`.
#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// The server to check against (default: `DROVER_URL`, else the server this device
    /// enrolled with, else the one `drover up` in $DROVER_HOME runs).
    #[arg(long, value_name = "URL")]
    pub server: Option<String>,
}

/// `drover backup`.
#[derive(Debug, Args)]
pub struct BackupArgs {
    /// The database to copy (a running server's SQLite file is copied live).
    #[command(flatten)]
    pub db: DatabaseArgs,
    /// The file to write the copy to; it must not exist yet.
    #[arg(long, short, value_name = "FILE")]
    pub out: std::path::PathBuf,
}

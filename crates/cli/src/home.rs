//! `$DROVER_HOME`: where `up` keeps its database, the local device's sessions and the
//! client credentials the CLI reads (so no login step is needed on the same machine).

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

/// The home directory: `$DROVER_HOME`, else `$XDG_DATA_HOME/drover` (`~/.local/share/drover`).
pub fn home() -> Result<PathBuf> {
    if let Some(h) = std::env::var_os("DROVER_HOME").filter(|h| !h.is_empty()) {
        return Ok(PathBuf::from(h));
    }
    let data = dirs::data_dir().context("cannot find a data directory: set DROVER_HOME")?;
    Ok(data.join("drover"))
}

/// Creates the home directory if it is missing and makes it private (0700): a home that
/// others could read or enter is fixed, and the fix is said on stderr.
pub fn ensure_private(home: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(home).with_context(|| format!("creating {}", home.display()))?;
    let mode = std::fs::metadata(home).with_context(|| format!("reading {}", home.display()))?.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        std::fs::set_permissions(home, std::fs::Permissions::from_mode(0o700)).with_context(|| {
            format!("making {} private: it is open to other users (mode {mode:o}); fix it with chmod 700", home.display())
        })?;
        crate::logging::warning(&format!(
            "{} was open to other users (mode {mode:o}); it is now 0700, as Drover's home must be",
            home.display()
        ));
    }
    for name in ["drover.db", "drover.db-wal", "drover.db-shm", "client.json", "device.json", "up.json"] {
        let p = home.join(name);
        if let Ok(meta) = std::fs::metadata(&p) {
            if meta.permissions().mode() & 0o077 != 0 {
                std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600))
                    .with_context(|| format!("making {} private", p.display()))?;
            }
        }
    }
    Ok(())
}

/// What the CLI needs to reach a server, as `up` writes it (`client.json`, mode 0600).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ClientConfig {
    /// The server's URL.
    pub url: String,
    /// A member API token.
    pub token: String,
}

/// The local device's credential (`device.json`, mode 0600).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DeviceCredentialFile {
    /// The device's name.
    pub name: String,
    /// Its token.
    pub token: String,
}

/// Reads a JSON file if it exists and parses.
pub fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Option<T> {
    serde_json::from_slice(&std::fs::read(path).ok()?).ok()
}

/// Writes a JSON file readable only by its owner, atomically.
pub fn write_private_json<T: Serialize>(path: &Path, value: &T) -> Result<()> {
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .with_context(|| format!("writing {}", tmp.display()))?;
    f.write_all(&serde_json::to_vec_pretty(value)?)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path).with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// An exclusive hold on a home directory for the life of the process.
pub struct HomeLock {
    _lock: nix::fcntl::Flock<File>,
}

/// What a running `up` says about itself (`up.json`).
#[derive(Debug, Serialize, Deserialize)]
pub struct Running {
    /// Its process id.
    pub pid: u32,
    /// Its URL.
    pub url: String,
}

/// Takes the home's lock, or says which process holds it.
pub fn lock(home: &Path) -> Result<HomeLock> {
    let path = home.join("drover.lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .with_context(|| format!("opening {}", path.display()))?;
    match nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock) {
        Ok(lock) => Ok(HomeLock { _lock: lock }),
        Err((_, nix::errno::Errno::EWOULDBLOCK)) => {
            let who = read_json::<Running>(&home.join("up.json")).map(|r| format!(" (pid {}, {})", r.pid, r.url)).unwrap_or_default();
            bail!(
                "another drover is already running with DROVER_HOME={}{who}; stop it first, or set DROVER_HOME to another directory",
                home.display()
            )
        }
        Err((_, e)) => bail!("cannot lock {}: {e}", path.display()),
    }
}

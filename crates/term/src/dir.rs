//! The files of one session on its device. The shim writes them; the device daemon reads
//! them to re-adopt a running shim or to collect what a finished one left behind.

use std::path::{Path, PathBuf};

/// A session's directory on the device (`<device home>/sessions/<session id>/`).
#[derive(Debug, Clone)]
pub struct SessionDir {
    root: PathBuf,
}

impl SessionDir {
    /// Wraps the directory at `root`.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        SessionDir { root: root.into() }
    }

    /// The directory itself.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// What to run (`spec.json`, written by the device before starting the shim).
    pub fn spec(&self) -> PathBuf {
        self.root.join("spec.json")
    }

    /// The raw output stream (`output.raw`): byte N is offset N.
    pub fn output(&self) -> PathBuf {
        self.root.join("output.raw")
    }

    /// The timing index (`output.idx`): 16-byte records `(offset_end, t_micros)`.
    pub fn index(&self) -> PathBuf {
        self.root.join("output.idx")
    }

    /// How the program ended (`exit.json`), written once, atomically.
    pub fn exit(&self) -> PathBuf {
        self.root.join("exit.json")
    }

    /// The run's private temp directory (its `TMPDIR`: the one part of the session's
    /// directory the run may reach).
    pub fn tmp(&self) -> PathBuf {
        self.root.join("tmp")
    }

    /// The shim's unix socket.
    pub fn socket(&self) -> PathBuf {
        self.root.join("shim.sock")
    }

    /// The shim's process id.
    pub fn shim_pid(&self) -> PathBuf {
        self.root.join("shim.pid")
    }

    /// The program's process (group) id.
    pub fn child_pid(&self) -> PathBuf {
        self.root.join("child.pid")
    }

    /// Locked by the shim that serves the session, for as long as it runs: one shim per
    /// session.
    pub fn shim_lock(&self) -> PathBuf {
        self.root.join("shim.lock")
    }

    /// The shim's own log.
    pub fn log(&self) -> PathBuf {
        self.root.join("shim.log")
    }

    /// Reads `exit.json`, if the program has ended.
    pub fn read_exit(&self) -> Option<drover_protocol::shim::ShimExit> {
        let bytes = std::fs::read(self.exit()).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    /// Writes `exit.json` atomically (temporary file, fsync, rename).
    pub fn write_exit(&self, exit: &drover_protocol::shim::ShimExit) -> std::io::Result<()> {
        write_atomic(&self.exit(), &serde_json::to_vec_pretty(exit).expect("exit serialises"))
    }
}

/// Creates `path` and its missing parents private to this user (0700, whatever the
/// umask); an existing directory is made private too.
pub fn create_private_dir(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700))
}

/// Writes `bytes` to `path` so that readers see the old file or the whole new one.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = path.with_extension("tmp");
    // Only the owner reads session files (a spec carries the run's credential).
    let mut f = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)
}

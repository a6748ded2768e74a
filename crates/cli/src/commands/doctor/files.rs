//! The checks of Drover's home (`$DROVER_HOME`): free space on its file system, that it
//! and the credentials in it are this user's alone, and that this user can write there.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use drover_core::doctor::{judge_disk, open_to_others, Finding};

/// The files in a home that hold credentials or data (0600 each).
const PRIVATE_FILES: &[&str] =
    &["client.json", "device.json", "up.json", "drover.db", "drover.db-wal", "drover.db-shm", "device-daemon/credential.json"];

/// The directories in a home that hold sessions and credentials (0700 each).
const PRIVATE_DIRS: &[&str] = &["", "device", "device-daemon"];

/// Every home check: `disk`, `permissions`, `home-writable`.
pub fn checks(home: Result<&Path, &anyhow::Error>) -> Vec<Finding> {
    match home {
        Ok(home) => vec![disk(home), permissions(home), writable(home)],
        Err(e) => vec![Finding::fail("home", e.to_string(), "set DROVER_HOME to the directory Drover keeps its data in")],
    }
}

/// The nearest of `path` and its parents that exists.
fn existing(path: &Path) -> Option<&Path> {
    path.ancestors().find(|p| p.symlink_metadata().is_ok())
}

/// Free space in the file system the home is (or will be) on.
fn disk(home: &Path) -> Finding {
    let Some(at) = existing(home) else {
        return Finding::skip("disk", format!("nothing of {} exists to measure", home.display()));
    };
    match nix::sys::statvfs::statvfs(at) {
        Ok(fs) => {
            // All three are 64-bit on Linux.
            let unit = fs.fragment_size();
            let free = fs.blocks_available().saturating_mul(unit);
            let total = fs.blocks().saturating_mul(unit);
            judge_disk(&home.display().to_string(), free, total)
        }
        Err(e) => Finding::warn(
            "disk",
            format!("cannot measure the free space at {}: {e}", at.display()),
            "check that the home's file system is mounted",
        ),
    }
}

/// That the home, its directories and its credential files are this user's alone.
fn permissions(home: &Path) -> Finding {
    if !home.is_dir() {
        return Finding::skip("permissions", format!("{} is not a directory yet (drover makes it private, 0700)", home.display()));
    }
    let me = nix::unistd::geteuid().as_raw();
    let (mut open, mut foreign, mut fixes, mut seen) = (Vec::new(), Vec::new(), Vec::new(), 0);
    let entries = PRIVATE_DIRS.iter().map(|d| (*d, true)).chain(PRIVATE_FILES.iter().map(|f| (*f, false)));
    for (name, dir) in entries {
        let path = if name.is_empty() { home.to_path_buf() } else { home.join(name) };
        let Ok(meta) = path.symlink_metadata() else { continue };
        seen += 1;
        let mode = meta.mode() & 0o777;
        if meta.uid() != me {
            foreign.push(format!("{} (uid {})", path.display(), meta.uid()));
        }
        if open_to_others(mode) {
            open.push(format!("{} ({mode:o})", path.display()));
            fixes.push(format!("chmod {} {}", if dir { "700" } else { "600" }, path.display()));
        }
    }
    if !foreign.is_empty() {
        return Finding::fail(
            "permissions",
            format!("another user owns {}", foreign.join(", ")),
            format!("run drover as that user, or give them to this one (chown -R {me} {})", home.display()),
        );
    }
    if !open.is_empty() {
        return Finding::fail("permissions", format!("open to other users: {}", open.join(", ")), fixes.join(" && "));
    }
    Finding::ok("permissions", format!("{} and the credentials in it are this user's alone ({seen} checked)", home.display()))
}

/// That this user can create files in the home (or make it, if it does not exist yet).
fn writable(home: &Path) -> Finding {
    let fix = format!("make {} writable by this user, or set DROVER_HOME to a directory it can write", home.display());
    if home.is_dir() {
        let probe = home.join(format!(".drover-doctor-{}", std::process::id()));
        return match std::fs::OpenOptions::new().write(true).create_new(true).open(&probe) {
            Ok(_) => match std::fs::remove_file(&probe) {
                Ok(()) => Finding::ok("home-writable", format!("a file was created and removed in {}", home.display())),
                Err(e) => Finding::warn("home-writable", format!("{} was created but not removed: {e}", probe.display()), fix),
            },
            Err(e) => Finding::fail("home-writable", format!("cannot create a file in {}: {e}", home.display()), fix),
        };
    }
    match existing(home) {
        Some(at) if at == home => Finding::fail("home-writable", format!("{} is not a directory", home.display()), fix),
        Some(at) if at.is_dir() => can_make_in(home, at, &fix),
        Some(at) => {
            Finding::fail("home-writable", format!("{} cannot be made: {} is a file, not a directory", home.display(), at.display()), fix)
        }
        None => Finding::fail("home-writable", format!("{} cannot be made: nothing of its path exists", home.display()), fix),
    }
}

/// A home not made yet: whether its nearest existing parent `at` takes a new directory.
fn can_make_in(home: &Path, at: &Path, fix: &str) -> Finding {
    let probe: PathBuf = at.join(format!(".drover-doctor-{}", std::process::id()));
    match std::fs::create_dir(&probe).and_then(|()| std::fs::remove_dir(&probe)) {
        Ok(()) => Finding::ok(
            "home-writable",
            format!("{} does not exist yet; {} is writable, so drover can make it", home.display(), at.display()),
        ),
        Err(e) => Finding::fail("home-writable", format!("{} cannot be made: {e} in {}", home.display(), at.display()), fix),
    }
}

//! Task sandboxes on the device: git worktrees on the task's branch, created before a
//! run starts and removed when the sandbox is done or abandoned. git is run with
//! argument lists, never through a shell.

use std::path::{Path, PathBuf};
use std::process::Command;

use drover_protocol::device::Worktree;

/// A git step that failed.
#[derive(Debug, thiserror::Error)]
pub enum WorktreeError {
    /// The repository path is not a git clone.
    #[error("{0} is not a git repository on this device (declare the right path with `drover repo add`)")]
    NotARepo(String),
    /// The repository path does not exist on this device.
    #[error("{0} does not exist on this device (declare the clone's path with `drover repo add`)")]
    NoPath(String),
    /// The base branch is not in the clone.
    #[error("branch `{base}` does not exist in {repo} (create it there, or pick another with `drover task set TASK --base BRANCH` / `drover repo add NAME --base BRANCH`)")]
    NoBase {
        /// The base branch that was asked for.
        base: String,
        /// The clone's path on this device.
        repo: String,
    },
    /// A name could escape the worktree directory.
    #[error("invalid worktree name `{0}`")]
    BadName(String),
    /// git failed.
    #[error("git {args}: {stderr}")]
    Git {
        /// What was run.
        args: String,
        /// What git said.
        stderr: String,
        /// What it printed (some commands report through it when they fail).
        stdout: String,
        /// Its exit status, if it exited.
        code: Option<i32>,
    },
    /// The worktree's folder holds another branch than the task's.
    #[error("{path} has branch `{found}` checked out, not the task's `{wanted}`: move that folder away, and the task's branch is checked out again")]
    WrongBranch {
        /// The worktree's folder on this device.
        path: String,
        /// What it has.
        found: String,
        /// What the task needs.
        wanted: String,
    },
    /// The worktree's own git files no longer point into its clone (a run rewrote them).
    #[error("{0}: its .git no longer points into its clone; move the folder away and the task's branch is checked out again")]
    Tampered(String),
    /// git could not be run.
    #[error("cannot run git: {0}")]
    Spawn(#[from] std::io::Error),
}

/// Where git keeps a task worktree's data, as checked from the clone's side. A run can
/// rewrite every file in its worktree (`.git` included) and in the worktree's own git
/// directory (`commondir`, `gitdir`), so the device never lets those files choose the
/// repository its own git commands read: it names both directories itself
/// (`git_worktree`), and grants the run only these (DESIGN.md, "Trust model").
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct GitDirs {
    /// The clone's git directory (objects, refs, config, hooks).
    pub common: PathBuf,
    /// The worktree's own git directory (`<common>/worktrees/<name>`: HEAD, index).
    pub git_dir: PathBuf,
}

/// The clone's git common directory, canonical.
pub(crate) fn common_dir(repo: &Path) -> Result<PathBuf, WorktreeError> {
    let dir = PathBuf::from(git(repo, &["rev-parse", "--git-common-dir"])?);
    let dir = if dir.is_absolute() { dir } else { repo.join(dir) };
    dir.canonicalize().map_err(WorktreeError::from)
}

/// The git directories of the worktree at `worktree`, checked against the clone at `repo`:
/// its `.git` must name a directory of the clone's `worktrees/`, whose `gitdir` names
/// this worktree back.
pub fn git_dirs(repo: &Path, worktree: &Path) -> Result<GitDirs, WorktreeError> {
    let tampered = || WorktreeError::Tampered(worktree.display().to_string());
    let common = common_dir(repo)?;
    let dot_git = worktree.join(".git");
    let text = std::fs::read_to_string(&dot_git).map_err(|_| tampered())?;
    let named = PathBuf::from(text.trim().strip_prefix("gitdir:").ok_or_else(tampered)?.trim());
    let git_dir = (if named.is_absolute() { named } else { worktree.join(named) }).canonicalize().map_err(|_| tampered())?;
    if git_dir.parent() != Some(common.join("worktrees").as_path()) {
        return Err(tampered());
    }
    let back = std::fs::read_to_string(git_dir.join("gitdir")).map_err(|_| tampered())?;
    let back = PathBuf::from(back.trim()).canonicalize().map_err(|_| tampered())?;
    if back != dot_git.canonicalize()? {
        return Err(tampered());
    }
    Ok(GitDirs { common, git_dir })
}

/// Runs git on the worktree at `worktree` through `dirs`, reading none of the git files a
/// run can rewrite; returns what it printed, trimmed.
pub(crate) fn git_worktree(dirs: &GitDirs, worktree: &Path, args: &[&str]) -> Result<String, WorktreeError> {
    let mut git_dir = std::ffi::OsString::from("--git-dir=");
    git_dir.push(&dirs.git_dir);
    let mut work_tree = std::ffi::OsString::from("--work-tree=");
    work_tree.push(worktree);
    let mut cmd = Command::new("git");
    cmd.arg(git_dir).arg(work_tree).current_dir(worktree).env("GIT_COMMON_DIR", &dirs.common);
    run(cmd, args, &[])
}

/// Settings every git the device runs gets, whatever a repository's config says: no hooks,
/// no file-system monitor, no signature checks (each would run a program the
/// repository names).
const SAFE_CONFIG: [&str; 6] = ["-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "-c", "log.showSignature=false"];

/// Holds the lock of the clone at `repo` for as long as the guard lives: git's own
/// lock files make a second `worktree add`, `worktree remove` or ref update in the same
/// clone fail while another runs, so this device's changes to one clone go one at a time.
pub(crate) fn lock_clone(repo: &Path) -> std::sync::MutexGuard<'static, ()> {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    // One lock per clone the device has, made once and kept for the process's life.
    static LOCKS: OnceLock<Mutex<HashMap<PathBuf, &'static Mutex<()>>>> = OnceLock::new();
    let key = repo.canonicalize().unwrap_or_else(|_| repo.to_path_buf());
    let lock: &'static Mutex<()> =
        LOCKS.get_or_init(Default::default).lock().expect("clone locks").entry(key).or_insert_with(|| Box::leak(Box::new(Mutex::new(()))));
    lock.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs git in `repo` with an argument list; returns what it printed, trimmed.
pub(crate) fn git(repo: &Path, args: &[&str]) -> Result<String, WorktreeError> {
    git_in(repo, args, &[])
}

/// [`git`] with extra environment variables.
pub(crate) fn git_in(repo: &Path, args: &[&str], env: &[(&str, &str)]) -> Result<String, WorktreeError> {
    let mut cmd = Command::new("git");
    cmd.arg("-C").arg(repo);
    run(cmd, args, env)
}

fn run(mut cmd: Command, args: &[&str], env: &[(&str, &str)]) -> Result<String, WorktreeError> {
    let out = cmd.args(SAFE_CONFIG).args(args).env("GIT_TERMINAL_PROMPT", "0").envs(env.iter().copied()).output()?;
    let stdout = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if out.status.success() {
        Ok(stdout)
    } else {
        Err(WorktreeError::Git {
            args: args.join(" "),
            stderr: String::from_utf8_lossy(&out.stderr).trim().chars().take(500).collect(),
            stdout,
            code: out.status.code(),
        })
    }
}

/// Where the task's worktree lives under `root`; refuses a folder name that could escape it.
pub(crate) fn worktree_path(root: &Path, w: &Worktree) -> Result<PathBuf, WorktreeError> {
    let ok = !w.dir.is_empty() && !w.dir.starts_with('.') && w.dir.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if !ok {
        return Err(WorktreeError::BadName(w.dir.chars().take(80).collect()));
    }
    Ok(root.join(&w.dir))
}

/// Checks that `repo` is a git clone on this device and has branch `base`, if given:
/// what `drover repo add` asks before tasks rely on it.
pub fn check_clone(repo: &Path, base: Option<&str>) -> Result<(), WorktreeError> {
    let shown = repo.display().to_string();
    if !repo.is_dir() {
        return Err(WorktreeError::NoPath(shown));
    }
    if git(repo, &["rev-parse", "--git-dir"]).is_err() {
        return Err(WorktreeError::NotARepo(shown));
    }
    if let Some(base) = base {
        if git(repo, &["rev-parse", "--verify", "--quiet", &format!("refs/heads/{base}^{{commit}}")]).is_err() {
            return Err(WorktreeError::NoBase { base: base.to_string(), repo: shown });
        }
    }
    Ok(())
}

/// Makes sure the worktree exists under `root` on its branch; returns its path. Work
/// carries from stage to stage: an existing worktree on the task's branch is reused as
/// it is. A new branch starts from `w.base`, or from the clone's HEAD.
pub fn ensure(root: &Path, w: &Worktree) -> Result<PathBuf, WorktreeError> {
    let path = worktree_path(root, w)?;
    let repo = Path::new(&w.repo_path);
    let _clone = lock_clone(repo);
    check_clone(repo, None)?;
    if path.join(".git").exists() {
        let dirs = git_dirs(repo, &path)?;
        let found = git_worktree(&dirs, &path, &["branch", "--show-current"])?;
        if found != w.branch {
            return Err(WorktreeError::WrongBranch { path: path.display().to_string(), found, wanted: w.branch.clone() });
        }
        return Ok(path);
    }
    std::fs::create_dir_all(root)?;
    // Forget worktrees whose folders are gone, so the branch can be checked out again.
    let _ = git(repo, &["worktree", "prune"]);
    let p = path.to_string_lossy().to_string();
    let exists = git(repo, &["rev-parse", "--verify", "--quiet", &format!("refs/heads/{}", w.branch)]).is_ok();
    if exists {
        git(repo, &["worktree", "add", &p, &w.branch])?;
    } else {
        check_clone(repo, w.base.as_deref())?;
        let start = w.base.as_ref().map(|b| format!("refs/heads/{b}")).unwrap_or_else(|| "HEAD".into());
        git(repo, &["worktree", "add", "-b", &w.branch, &p, &start])?;
    }
    Ok(path)
}

/// Removes the worktree (the branch and its commits stay). Without `force`, a worktree
/// with uncommitted changes is kept and the refusal returned.
pub fn remove(root: &Path, w: &Worktree, force: bool) -> Result<(), WorktreeError> {
    let path = worktree_path(root, w)?;
    if !path.exists() {
        return Ok(());
    }
    let p = path.to_string_lossy().to_string();
    let repo = Path::new(&w.repo_path);
    let _clone = lock_clone(repo);
    // git checks the worktree through its own files, which a run may have rewritten:
    // the clone's common directory is named for it.
    let common = common_dir(repo)?;
    let env = [("GIT_COMMON_DIR", common.to_str().unwrap_or_default())];
    if force {
        git_in(repo, &["worktree", "remove", "--force", &p], &env)?;
    } else {
        git_in(repo, &["worktree", "remove", &p], &env)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        for args in [
            vec!["init", "-q", "-b", "main"],
            vec!["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "first"],
        ] {
            assert!(Command::new("git").arg("-C").arg(d.path()).args(&args).status().unwrap().success());
        }
        d
    }

    #[test]
    fn worktrees_are_created_reused_and_removed_keeping_the_branch() {
        let r = repo();
        // The repository's hooks do not run on Drover's checkouts.
        let marker = r.path().join("hook-ran");
        let hook = r.path().join(".git/hooks/post-checkout");
        std::fs::write(&hook, format!("#!/bin/sh\ntouch '{}'\n", marker.display())).unwrap();
        assert!(Command::new("chmod").arg("+x").arg(&hook).status().unwrap().success());
        let root = tempfile::tempdir().unwrap();
        let w = Worktree {
            repo_path: r.path().display().to_string(),
            dir: "abc-fix-it".into(),
            branch: "drover/abc-fix-it".into(),
            base: None,
        };
        let path = ensure(root.path(), &w).unwrap();
        assert!(!marker.exists(), "a post-checkout hook ran");
        assert_eq!(git(&path, &["branch", "--show-current"]).unwrap(), "drover/abc-fix-it");
        std::fs::write(path.join("work.txt"), "x").unwrap();
        assert_eq!(ensure(root.path(), &w).unwrap(), path, "reused");
        assert!(path.join("work.txt").exists(), "work carries");
        // Uncommitted work is never removed without force.
        assert!(remove(root.path(), &w, false).is_err());
        assert!(path.exists());
        git(&path, &["add", "."]).unwrap();
        git(&path, &["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "work"]).unwrap();
        remove(root.path(), &w, false).unwrap();
        assert!(!path.exists());
        assert!(git(r.path(), &["rev-parse", "--verify", "refs/heads/drover/abc-fix-it"]).is_ok(), "the branch stays");
        // Checked out again from the existing branch, with the committed work.
        let again = ensure(root.path(), &w).unwrap();
        assert!(again.join("work.txt").exists());
        // A folder of that name on another branch is not taken for the task's.
        git(&again, &["checkout", "-q", "-b", "someone-else"]).unwrap();
        assert!(matches!(ensure(root.path(), &w), Err(WorktreeError::WrongBranch { .. })));
    }

    #[test]
    fn a_new_branch_starts_from_the_base() {
        let r = repo();
        git(r.path(), &["branch", "release"]).unwrap();
        git(r.path(), &["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "only on main"]).unwrap();
        let root = tempfile::tempdir().unwrap();
        let w = Worktree {
            repo_path: r.path().display().to_string(),
            dir: "t".into(),
            branch: "drover/t".into(),
            base: Some("release".into()),
        };
        let path = ensure(root.path(), &w).unwrap();
        assert_eq!(git(&path, &["rev-parse", "HEAD"]).unwrap(), git(r.path(), &["rev-parse", "release"]).unwrap());
    }

    #[test]
    fn many_worktrees_of_one_clone_are_made_at_once() {
        let r = repo();
        let root = tempfile::tempdir().unwrap();
        let handles: Vec<_> = (0..8)
            .map(|i| {
                let (repo, root) = (r.path().to_path_buf(), root.path().to_path_buf());
                std::thread::spawn(move || {
                    let w = Worktree {
                        repo_path: repo.display().to_string(),
                        dir: format!("t{i}"),
                        branch: format!("drover/t{i}"),
                        base: None,
                    };
                    ensure(&root, &w).map(|_| ())
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap().unwrap();
        }
    }

    #[test]
    fn bad_inputs_are_refused() {
        let root = tempfile::tempdir().unwrap();
        let not_repo = tempfile::tempdir().unwrap();
        let w = Worktree { repo_path: not_repo.path().display().to_string(), dir: "x".into(), branch: "b".into(), base: None };
        assert!(matches!(ensure(root.path(), &w), Err(WorktreeError::NotARepo(_))));
        for dir in ["../escape", "", ".hidden", "a/b"] {
            let w = Worktree { repo_path: "/".into(), dir: dir.into(), branch: "b".into(), base: None };
            assert!(matches!(ensure(root.path(), &w), Err(WorktreeError::BadName(_))), "{dir}");
        }
    }
}

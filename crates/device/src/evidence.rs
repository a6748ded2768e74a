//! A run's evidence of progress, polled beside its output: new commits in a task's
//! worktree, and the usage its harness records.

use std::time::Duration;

use drover_protocol::device::UsageReport;
use drover_term::dir::SessionDir;

use crate::usage::watch::Watch;
use crate::worktree::GitDirs;

/// How often a task run's worktree is checked for new commits.
pub const COMMIT_CHECK: Duration = Duration::from_secs(5);
/// How often a run's harness records are read for new usage.
pub const USAGE_CHECK: Duration = Duration::from_secs(2);

/// File in a session's directory holding its worktree's HEAD from before the run.
pub const BASE_HEAD: &str = "base_head";

/// File in a session's directory holding its worktree's git directories, as checked
/// against the clone when the run started ([`crate::worktree::GitDirs`]).
pub const GIT_DIRS: &str = "git_dirs.json";

/// HEAD and its subject of a task's worktree at `cwd`, read through `dirs` (None: not a
/// task's worktree).
pub fn worktree_head(cwd: &str, dirs: Option<&GitDirs>) -> Option<(String, String)> {
    let dirs = dirs?;
    let text = crate::worktree::git_worktree(dirs, std::path::Path::new(cwd), &["log", "-1", "--format=%H%x00%s"]).ok()?;
    let (head, subject) = text.split_once('\0')?;
    Some((head.to_string(), subject.chars().take(200).collect()))
}

/// What one session's evidence polling has seen so far.
pub struct Evidence {
    /// The folder the run works in (empty: unknown), where its harness keeps records.
    cwd: String,
    /// The worktree's git directories, for a task's run.
    git_dirs: Option<GitDirs>,
    /// The worktree's HEAD as last seen (task runs only).
    head: Option<String>,
    /// The run's usage, read from its harness's records once it has started.
    usage: Option<Watch>,
    /// The last usage report the server got (a report lost with the link is sent again).
    usage_sent: Option<UsageReport>,
}

impl Evidence {
    /// The polling state of the session in `dir`: its folder from its spec, and for a
    /// task's run its git directories and the HEAD from before the run (recorded when it
    /// started, else read now).
    pub fn read(dir: &SessionDir) -> Evidence {
        let cwd = std::fs::read(dir.spec())
            .ok()
            .and_then(|b| serde_json::from_slice::<drover_protocol::shim::SessionSpec>(&b).ok())
            .map(|s| s.cwd)
            .unwrap_or_default();
        let git_dirs: Option<GitDirs> = std::fs::read(dir.root().join(GIT_DIRS)).ok().and_then(|b| serde_json::from_slice(&b).ok());
        let head = std::fs::read_to_string(dir.root().join(BASE_HEAD))
            .ok()
            .map(|h| h.trim().to_string())
            .filter(|h| !h.is_empty())
            .or_else(|| worktree_head(&cwd, git_dirs.as_ref()).map(|(h, _)| h));
        Evidence { cwd, git_dirs, head, usage: None, usage_sent: None }
    }

    /// The folder the run works in (empty: unknown).
    pub fn cwd(&self) -> &str {
        &self.cwd
    }

    /// Whether the run is a task's, with a worktree whose commits are followed.
    pub fn follows_commits(&self) -> bool {
        self.head.is_some()
    }

    /// The worktree's new HEAD and its subject, if it moved since last seen.
    pub async fn new_commit(&mut self) -> Option<(String, String)> {
        let before = self.head.clone()?;
        let (cwd, dirs) = (self.cwd.clone(), self.git_dirs.clone());
        let (head, subject) = tokio::task::spawn_blocking(move || worktree_head(&cwd, dirs.as_ref())).await.ok()??;
        if head == before {
            return None;
        }
        self.head = Some(head.clone());
        Some((head, subject))
    }

    /// Reads the harness's records of a run started at `since` for new usage: the
    /// report, when the server has not had it.
    pub async fn unsent_usage(&mut self, since: &str) -> Option<UsageReport> {
        if self.cwd.is_empty() {
            return None;
        }
        let cwd = std::path::PathBuf::from(&self.cwd);
        let mut watch = self.usage.take().unwrap_or_else(|| Watch::new(&cwd, since, crate::usage::prices().1).follow_shared_prices());
        let mut watch = tokio::task::spawn_blocking(move || {
            watch.poll();
            watch
        })
        .await
        .ok()?;
        // OpenCode keeps its records in a SQLite store, read asynchronously.
        if let Some(db) = crate::usage::opencode::database() {
            watch.poll_opencode(&db).await;
        }
        let report = watch.report();
        self.usage = Some(watch);
        let unsent = self.usage_sent.as_ref() != Some(&report) && (report.turns > 0 || self.usage_sent.is_some());
        unsent.then_some(report)
    }

    /// The server got `report`.
    pub fn usage_delivered(&mut self, report: UsageReport) {
        self.usage_sent = Some(report);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn git(dir: &std::path::Path, args: &[&str]) {
        assert!(std::process::Command::new("git").arg("-C").arg(dir).args(args).status().unwrap().success());
    }

    /// A clone with one commit, "first".
    fn repo_with_commit() -> tempfile::TempDir {
        let repo = tempfile::tempdir().unwrap();
        git(repo.path(), &["init", "-q", "-b", "main"]);
        git(repo.path(), &["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "first"]);
        repo
    }

    #[test]
    fn a_worktree_head_is_read_and_plain_directories_are_not_worktrees() {
        let repo = repo_with_commit();
        let root = tempfile::tempdir().unwrap();
        let w = drover_protocol::device::Worktree {
            repo_path: repo.path().display().to_string(),
            dir: "w".into(),
            branch: "b".into(),
            base: None,
        };
        let path = crate::worktree::ensure(root.path(), &w).unwrap();
        let dirs = crate::worktree::git_dirs(repo.path(), &path).unwrap();
        let (head, subject) = worktree_head(path.to_str().unwrap(), Some(&dirs)).expect("a worktree has a HEAD");
        assert_eq!((head.len(), subject.as_str()), (40, "first"));
        assert_eq!(worktree_head(path.to_str().unwrap(), None), None, "without its checked directories, nothing is read");
        assert!(crate::worktree::git_dirs(repo.path(), repo.path()).is_err(), "the clone itself is not a task's worktree");
    }

    #[test]
    fn a_worktree_whose_git_files_a_run_rewrote_is_not_trusted() {
        let repo = repo_with_commit();
        let root = tempfile::tempdir().unwrap();
        let w = |dir: &str, branch: &str| drover_protocol::device::Worktree {
            repo_path: repo.path().display().to_string(),
            dir: dir.into(),
            branch: branch.into(),
            base: None,
        };
        let (a, b) =
            (crate::worktree::ensure(root.path(), &w("a", "ba")).unwrap(), crate::worktree::ensure(root.path(), &w("b", "bb")).unwrap());
        let good = crate::worktree::git_dirs(repo.path(), &a).unwrap();
        // A run points its .git at a repository of its own (whose config would name
        // programs for the device's git to run), or at another worktree's directory.
        let evil = a.join("evil");
        git(&a, &["init", "-q", &evil.display().to_string()]);
        std::fs::write(a.join(".git"), format!("gitdir: {}\n", evil.join(".git").display())).unwrap();
        assert!(matches!(crate::worktree::git_dirs(repo.path(), &a), Err(crate::worktree::WorktreeError::Tampered(_))));
        let other = crate::worktree::git_dirs(repo.path(), &b).unwrap();
        std::fs::write(a.join(".git"), format!("gitdir: {}\n", other.git_dir.display())).unwrap();
        assert!(matches!(crate::worktree::git_dirs(repo.path(), &a), Err(crate::worktree::WorktreeError::Tampered(_))));
        // The device reads through what it checked before, whatever the files say now.
        let (head, _) = worktree_head(a.to_str().unwrap(), Some(&good)).unwrap();
        assert_eq!(head.len(), 40);
        // And a reused worktree whose .git was rewritten is refused.
        assert!(matches!(crate::worktree::ensure(root.path(), &w("a", "ba")), Err(crate::worktree::WorktreeError::Tampered(_))));
    }
}

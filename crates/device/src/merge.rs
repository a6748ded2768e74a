//! A merge stage's merge: the task's branch into its base branch, in the device's clone.
//!
//! The merge is computed with `git merge-tree` (no checkout, so neither the task's
//! worktree nor the person's own working copy is touched while it is worked out), then
//! the base branch moves to the merge commit: by a fast-forward inside the worktree
//! that has it checked out (git itself refuses if that would overwrite local changes),
//! or, when no worktree has it, by a compare-and-swap of the ref. Whatever refuses,
//! nothing has changed and the reason says what to do.

use std::path::Path;

use drover_protocol::device::{MergeResult, Worktree};

use crate::worktree::{git, git_dirs, git_in, git_worktree, lock_clone, worktree_path, WorktreeError};

/// Who signs the merge commit when the clone has no git identity configured.
const FALLBACK_IDENTITY: (&str, &str) = ("Drover", "drover@localhost");

/// Merges `w.branch` into its base (`w.base`, or the branch the clone has checked out).
pub fn merge(root: &Path, w: &Worktree, message: &str) -> MergeResult {
    match try_merge(root, w, message) {
        Ok(r) => r,
        Err(e) => MergeResult::Refused { reason: e.to_string() },
    }
}

/// Why a merge stopped short: refused, with the reason a person reads, or git failed.
enum Stop {
    Refused(String),
    Failed(WorktreeError),
}

impl From<WorktreeError> for Stop {
    fn from(e: WorktreeError) -> Stop {
        Stop::Failed(e)
    }
}

fn refuse<T>(reason: String) -> Result<T, Stop> {
    Err(Stop::Refused(reason))
}

fn try_merge(root: &Path, w: &Worktree, message: &str) -> Result<MergeResult, WorktreeError> {
    match merge_steps(root, w, message) {
        Ok(r) => Ok(r),
        Err(Stop::Refused(reason)) => Ok(MergeResult::Refused { reason }),
        Err(Stop::Failed(e)) => Err(e),
    }
}

fn merge_steps(root: &Path, w: &Worktree, message: &str) -> Result<MergeResult, Stop> {
    let repo = Path::new(&w.repo_path);
    if git(repo, &["rev-parse", "--git-dir"]).is_err() {
        return Err(WorktreeError::NotARepo(w.repo_path.clone()).into());
    }
    let _clone = lock_clone(repo);
    // Refuses a folder name that could escape `root`, as every worktree step does; the
    // uncommitted-work check below looks wherever the task's branch is checked out.
    worktree_path(root, w)?;
    refuse_uncommitted(repo, &w.branch)?;
    let into = target_branch(repo, w)?;
    let Ok(base) = git(repo, &["rev-parse", "--verify", "--quiet", &format!("refs/heads/{into}^{{commit}}")]) else {
        return refuse(format!("the clone at {} has no branch `{into}` to merge into", w.repo_path));
    };
    let Ok(head) = git(repo, &["rev-parse", "--verify", "--quiet", &format!("refs/heads/{}^{{commit}}", w.branch)]) else {
        return refuse(format!("the task's branch `{}` does not exist in the clone at {}", w.branch, w.repo_path));
    };
    if git(repo, &["merge-base", "--is-ancestor", &head, &base]).is_ok() {
        return Ok(MergeResult::Merged { into, commit: base, already: true });
    }
    let tree = merged_tree(repo, w, &into, &base, &head)?;
    if let Some(dir) = rebasing(repo, &into)? {
        return refuse(format!("`{into}` is being rebased in {dir}: finish or abort that rebase, then hand off again"));
    }
    let identity = identity_env(repo);
    let env: Vec<(&str, &str)> = identity.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let commit = git_in(repo, &["commit-tree", &tree, "-p", &base, "-p", &head, "-m", message], &env)?;
    advance(repo, &into, &base, &commit)?;
    Ok(MergeResult::Merged { into, commit, already: false })
}

/// Refuses while the worktree that has `branch` checked out has uncommitted changes.
fn refuse_uncommitted(repo: &Path, branch: &str) -> Result<(), Stop> {
    let Some(sandbox) = checked_out_at(repo, branch)? else { return Ok(()) };
    let sandbox = Path::new(&sandbox);
    // Untracked files (a harness's own caches, say) are not the work: only changes
    // to tracked files hold the merge up. Read through the clone's own record of the
    // worktree, never through files the run could have rewritten.
    let dirs = git_dirs(repo, sandbox)?;
    let dirty = git_worktree(&dirs, sandbox, &["status", "--porcelain", "--untracked-files=no"])?;
    if dirty.is_empty() {
        return Ok(());
    }
    let n = dirty.lines().count();
    refuse(format!(
        "the task's worktree has uncommitted changes ({n} file{}): commit them first, since the merge takes the branch's commits",
        if n == 1 { "" } else { "s" }
    ))
}

/// The branch to merge into: the repo's base, else the clone's checked-out branch.
fn target_branch(repo: &Path, w: &Worktree) -> Result<String, Stop> {
    let into = match &w.base {
        Some(b) => b.clone(),
        None => match git(repo, &["symbolic-ref", "--quiet", "HEAD"]).map(|r| r.strip_prefix("refs/heads/").map(str::to_string)) {
            Ok(Some(b)) => b,
            _ => {
                return refuse(format!(
                    "the clone at {} has no branch checked out, so there is no branch to merge into: name one with `drover repo add --base BRANCH`",
                    w.repo_path
                ))
            }
        },
    };
    if git(repo, &["check-ref-format", "--branch", &into]).is_err() {
        return refuse(format!("`{into}` is not a valid branch name"));
    }
    Ok(into)
}

/// The tree of `head` merged onto `base`, written without touching any working copy.
fn merged_tree(repo: &Path, w: &Worktree, into: &str, base: &str, head: &str) -> Result<String, Stop> {
    match git_in(repo, &["merge-tree", "--write-tree", "--name-only", "--no-messages", base, head], &[]) {
        Ok(out) => Ok(out.lines().next().unwrap_or_default().to_string()),
        Err(WorktreeError::Git { stdout, code: Some(1), .. }) => {
            // Exit status 1: conflicts. The first line is the tree, then the files.
            let files: Vec<&str> = stdout.lines().skip(1).filter(|l| !l.is_empty()).take(20).collect();
            refuse(format!(
                "`{}` does not merge cleanly into `{into}`: conflicts in {}. Merge `{into}` into the branch, resolve and commit, then hand off again",
                w.branch,
                files.join(", ")
            ))
        }
        Err(WorktreeError::Git { stderr, .. }) if stderr.contains("unknown option") || stderr.contains("usage: git merge-tree") => {
            refuse("merging needs git 2.40 or newer on the device (`git merge-tree --write-tree --name-only`)".into())
        }
        Err(e) => Err(e.into()),
    }
}

/// Moves `into` from `base` to `commit`: with its working copy where it is checked out,
/// else the ref alone, refusing if it moved meanwhile.
fn advance(repo: &Path, into: &str, base: &str, commit: &str) -> Result<(), Stop> {
    let Some(dir) = checked_out_at(repo, into)? else {
        if let Err(e) = git(repo, &["update-ref", "-m", "drover: merge stage", &format!("refs/heads/{into}"), commit, base]) {
            return refuse(format!("`{into}` moved while merging ({e}): hand off again"));
        }
        return Ok(());
    };
    let dir_path = Path::new(&dir);
    // The working copy must still be on the base, at the commit merged onto.
    let on_base = git(dir_path, &["symbolic-ref", "--quiet", "HEAD"]).is_ok_and(|r| r == format!("refs/heads/{into}"));
    if !on_base || git(dir_path, &["rev-parse", "HEAD"])? != base {
        return refuse(format!("`{into}` moved in {dir} while merging: hand off again"));
    }
    // Moves the branch and that working copy together; git refuses if the
    // working copy's own changes would be overwritten. Never stash them.
    if let Err(e) = git(dir_path, &["merge", "--ff-only", "--no-autostash", "--quiet", commit]) {
        return refuse(format!("`{into}` is checked out at {dir} and could not be fast-forwarded to the merge: {e}"));
    }
    if git(repo, &["rev-parse", &format!("refs/heads/{into}")])? != commit {
        return refuse(format!("`{into}` in {dir} did not end at the merge commit (it moved meanwhile): hand off again"));
    }
    Ok(())
}

/// The worktree (the clone itself or another) that has `branch` checked out, if any.
fn checked_out_at(repo: &Path, branch: &str) -> Result<Option<String>, WorktreeError> {
    let list = git(repo, &["worktree", "list", "--porcelain"])?;
    let wanted = format!("branch refs/heads/{branch}");
    let mut dir = None;
    for line in list.lines() {
        if let Some(d) = line.strip_prefix("worktree ") {
            dir = Some(d.to_string());
        } else if line == wanted {
            return Ok(dir);
        }
    }
    Ok(None)
}

/// The worktree in which `branch` is being rebased, if any (git then shows it detached,
/// and moving the branch under the rebase would break it).
fn rebasing(repo: &Path, branch: &str) -> Result<Option<String>, WorktreeError> {
    let wanted = format!("refs/heads/{branch}");
    let list = git(repo, &["worktree", "list", "--porcelain"])?;
    for dir in list.lines().filter_map(|l| l.strip_prefix("worktree ")) {
        for state in ["rebase-merge/head-name", "rebase-apply/head-name"] {
            let Ok(path) = git(Path::new(dir), &["rev-parse", "--path-format=absolute", "--git-path", state]) else { continue };
            if std::fs::read_to_string(&path).is_ok_and(|h| h.trim() == wanted) {
                return Ok(Some(dir.to_string()));
            }
        }
    }
    Ok(None)
}

/// Author and committer for the merge commit when the clone has none configured.
fn identity_env(repo: &Path) -> Vec<(&'static str, String)> {
    if git(repo, &["config", "user.name"]).is_ok() && git(repo, &["config", "user.email"]).is_ok() {
        return Vec::new();
    }
    let (name, email) = FALLBACK_IDENTITY;
    vec![
        ("GIT_AUTHOR_NAME", name.into()),
        ("GIT_AUTHOR_EMAIL", email.into()),
        ("GIT_COMMITTER_NAME", name.into()),
        ("GIT_COMMITTER_EMAIL", email.into()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    fn run(dir: &Path, args: &[&str]) -> String {
        let out = Command::new("git").arg("-C").arg(dir).args(["-c", "user.name=t", "-c", "user.email=t@t"]).args(args).output().unwrap();
        assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    fn commit_file(dir: &Path, name: &str, text: &str) {
        std::fs::write(dir.join(name), text).unwrap();
        run(dir, &["add", name]);
        run(dir, &["commit", "-q", "-m", &format!("write {name}")]);
    }

    /// A clone on `main` and a task worktree on its own branch.
    fn setup() -> (tempfile::TempDir, tempfile::TempDir, Worktree) {
        let repo = tempfile::tempdir().unwrap();
        run(repo.path(), &["init", "-q", "-b", "main"]);
        commit_file(repo.path(), "shared.txt", "one\ntwo\nthree\n");
        let root = tempfile::tempdir().unwrap();
        let w = Worktree { repo_path: repo.path().display().to_string(), dir: "t1-fix".into(), branch: "drover/t1-fix".into(), base: None };
        crate::worktree::ensure(root.path(), &w).unwrap();
        (repo, root, w)
    }

    #[test]
    fn a_clean_branch_merges_into_the_checked_out_base_and_its_working_copy() {
        let (repo, root, w) = setup();
        let sandbox = root.path().join(&w.dir);
        commit_file(&sandbox, "feature.txt", "new\n");
        commit_file(repo.path(), "other.txt", "meanwhile on main\n");
        let r = merge(root.path(), &w, "Merge drover/t1-fix: Fix it");
        let MergeResult::Merged { into, commit, already } = r else { panic!("{r:?}") };
        assert_eq!((into.as_str(), already), ("main", false));
        assert_eq!(run(repo.path(), &["rev-parse", "main"]), commit);
        assert_eq!(run(repo.path(), &["log", "-1", "--format=%s%n%P"]).lines().count(), 2);
        assert!(run(repo.path(), &["log", "-1", "--format=%P"]).contains(' '), "a merge commit, two parents");
        assert!(repo.path().join("feature.txt").exists(), "the person's working copy follows");
        assert_eq!(run(repo.path(), &["status", "--porcelain"]), "");
        // Again: nothing to do.
        let again = merge(root.path(), &w, "m");
        assert_eq!(again, MergeResult::Merged { into: "main".into(), commit, already: true });
    }

    #[test]
    fn a_base_not_checked_out_moves_by_compare_and_swap() {
        let (repo, root, mut w) = setup();
        run(repo.path(), &["branch", "release"]);
        w.base = Some("release".into());
        commit_file(&root.path().join(&w.dir), "feature.txt", "new\n");
        let before_main = run(repo.path(), &["rev-parse", "main"]);
        let r = merge(root.path(), &w, "m");
        assert!(matches!(&r, MergeResult::Merged { into, already: false, .. } if into == "release"), "{r:?}");
        assert_eq!(run(repo.path(), &["rev-parse", "main"]), before_main, "main untouched");
        assert_eq!(run(repo.path(), &["show", "release:feature.txt"]), "new");
    }

    #[test]
    fn conflicts_and_uncommitted_work_refuse_and_change_nothing() {
        let (repo, root, w) = setup();
        let sandbox = root.path().join(&w.dir);
        commit_file(&sandbox, "shared.txt", "one\nTWO (task)\nthree\n");
        commit_file(repo.path(), "shared.txt", "one\nTWO (main)\nthree\n");
        let main = run(repo.path(), &["rev-parse", "main"]);
        let r = merge(root.path(), &w, "m");
        let MergeResult::Refused { reason } = r else { panic!("{r:?}") };
        assert!(reason.contains("conflicts in shared.txt"), "{reason}");
        assert_eq!(run(repo.path(), &["rev-parse", "main"]), main);
        assert_eq!(run(repo.path(), &["status", "--porcelain"]), "");
        // The agent resolves on its branch: then it merges.
        run(&sandbox, &["merge", "-q", "main", "-X", "ours", "-m", "take main"]);
        std::fs::write(sandbox.join("shared.txt"), "not committed").unwrap();
        std::fs::write(sandbox.join(".harness-cache"), "untracked: not in the way").unwrap();
        let r = merge(root.path(), &w, "m");
        assert!(matches!(&r, MergeResult::Refused { reason } if reason.contains("uncommitted changes (1 file)")), "{r:?}");
        run(&sandbox, &["checkout", "shared.txt"]);
        assert!(matches!(merge(root.path(), &w, "m"), MergeResult::Merged { already: false, .. }));
    }

    #[test]
    fn a_dirty_base_working_copy_in_the_way_refuses() {
        let (repo, root, w) = setup();
        commit_file(&root.path().join(&w.dir), "shared.txt", "one\nchanged by the task\nthree\n");
        std::fs::write(repo.path().join("shared.txt"), "the person's own edit\n").unwrap();
        let main = run(repo.path(), &["rev-parse", "main"]);
        let r = merge(root.path(), &w, "m");
        assert!(matches!(&r, MergeResult::Refused { reason } if reason.contains("could not be fast-forwarded")), "{r:?}");
        assert_eq!(run(repo.path(), &["rev-parse", "main"]), main);
        assert_eq!(std::fs::read_to_string(repo.path().join("shared.txt")).unwrap(), "the person's own edit\n");
    }

    #[test]
    fn the_persons_autostash_setting_never_touches_their_edits() {
        let (repo, root, w) = setup();
        run(repo.path(), &["config", "merge.autoStash", "true"]);
        commit_file(&root.path().join(&w.dir), "shared.txt", "one\nchanged by the task\nthree\n");
        std::fs::write(repo.path().join("shared.txt"), "the person's own edit\n").unwrap();
        let r = merge(root.path(), &w, "m");
        assert!(matches!(&r, MergeResult::Refused { .. }), "{r:?}");
        assert_eq!(std::fs::read_to_string(repo.path().join("shared.txt")).unwrap(), "the person's own edit\n");
        assert_eq!(run(repo.path(), &["stash", "list"]), "", "nothing stashed");
    }

    #[test]
    fn a_base_being_rebased_is_not_moved() {
        let (repo, root, mut w) = setup();
        w.base = Some("main".into());
        commit_file(&root.path().join(&w.dir), "feature.txt", "new\n");
        // main gets two commits, the second conflicting with a side branch, and is
        // being rebased onto that branch (stopped at the conflict).
        run(repo.path(), &["checkout", "-q", "-b", "side", "main~0"]);
        commit_file(repo.path(), "shared.txt", "side\n");
        run(repo.path(), &["checkout", "-q", "main"]);
        commit_file(repo.path(), "shared.txt", "main\n");
        let main = run(repo.path(), &["rev-parse", "main"]);
        let out = Command::new("git")
            .arg("-C")
            .arg(repo.path())
            .args(["-c", "user.name=t", "-c", "user.email=t@t", "rebase", "side"])
            .output()
            .unwrap();
        assert!(!out.status.success(), "the rebase stops at its conflict");
        let r = merge(root.path(), &w, "m");
        assert!(matches!(&r, MergeResult::Refused { reason } if reason.contains("being rebased")), "{r:?}");
        assert_eq!(run(repo.path(), &["rev-parse", "refs/heads/main"]), main);
    }

    #[test]
    fn bad_bases_are_refused_with_a_reason() {
        let (repo, root, mut w) = setup();
        w.base = Some("no-such-branch".into());
        assert!(matches!(merge(root.path(), &w, "m"), MergeResult::Refused { reason } if reason.contains("no branch `no-such-branch`")));
        w.base = Some("bad..name".into());
        assert!(matches!(merge(root.path(), &w, "m"), MergeResult::Refused { reason } if reason.contains("not a valid branch name")));
        w.base = None;
        let head = run(repo.path(), &["rev-parse", "HEAD"]);
        run(repo.path(), &["checkout", "-q", "--detach", &head]);
        assert!(matches!(merge(root.path(), &w, "m"), MergeResult::Refused { reason } if reason.contains("no branch checked out")));
    }
}

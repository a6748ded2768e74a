//! A task's branch and worktree names: derived from the task id and a slug of its title,
//! safe for git and the file system whatever the title holds.

use crate::TaskId;

/// Longest slug taken from a title.
const SLUG_MAX: usize = 40;

/// A slug of `title`: lowercase ASCII letters and digits joined by single `-`, at most
/// 40 characters, never empty (`task`).
pub fn slug(title: &str) -> String {
    let mut out = String::new();
    let mut dash = false;
    for c in title.chars().flat_map(char::to_lowercase) {
        if c.is_ascii_alphanumeric() {
            let sep = dash && !out.is_empty();
            if out.len() + usize::from(sep) >= SLUG_MAX {
                break;
            }
            if sep {
                out.push('-');
            }
            dash = false;
            out.push(c);
        } else {
            dash = true;
        }
    }
    if out.is_empty() {
        "task".into()
    } else {
        out
    }
}

/// The short form of a task id used in names (the last 12 hex digits: unique enough
/// within a repository and readable).
fn short(task: TaskId) -> String {
    let s = task.to_string();
    s[s.len() - 12..].to_string()
}

/// The branch a task's sandbox works on: `drover/<short id>-<slug>`.
pub fn branch_name(task: TaskId, title: &str) -> String {
    format!("drover/{}-{}", short(task), slug(title))
}

/// The worktree's folder name: `<short id>-<slug>`.
pub fn worktree_dir(task: TaskId, title: &str) -> String {
    format!("{}-{}", short(task), slug(title))
}

/// Whether `name` is a branch name git accepts (the rules of `git check-ref-format
/// --branch`), at most 200 bytes: for a repository's base branch given by a person.
pub fn is_valid_branch(name: &str) -> bool {
    (1..=200).contains(&name.len())
        && !name.starts_with('-')
        && !name.starts_with('/')
        && !name.contains("..")
        && !name.contains("//")
        && !name.contains("/.")
        && !name.starts_with('.')
        && !name.ends_with('/')
        && !name.ends_with(".lock")
        && !name.ends_with('.')
        && !name.contains("@{")
        && name != "@"
        && name.bytes().all(|b| b > 0x20 && b != 0x7f && !b" ~^:?*[\\".contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_titles_make_safe_names() {
        let id = TaskId::new();
        let titles = [
            "Fix the login page",
            "$(rm -rf /); `reboot` && echo pwned | sh",
            "../../etc/passwd",
            "line one\nline two\r\n\ttabbed",
            "🚀 Ship it 🚀 — ünïcödé",
            "",
            "....",
            "-leading-dash",
            "a.lock",
            &"x".repeat(10_000),
            "refs/heads/main@{0}~1^2:*?[",
        ];
        for t in titles {
            let b = branch_name(id, t);
            assert!(is_valid_branch(&b), "{b:?} from {t:?}");
            let d = worktree_dir(id, t);
            assert!(!d.contains('/') && !d.starts_with('.') && d.len() <= 53, "{d:?}");
            assert!(d.bytes().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-'), "{d:?}");
        }
        assert!(branch_name(id, "Fix the login page").ends_with("-fix-the-login-page"));
        assert!(worktree_dir(id, "").ends_with("-task"));
        assert_eq!(slug("🚀 Ship it 🚀 — ünïcödé"), "ship-it-n-c-d");
        assert_eq!(slug(&"ab ".repeat(100)).len(), 40);
        // Cut at the limit, never on a separator.
        assert_eq!(slug("Write <img src=x onerror=alert(1)> the work file"), "write-img-src-x-onerror-alert-1-the-work");
        for n in 30..50 {
            let s = slug(&format!("{} tail", "x".repeat(n)));
            assert!(!s.ends_with('-') && s.len() <= 40, "{s}");
        }
    }

    #[test]
    fn base_branches_are_checked() {
        for ok in ["main", "release/2.x", "feature_a-b"] {
            assert!(is_valid_branch(ok), "{ok}");
        }
        for bad in ["", "-x", "a..b", "a b", "a~1", "x.lock", "a/", "/a", ".hidden", "a/.b", "@", "a@{1}", "tab\there", &"x".repeat(201)] {
            assert!(!is_valid_branch(bad), "{bad:?}");
        }
    }
}

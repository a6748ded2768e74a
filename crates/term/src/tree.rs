//! A run's whole process tree. The shim is a child subreaper (`PR_SET_CHILD_SUBREAPER`):
//! a descendant that detaches (a new session, a double fork) is re-parented to the shim
//! instead of init, so every process of the run stays beneath the shim, where Stop and
//! the end of the run find and kill it. Nothing of a run outlives it.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

/// Makes this process the reaper of its orphaned descendants.
pub fn become_subreaper() -> std::io::Result<()> {
    // SAFETY: plain prctl with integer arguments.
    if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) } == -1 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// The parent of every live process on the machine (zombies have ended: they are left
/// to the reaper), from `/proc/<pid>/stat`.
fn parents() -> HashMap<i32, i32> {
    let mut out = HashMap::new();
    let Ok(dir) = std::fs::read_dir("/proc") else { return out };
    for entry in dir.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else { continue };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
        match parse_stat(&stat) {
            Some(('Z' | 'X', _)) | None => {}
            Some((_, ppid)) => {
                out.insert(pid, ppid);
            }
        }
    }
    out
}

/// The state and parent pid from a `/proc/<pid>/stat` line (the command name, in
/// parentheses, may hold spaces and parentheses itself: the fields follow the last `)`).
fn parse_stat(stat: &str) -> Option<(char, i32)> {
    let mut rest = stat[stat.rfind(')')? + 1..].split_whitespace();
    let state = rest.next()?.chars().next()?;
    Some((state, rest.next()?.parse().ok()?))
}

/// Every process beneath `root` (not `root` itself).
pub fn descendants(root: u32) -> Vec<i32> {
    descendants_in(&parents(), root as i32)
}

fn descendants_in(parents: &HashMap<i32, i32>, root: i32) -> Vec<i32> {
    let mut out = Vec::new();
    for &pid in parents.keys() {
        let mut at = pid;
        // A chain longer than the machine's process count is a cycle of stale reads.
        for _ in 0..parents.len() {
            match parents.get(&at) {
                Some(&p) if p == root => {
                    out.push(pid);
                    break;
                }
                Some(&p) if p > 1 && p != at => at = p,
                _ => break,
            }
        }
    }
    out
}

/// Whether `pid` is beneath `root` (one of the run's processes, when `root` is its shim).
pub fn is_beneath(pid: u32, root: u32) -> bool {
    let mut at = pid as i32;
    for _ in 0..4096 {
        let Some((_, ppid)) = std::fs::read_to_string(format!("/proc/{at}/stat")).ok().as_deref().and_then(parse_stat) else {
            return false;
        };
        if ppid == root as i32 {
            return true;
        }
        if ppid <= 1 {
            return false;
        }
        at = ppid;
    }
    false
}

/// Sends `signal` to every process beneath `root`; returns how many there were.
pub fn signal_all(root: u32, signal: Signal) -> usize {
    let all = descendants(root);
    for &pid in &all {
        let _ = kill(Pid::from_raw(pid), signal);
    }
    all.len()
}

/// Kills every process beneath `root` and reaps them, until two looks in a row find none
/// (a process caught mid-fork shows up in the next) or `within` has passed. Returns
/// whether none are left. Only the process's one reaper may call it (it reaps any child).
pub fn end_all(root: u32, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    let mut quiet = 0;
    while Instant::now() < deadline {
        // Frozen first, so none forks between the look and the kill.
        signal_all(root, Signal::SIGSTOP);
        let n = signal_all(root, Signal::SIGKILL);
        reap();
        if n == 0 {
            quiet += 1;
            if quiet >= 2 {
                return true;
            }
        } else {
            quiet = 0;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    descendants(root).is_empty()
}

/// Reaps every child that has ended, without waiting.
pub fn reap() {
    use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
    while let Ok(s) = waitpid(Pid::from_raw(-1), Some(WaitPidFlag::WNOHANG)) {
        if s == WaitStatus::StillAlive {
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_parent_is_read_after_the_command_name() {
        assert_eq!(parse_stat("42 (sh) S 7 42 42 0"), Some(('S', 7)));
        assert_eq!(parse_stat("42 (a) b (c)) Z 9 42"), Some(('Z', 9)));
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn this_test_is_beneath_its_parent_and_not_beneath_itself() {
        let me = std::process::id();
        let parent = std::os::unix::process::parent_id();
        assert!(is_beneath(me, parent));
        assert!(!is_beneath(parent, me));
        assert!(!is_beneath(me, 999_999_999));
    }

    #[test]
    fn descendants_follow_the_chain_to_the_root() {
        let parents = HashMap::from([(10, 1), (11, 10), (12, 11), (13, 1), (14, 13), (15, 12)]);
        let mut d = descendants_in(&parents, 10);
        d.sort();
        assert_eq!(d, vec![11, 12, 15]);
        assert!(descendants_in(&parents, 99).is_empty());
        // A stale read that makes a cycle ends.
        let cyclic = HashMap::from([(20, 21), (21, 20)]);
        assert!(descendants_in(&cyclic, 10).is_empty());
    }
}

//! `drover doctor`'s verdicts: what each measurement of a machine (a git version, a clock
//! offset, free disk, a file's mode) means for Drover, with the fix for what would break.
//! The measuring is done at the edge (the CLI); the judging is here, pure and tested.

use serde::{Deserialize, Serialize};

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Nothing to do.
    Ok,
    /// Works, but something is weaker or missing: worth a look.
    Warn,
    /// Something Drover needs would break: `drover doctor` exits non-zero.
    Fail,
    /// Could not be checked here (why is in the detail); never a failure.
    Skip,
}

impl Status {
    /// The word people read.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Warn => "warn",
            Status::Fail => "fail",
            Status::Skip => "skip",
        }
    }
}

/// One check's result, as printed and as `--json` gives it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    /// Which check (`server`, `tls`, `git`, `harness:claude`, …).
    pub check: String,
    /// How it came out.
    pub status: Status,
    /// What was found, in one line.
    pub detail: String,
    /// What to do about it, in one line (None when there is nothing to do).
    pub fix: Option<String>,
}

impl Finding {
    /// A check that passed.
    pub fn ok(check: &str, detail: impl Into<String>) -> Finding {
        Finding { check: check.into(), status: Status::Ok, detail: detail.into(), fix: None }
    }

    /// A check that passed with a reservation, and what to do about it.
    pub fn warn(check: &str, detail: impl Into<String>, fix: impl Into<String>) -> Finding {
        Finding { check: check.into(), status: Status::Warn, detail: detail.into(), fix: Some(fix.into()) }
    }

    /// A check that failed, and the fix.
    pub fn fail(check: &str, detail: impl Into<String>, fix: impl Into<String>) -> Finding {
        Finding { check: check.into(), status: Status::Fail, detail: detail.into(), fix: Some(fix.into()) }
    }

    /// A check that could not be made here, and why.
    pub fn skip(check: &str, detail: impl Into<String>) -> Finding {
        Finding { check: check.into(), status: Status::Skip, detail: detail.into(), fix: None }
    }
}

/// Whether any check failed (the exit status of `drover doctor`).
pub fn any_failed(findings: &[Finding]) -> bool {
    findings.iter().any(|f| f.status == Status::Fail)
}

/// The oldest git a device works with: sandboxes are worktrees, and the evidence of a
/// run reads `git branch --show-current` (2.22).
pub const GIT_NEEDED: (u32, u32) = (2, 22);

/// The oldest git a merge stage works with (`git merge-tree --write-tree --name-only`).
pub const GIT_FOR_MERGES: (u32, u32) = (2, 40);

/// The version in `git --version`'s answer (`git version 2.47.3`, `git version
/// 2.39.3 (Apple Git-146)`), as (major, minor, patch).
pub fn git_version(answer: &str) -> Option<(u32, u32, u32)> {
    let word = answer.split_whitespace().find(|w| w.chars().next().is_some_and(|c| c.is_ascii_digit()))?;
    let mut parts = word.split('.').map(|p| p.chars().take_while(char::is_ascii_digit).collect::<String>().parse::<u32>().ok());
    let major = parts.next()??;
    let minor = parts.next().flatten().unwrap_or(0);
    let patch = parts.next().flatten().unwrap_or(0);
    Some((major, minor, patch))
}

/// What the git found on PATH means for a device: `answer` is what `git --version`
/// printed (None: there is no git).
pub fn judge_git(answer: Option<&str>) -> Finding {
    const INSTALL: &str = "install git 2.40 or newer (Debian/Ubuntu: apt-get install git) and put it on the device daemon's PATH";
    let Some(answer) = answer else {
        return Finding::fail("git", "git is not on PATH: the device cannot make sandboxes (git worktrees)", INSTALL);
    };
    let Some((major, minor, patch)) = git_version(answer) else {
        return Finding::warn("git", format!("cannot read the version in `{}`", answer.trim()), INSTALL);
    };
    let found = format!("git {major}.{minor}.{patch}");
    if (major, minor) < GIT_NEEDED {
        let (a, b) = GIT_NEEDED;
        return Finding::fail("git", format!("{found} is older than {a}.{b}, which sandboxes need"), INSTALL);
    }
    if (major, minor) < GIT_FOR_MERGES {
        let (a, b) = GIT_FOR_MERGES;
        return Finding::warn("git", format!("{found}: sandboxes work, merge stages need {a}.{b} or newer"), INSTALL);
    }
    Finding::ok("git", found)
}

/// A clock offset above this many seconds is worth fixing.
pub const SKEW_WARN_SECS: f64 = 5.0;

/// A clock offset above this many seconds breaks things: sign-in links, leases, the
/// freshness of webhooks and what "silent for 15 minutes" means are all times.
pub const SKEW_FAIL_SECS: f64 = 60.0;

/// What this machine's clock being `offset` seconds ahead of the server's (behind if
/// negative) means, give or take `uncertainty` seconds (the server's `Date` has whole
/// seconds, and the answer took some time to come).
pub fn judge_clock(offset: f64, uncertainty: f64) -> Finding {
    let at_least = (offset.abs() - uncertainty).max(0.0);
    let way = if offset >= 0.0 { "ahead of" } else { "behind" };
    let detail = format!("this machine's clock is {:.1} s {way} the server's (±{:.1} s)", offset.abs(), uncertainty);
    const FIX: &str = "keep both clocks in sync with NTP (timedatectl set-ntp true, or chrony)";
    if at_least > SKEW_FAIL_SECS {
        Finding::fail("clock", detail, FIX)
    } else if at_least > SKEW_WARN_SECS {
        Finding::warn("clock", detail, FIX)
    } else {
        Finding::ok("clock", detail)
    }
}

/// Less free space than this under the home fails: the database, the recordings and the
/// sandboxes' worktrees all grow there.
pub const DISK_FAIL_BYTES: u64 = 512 << 20;

/// Less free space than this under the home is worth a warning.
pub const DISK_WARN_BYTES: u64 = 2 << 30;

/// What `free` bytes (of `total`) free in the file system of the home means.
pub fn judge_disk(home: &str, free: u64, total: u64) -> Finding {
    let detail = format!("{} free of {} under {home}", bytes(free), bytes(total));
    let fix = format!("free some space on the file system of {home}, or move DROVER_HOME to a larger one");
    if free < DISK_FAIL_BYTES {
        Finding::fail("disk", detail, fix)
    } else if free < DISK_WARN_BYTES {
        Finding::warn("disk", detail, fix)
    } else {
        Finding::ok("disk", detail)
    }
}

/// A size in bytes as people read it (binary units, one decimal).
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    match unit {
        0 => format!("{n} B"),
        _ => format!("{v:.1} {}", UNITS[unit]),
    }
}

/// Whether a file or directory of Drover's with permission bits `mode` is open to other
/// users (any group or other bit): every file Drover keeps is its user's alone.
pub fn open_to_others(mode: u32) -> bool {
    mode & 0o077 != 0
}

/// What the server's version means next to this program's (`ours`); `theirs` None: the
/// server did not say (older than the version header).
pub fn judge_versions(url: &str, theirs: Option<&str>, ours: &str) -> Finding {
    match theirs {
        Some(v) if v == ours => Finding::ok("server", format!("{url} answers: drover {v}, as this one")),
        Some(v) => Finding::warn(
            "server",
            format!("{url} answers: drover {v}, while this one is {ours}"),
            "run the same version on the server and its devices (upgrade the older one)",
        ),
        None => Finding::warn(
            "server",
            format!("{url} answers, but does not say its version (older than {ours})"),
            "upgrade the server to this drover's version",
        ),
    }
}

/// What a device's free slots mean: `slots` it may run at once, `live` running now.
pub fn judge_slots(device: &str, slots: u32, live: u32, connected: bool) -> Finding {
    let free = slots.saturating_sub(live);
    let detail = format!(
        "device `{device}`: {free} of {slots} slots free ({live} live), daemon {}",
        match connected {
            true => "connected",
            false => "not connected",
        }
    );
    if !connected {
        return Finding::warn("slots", detail, "start the device daemon (`drover device`, or its service)");
    }
    if free == 0 {
        return Finding::warn("slots", detail, "new runs wait for a slot: stop a session, or raise the slots (`drover device --slots N`)");
    }
    Finding::ok("slots", detail)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn git_versions_are_read_from_what_git_prints() {
        assert_eq!(git_version("git version 2.47.3\n"), Some((2, 47, 3)));
        assert_eq!(git_version("git version 2.39.3 (Apple Git-146)"), Some((2, 39, 3)));
        assert_eq!(git_version("git version 2.45.GIT"), Some((2, 45, 0)));
        assert_eq!(git_version("git version 3"), Some((3, 0, 0)));
        assert_eq!(git_version("no version here"), None);
    }

    #[test]
    fn git_is_judged_against_what_sandboxes_and_merges_need() {
        assert_eq!(judge_git(None).status, Status::Fail);
        assert!(judge_git(None).fix.unwrap().contains("install git"));
        assert_eq!(judge_git(Some("git version 2.20.1")).status, Status::Fail);
        assert_eq!(judge_git(Some("git version 2.34.1")).status, Status::Warn);
        assert_eq!(judge_git(Some("git version 2.40.0")).status, Status::Ok);
        assert_eq!(judge_git(Some("git version 2.47.3")).detail, "git 2.47.3");
        assert_eq!(judge_git(Some("weird")).status, Status::Warn);
    }

    #[test]
    fn a_clock_offset_is_judged_net_of_what_cannot_be_measured() {
        assert_eq!(judge_clock(0.3, 0.6).status, Status::Ok);
        // 6 s, but it may be only 4.5: not worth a warning.
        assert_eq!(judge_clock(6.0, 1.5).status, Status::Ok);
        assert_eq!(judge_clock(-8.0, 0.6).status, Status::Warn);
        assert!(judge_clock(-8.0, 0.6).detail.contains("behind"));
        assert_eq!(judge_clock(60.5, 0.6).status, Status::Warn);
        assert_eq!(judge_clock(120.0, 0.6).status, Status::Fail);
        assert!(judge_clock(120.0, 0.6).fix.unwrap().contains("NTP"));
    }

    #[test]
    fn free_disk_is_judged_by_what_is_left() {
        assert_eq!(judge_disk("/h", 100 << 20, 1 << 40).status, Status::Fail);
        assert_eq!(judge_disk("/h", 1 << 30, 1 << 40).status, Status::Warn);
        assert_eq!(judge_disk("/h", 50 << 30, 1 << 40).status, Status::Ok);
        assert_eq!(judge_disk("/h", 50 << 30, 1 << 40).detail, "50.0 GiB free of 1.0 TiB under /h");
        assert_eq!(bytes(512), "512 B");
    }

    #[test]
    fn modes_open_to_group_or_others_are_flagged() {
        assert!(!open_to_others(0o700));
        assert!(!open_to_others(0o600));
        assert!(open_to_others(0o640));
        assert!(open_to_others(0o701));
        assert!(open_to_others(0o755));
    }

    #[test]
    fn versions_and_slots_are_judged() {
        assert_eq!(judge_versions("u", Some("1.0.0"), "1.0.0").status, Status::Ok);
        assert_eq!(judge_versions("u", Some("0.9.0"), "1.0.0").status, Status::Warn);
        assert_eq!(judge_versions("u", None, "1.0.0").status, Status::Warn);
        assert_eq!(judge_slots("d", 4, 1, true).status, Status::Ok);
        assert!(judge_slots("d", 4, 1, true).detail.contains("3 of 4 slots free"));
        assert_eq!(judge_slots("d", 4, 4, true).status, Status::Warn);
        assert_eq!(judge_slots("d", 4, 0, false).status, Status::Warn);
    }

    #[test]
    fn only_a_failure_fails_the_whole() {
        let mut all = vec![Finding::ok("a", ""), Finding::warn("b", "", ""), Finding::skip("c", "")];
        assert!(!any_failed(&all));
        all.push(Finding::fail("d", "", ""));
        assert!(any_failed(&all));
    }
}

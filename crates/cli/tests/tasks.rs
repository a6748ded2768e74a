//! End-to-end: tasks flow through their stages in git worktrees, staffed by a scripted
//! stand-in harness that behaves like an agent CLI (prints, commits, calls `drover task`
//! with its session credential, hands off, then lingers as an interactive CLI would).

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;
use support::{bin, secs, Drover};

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git").arg("-C").arg(dir).args(args).output().expect("git");
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A repository with one commit.
fn repo() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    git(d.path(), &["init", "-q", "-b", "main"]);
    std::fs::write(d.path().join("README"), "app\n").unwrap();
    git(d.path(), &["add", "."]);
    git(d.path(), &["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "start"]);
    d
}

/// Writes the stand-in agent: `body` runs in the worktree with the session's environment.
fn agent_script(dir: &Path, body: &str) -> PathBuf {
    let path = dir.join("agent.sh");
    let script = format!("#!/bin/sh\nset -e\nDROVER='{}'\necho \"agent: $DROVER_STAGE in $(pwd)\"\n{body}\n", bin().display());
    std::fs::write(&path, script).unwrap();
    Command::new("chmod").arg("+x").arg(&path).status().unwrap();
    path
}

const WORK_AND_HAND_OFF: &str = r#"
echo "$DROVER_STAGE work" >> work.log
git add work.log
git -c user.name=agent -c user.email=a@a commit -qm "$DROVER_STAGE"
"$DROVER" task comment "working on $DROVER_STAGE"
"$DROVER" task advance --note "did $DROVER_STAGE"
sleep 60
"#;

fn setup(d: &Drover, script: &Path) -> tempfile::TempDir {
    let r = repo();
    d.ok(&["repo", "add", "app", "--device", &d.device, "--path", r.path().to_str().unwrap()]);
    d.ok(&["agent", "create", "bot", "--harness", "custom", "--", script.to_str().unwrap(), "{prompt}"]);
    r
}

fn task(d: &Drover, id: &str) -> Value {
    d.json(&["task", "show", id])
}

/// Done, and every run has ended.
fn finished(t: &Value) -> bool {
    t["task"]["status"] == "done"
        && t["sessions"].as_array().unwrap().iter().all(|s| s["outcome"] != "running" && s["outcome"] != "starting")
}

fn wait_task(d: &Drover, id: &str, timeout: Duration, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + timeout;
    loop {
        let t = task(d, id);
        if pred(&t) {
            return t;
        }
        assert!(Instant::now() < deadline, "task never reached {what}: {}", serde_json::to_string_pretty(&t).unwrap());
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_task_flows_through_every_stage_in_its_worktree() {
    let d = Drover::up();
    let tmp = tempfile::tempdir().unwrap();
    let script = agent_script(tmp.path(), WORK_AND_HAND_OFF);
    let r = setup(&d, &script);
    let title = "Fix $(rm -rf /) the `login` ../../page; && echo pwned 🚀";
    let id = d.ok(&["task", "create", "--repo", "app", "--title", title, "--agent", "bot", "--type", "bug"]).trim().to_string();
    let t = wait_task(&d, &id, secs(90), "done", finished);

    // Five stages, five runs, each completed by its hand-off, in order.
    let runs = t["sessions"].as_array().unwrap();
    let stages: Vec<&str> = runs.iter().map(|s| s["stage"].as_str().unwrap()).collect();
    assert_eq!(stages, ["plan", "code", "review", "merge", "verify"]);
    for s in runs {
        assert_eq!(s["outcome"], "completed", "{s}");
        assert_eq!(s["reason"], "the stage was handed off");
        assert_eq!(s["agent"], "bot");
    }
    // The work carried from stage to stage on the task's own branch.
    let branch = t["task"]["branch"].as_str().unwrap().to_string();
    assert!(branch.starts_with("drover/") && branch.ends_with("-fix-rm-rf-the-login-page-echo-pwned"), "{branch}");
    let log = git(r.path(), &["log", "--format=%s", &branch]);
    assert_eq!(log.lines().collect::<Vec<_>>(), ["verify", "merge", "review", "code", "plan", "start"]);
    assert_eq!(git(r.path(), &["show", &format!("{branch}:work.log")]).lines().count(), 5);
    // Done: the worktree is cleaned up, the branch kept; nothing ran through a shell.
    let deadline = Instant::now() + secs(20);
    while git(r.path(), &["worktree", "list"]).lines().count() > 1 {
        assert!(Instant::now() < deadline, "worktree not removed: {}", git(r.path(), &["worktree", "list"]));
        std::thread::sleep(Duration::from_millis(100));
    }
    // The merge stage's hand-off merged the branch as it was then into main (the
    // clone's checked-out branch), working copy included; verify's commit came after.
    assert_eq!(git(r.path(), &["branch", "--show-current"]), "main");
    let main_log = git(r.path(), &["log", "--first-parent", "--format=%s", "main"]);
    assert_eq!(main_log.lines().next(), Some(format!("Merge {branch}: {title}").as_str()));
    assert_eq!(std::fs::read_to_string(r.path().join("work.log")).unwrap().lines().count(), 4, "plan..merge, not verify");
    assert_eq!(git(r.path(), &["status", "--porcelain"]), "");
    let kinds: Vec<&str> = t["events"].as_array().unwrap().iter().map(|e| e["kind"].as_str().unwrap()).collect();
    let merged: Vec<&Value> = t["events"].as_array().unwrap().iter().filter(|e| e["kind"] == "merged").collect();
    assert_eq!(merged.len(), 1);
    assert_eq!((merged[0]["detail"]["into"].as_str(), merged[0]["actor"].as_str()), (Some("main"), Some("agent bot")));
    assert_eq!(merged[0]["detail"]["commit"].as_str().unwrap(), git(r.path(), &["rev-parse", "main"]));
    assert_eq!(kinds.iter().filter(|k| **k == "stage_advanced").count(), 5);
    assert_eq!(kinds.iter().filter(|k| **k == "comment").count(), 5);
    // Each stage's commit in its worktree is evidence of progress, recorded by its run.
    let commits: Vec<&Value> = t["events"].as_array().unwrap().iter().filter(|e| e["kind"] == "commit").collect();
    assert_eq!(
        commits.iter().map(|e| e["detail"]["subject"].as_str().unwrap()).collect::<Vec<_>>(),
        ["plan", "code", "review", "merge", "verify"]
    );
    assert_eq!(commits[0]["actor"], "agent bot");
    assert_eq!(kinds.first(), Some(&"task_created"));
    assert!(kinds.contains(&"task_finished"));
    let advanced = t["events"].as_array().unwrap().iter().find(|e| e["kind"] == "stage_advanced").unwrap();
    assert_eq!(advanced["actor"], "agent bot");
    assert_eq!(advanced["detail"]["note"], "did plan");
    // The sandbox is done.
    let sandboxes = d.json(&["sandbox", "list", "--filter", "all"]);
    let sbx = sandboxes.as_array().unwrap().iter().find(|b| b["kind"] == "task").unwrap();
    assert_eq!(sbx["state"], "done");
    assert_eq!(sbx["runs"], 5);
}

/// The code stage changes `shared.txt` on its branch while someone changes the same
/// line on main; the merge stage's first hand-off is refused with the conflict, the
/// agent merges main into its branch (keeping its side), and hands off again.
const CONFLICT_THEN_RESOLVE: &str = r#"
if [ "$DROVER_STAGE" = code ]; then
  echo "task version" > shared.txt
  git add shared.txt
  git -c user.name=agent -c user.email=a@a commit -qm "task edit"
  echo "main version" > "$CLONE/shared.txt"
  git -C "$CLONE" -c user.name=someone -c user.email=s@s commit -qam "main edit"
fi
if [ "$DROVER_STAGE" = merge ]; then
  if "$DROVER" task advance --note "first try" 2>refused.txt; then echo "merged without a conflict"; sleep 60; fi
  echo "REFUSED: $(cat refused.txt)"
  rm refused.txt
  git -c user.name=agent -c user.email=a@a merge -q -X ours -m "take main, keep ours" "$BASE"
fi
"$DROVER" task advance --note "did $DROVER_STAGE"
sleep 60
"#;

#[test]
fn a_merge_that_conflicts_is_refused_and_the_agent_resolves_it() {
    let d = Drover::up();
    let tmp = tempfile::tempdir().unwrap();
    let r = repo();
    std::fs::write(r.path().join("shared.txt"), "original\n").unwrap();
    git(r.path(), &["add", "."]);
    git(r.path(), &["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "shared"]);
    let body = format!("CLONE='{}'\nBASE=release\n{CONFLICT_THEN_RESOLVE}", r.path().display());
    let script = agent_script(tmp.path(), &body);
    // Tasks start from and merge into `release`, which the clone has checked out.
    git(r.path(), &["checkout", "-q", "-b", "release"]);
    let main_before = git(r.path(), &["rev-parse", "main"]);
    let path = r.path().to_str().unwrap();
    d.ok(&["repo", "add", "app", "--device", &d.device, "--path", path, "--base", "release"]);
    let bad = d.fails(&["repo", "add", "app", "--device", &d.device, "--path", path, "--base", "bad..name"]);
    assert!(bad.contains("not a valid branch name"), "{bad}");
    d.ok(&["agent", "create", "bot", "--harness", "custom", "--", script.to_str().unwrap(), "{prompt}"]);
    // The workspace's workflow: code, then a merge stage.
    let shown = d.ok(&["workflow", "set", "--stages", "code,merge", "--assign", "code=bot", "--assign", "merge=bot"]);
    assert_eq!(shown.trim(), "code (bot) → merge (bot, merges)");
    assert_eq!(d.ok(&["workflow", "show"]).trim(), "code (bot) → merge (bot, merges)");
    let id = d.ok(&["task", "create", "--repo", "app", "--title", "Edit shared"]).trim().to_string();
    let t = wait_task(&d, &id, secs(60), "done", finished);
    let runs = t["sessions"].as_array().unwrap();
    assert_eq!(runs.iter().map(|s| s["outcome"].as_str().unwrap()).collect::<Vec<_>>(), ["completed", "completed"], "one run per stage");
    let events = t["events"].as_array().unwrap();
    let refused = events.iter().find(|e| e["kind"] == "merge_refused").expect("the refusal is on the record");
    let reason = refused["detail"]["reason"].as_str().unwrap();
    assert!(reason.contains("conflicts in shared.txt"), "{reason}");
    assert_eq!(refused["actor"], "agent bot");
    // The agent was told why, by `drover task advance` itself.
    let merge_run = runs[1]["id"].as_str().unwrap();
    assert!(d.ok(&["session", "tail", merge_run, "-n", "200"]).contains("REFUSED: error: the stage was not handed off"));
    assert_eq!(events.iter().filter(|e| e["kind"] == "merged").count(), 1);
    assert_eq!(std::fs::read_to_string(r.path().join("shared.txt")).unwrap(), "task version\n", "release has the resolved work");
    assert_eq!(git(r.path(), &["rev-parse", "main"]), main_before, "main untouched");
}

#[test]
fn finish_then_mark_done_closes_the_sandbox_and_a_launch_starts_a_fresh_one() {
    let d = Drover::up();
    let tmp = tempfile::tempdir().unwrap();
    // Works, commits, then waits like an interactive CLI, never handing off.
    let body = "echo work >> work.log\ngit add work.log\ngit -c user.name=agent -c user.email=a@a commit -qm work\necho waiting\nsleep 120";
    let script = agent_script(tmp.path(), body);
    let r = setup(&d, &script);
    let id =
        d.ok(&["task", "create", "--repo", "app", "--title", "Leftover", "--stages", "code", "--assign", "code=bot"]).trim().to_string();
    let t = wait_task(&d, &id, secs(30), "a live run that committed", |t| {
        t["task"]["live_session"].is_string() && t["events"].as_array().unwrap().iter().any(|e| e["kind"] == "commit")
    });
    let (first_sandbox, branch) = (t["task"]["sandbox"].clone(), t["task"]["branch"].as_str().unwrap().to_string());
    assert_eq!(t["task"]["sandbox_state"], "active");
    // Mark done comes after Finish session (seed 001), and each control says so.
    assert!(d.fails(&["task", "mark-done", &id]).contains("Finish session first"));
    d.ok(&["task", "finish", &id]);
    assert_eq!(task(&d, &id)["task"]["sandbox_state"], "completing");
    assert!(d.fails(&["task", "finish", &id]).contains("the sandbox is completing"));
    assert!(d.fails(&["task", "launch", &id]).contains("Mark done closes it"));
    d.ok(&["task", "mark-done", &id]);
    let t = wait_task(&d, &id, secs(30), "the run ended", |t| t["task"]["live_session"].is_null());
    let run = &t["sessions"][0];
    assert_eq!((run["outcome"].as_str(), run["reason"].as_str()), (Some("completed"), Some("the sandbox was retired with Mark done")));
    assert_eq!(t["task"]["sandbox_state"], "done");
    // The task's own stage is untouched, and nothing restaffs it by itself.
    assert_eq!((t["task"]["status"].as_str(), t["task"]["stage"].as_str()), (Some("open"), Some("code")));
    assert!(t["task"]["queued_at"].is_null());
    let deadline = Instant::now() + secs(20);
    while git(r.path(), &["worktree", "list"]).lines().count() > 1 {
        assert!(Instant::now() < deadline, "worktree not removed");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(d.fails(&["task", "mark-done", &id]).contains("already done"));
    // Launch: a fresh sandbox on the same branch, where the committed work is.
    d.ok(&["task", "launch", &id]);
    let t = wait_task(&d, &id, secs(30), "a second run that committed", |t| {
        t["events"].as_array().unwrap().iter().filter(|e| e["kind"] == "commit").count() == 2
    });
    assert_ne!(t["task"]["sandbox"], first_sandbox);
    assert_eq!(t["task"]["branch"].as_str(), Some(branch.as_str()));
    assert_eq!(git(r.path(), &["show", &format!("{branch}:work.log")]), "work\nwork");
    // Finish and Mark done are on the audit trail, with who did them and to what.
    let today = chrono::Utc::now().format("%Y-%m-%d").to_string();
    let export = d.ok(&["audit", "export", "--since", &today]);
    let lines: Vec<Value> = export.lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect();
    for kind in ["finish_requested", "marked_done"] {
        let e = lines.iter().find(|e| e["kind"] == kind).unwrap_or_else(|| panic!("no {kind} in {export}"));
        assert!(!e["actor"].as_str().unwrap().is_empty());
        assert_eq!(e["task"], id.as_str());
        assert!(e["detail"]["sandbox"].is_string());
    }
    assert!(lines.windows(2).all(|w| w[0]["seq"].as_i64() < w[1]["seq"].as_i64()), "oldest first");
    assert!(d.ok(&["audit", "export", "--since", "2999-01-01"]).is_empty());
    assert!(d.fails(&["audit", "export", "--since", "yesterday"]).contains("must be a time"));
    d.ok(&["task", "cancel", &id]);
    let t = wait_task(&d, &id, secs(30), "cancelled with its run ended", |t| t["task"]["live_session"].is_null());
    assert_eq!((t["task"]["status"].as_str(), t["task"]["sandbox_state"].as_str()), (Some("cancelled"), Some("done")));
}

#[test]
fn a_run_that_crashes_is_replaced_and_the_replacement_finishes() {
    let d = Drover::up();
    let tmp = tempfile::tempdir().unwrap();
    // The first run of the stage leaves a mark in the sandbox and crashes; the next one
    // finds the mark (the work carried) and hands off.
    let body = format!("if [ ! -f crashed-once ]; then touch crashed-once; echo crashing; exit 3; fi\n{WORK_AND_HAND_OFF}");
    let script = agent_script(tmp.path(), &body);
    let _repo = setup(&d, &script);
    let id = d
        .ok(&["task", "create", "--repo", "app", "--title", "Crash then work", "--stages", "code", "--assign", "code=bot"])
        .trim()
        .to_string();
    let t = wait_task(&d, &id, secs(60), "done", finished);
    let outcomes: Vec<&str> = t["sessions"].as_array().unwrap().iter().map(|s| s["outcome"].as_str().unwrap()).collect();
    assert_eq!(outcomes, ["failed", "completed"]);
    assert_eq!(t["sessions"][0]["exit_code"], 3);
}

#[test]
fn a_stage_that_keeps_failing_is_flagged_for_a_human_not_retried_forever() {
    let d = Drover::up();
    let tmp = tempfile::tempdir().unwrap();
    let script = agent_script(tmp.path(), "exit 0");
    let _repo = setup(&d, &script);
    let id = d
        .ok(&["task", "create", "--repo", "app", "--title", "Never hands off", "--stages", "code", "--assign", "code=bot"])
        .trim()
        .to_string();
    let t = wait_task(&d, &id, secs(60), "flagged", |t| t["task"]["flagged"].is_string());
    assert!(t["task"]["flagged"].as_str().unwrap().contains("3 times without a hand-off"), "{}", t["task"]["flagged"]);
    let outcomes: Vec<&str> = t["sessions"].as_array().unwrap().iter().map(|s| s["outcome"].as_str().unwrap()).collect();
    assert_eq!(outcomes, ["incomplete", "incomplete", "incomplete"], "{}", t["sessions"]);
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(task(&d, &id)["sessions"].as_array().unwrap().len(), 3, "no fourth run");
    // Launch session starts a fresh one.
    d.ok(&["task", "launch", &id]);
    wait_task(&d, &id, secs(30), "a fourth run", |t| t["sessions"].as_array().unwrap().len() >= 4);
}

#[test]
fn abandon_tears_the_sandbox_down_and_the_run_is_released() {
    let d = Drover::up();
    let tmp = tempfile::tempdir().unwrap();
    let script = agent_script(tmp.path(), "echo uncommitted > scratch.txt\nsleep 600");
    let r = setup(&d, &script);
    let id = d.ok(&["task", "create", "--repo", "app", "--title", "Abandon me", "--agent", "bot"]).trim().to_string();
    let t = wait_task(&d, &id, secs(30), "a live run", |t| t["task"]["live_session"].is_string());
    let session = t["task"]["live_session"].as_str().unwrap().to_string();
    d.wait_for(&session, secs(20), |s| s["outcome"] == "running");
    // The row's Abandon: the sandbox goes and its run is released; the task stays open,
    // waiting for a person, and is not staffed again by itself.
    d.ok(&["task", "abandon", &id]);
    let s = d.wait_ended(&session, secs(20));
    assert_eq!(s["outcome"], "released");
    let t = task(&d, &id);
    assert_eq!((t["task"]["status"].as_str(), t["task"]["sandbox_state"].as_str()), (Some("open"), Some("abandoned")));
    let deadline = Instant::now() + secs(20);
    while git(r.path(), &["worktree", "list"]).lines().count() > 1 {
        assert!(Instant::now() < deadline, "abandoned worktree (with uncommitted work) not torn down");
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs(1));
    let t = task(&d, &id);
    assert_eq!(t["sessions"].as_array().unwrap().len(), 1, "not restaffed by itself: {t}");
    assert_eq!(t["task"]["turn"]["needs_person"], true);
    // Launch starts it afresh in a new sandbox; the task-level Abandon ends the task.
    d.ok(&["task", "launch", &id]);
    let t =
        wait_task(&d, &id, secs(30), "a fresh run", |t| t["task"]["live_session"].is_string() && t["task"]["sandbox_state"] != "abandoned");
    let session = t["task"]["live_session"].as_str().unwrap().to_string();
    d.wait_for(&session, secs(20), |s| s["outcome"] == "running");
    assert!(d.ok(&["task", "abandon", &id, "--task"]).contains("the task is abandoned"));
    assert_eq!(d.wait_ended(&session, secs(20))["outcome"], "released");
    let t = task(&d, &id);
    assert_eq!(t["task"]["status"], "abandoned");
    let deadline = Instant::now() + secs(20);
    while git(r.path(), &["worktree", "list"]).lines().count() > 1 {
        assert!(Instant::now() < deadline, "abandoned worktree (with uncommitted work) not torn down");
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(task(&d, &id)["sessions"].as_array().unwrap().len(), 2, "an abandoned task is not restaffed");
}

#[test]
fn stages_wait_for_a_slot_and_start_when_one_frees_first_queued_first() {
    let d = Drover::up_with_slots(tempfile::tempdir().unwrap(), 1);
    let tmp = tempfile::tempdir().unwrap();
    let script = agent_script(tmp.path(), "sleep 600");
    let _repo = setup(&d, &script);
    let a = d.ok(&["task", "create", "--repo", "app", "--title", "first", "--agent", "bot"]).trim().to_string();
    let t = wait_task(&d, &a, secs(30), "a live run", |t| t["task"]["live_session"].is_string());
    let a_session = t["task"]["live_session"].as_str().unwrap().to_string();
    let b = d.ok(&["task", "create", "--repo", "app", "--title", "second", "--agent", "bot"]).trim().to_string();
    let c = d.ok(&["task", "create", "--repo", "app", "--title", "third", "--agent", "bot"]).trim().to_string();
    std::thread::sleep(Duration::from_secs(2));
    for id in [&b, &c] {
        let t = task(&d, id);
        assert!(t["task"]["queued_at"].is_string() && t["sessions"].as_array().unwrap().is_empty(), "{t}");
    }
    let list = d.ok(&["task", "list"]);
    assert_eq!(list.matches("queued for a slot").count(), 2, "{list}");
    // The Sessions page's header and rows say the same.
    let (status, body) = support::http(&d.url, "GET", "/api/v1/overview", Some(&d.token()), b"");
    assert_eq!(status, 200);
    let overview: Value = serde_json::from_str(&body).unwrap();
    assert_eq!((overview["queued"].as_u64(), overview["running"].as_u64()), (Some(2), Some(1)), "{overview}");
    let rows = d.json(&["sandbox", "list"]);
    let row = &rows.as_array().unwrap()[0];
    assert_eq!((row["kind"].as_str(), row["task_type"].as_str(), row["agent"].as_str()), (Some("task"), Some("story"), Some("bot")));
    assert_eq!(row["working_on"], "Plan - first");
    // The slot frees: the first queued starts, the other keeps waiting.
    d.ok(&["session", "stop", &a_session]);
    wait_task(&d, &b, secs(30), "b running", |t| t["task"]["live_session"].is_string());
    assert!(task(&d, &c)["task"]["queued_at"].is_string());
}

#[test]
fn agent_credentials_only_reach_their_own_task() {
    let d = Drover::up();
    let tmp = tempfile::tempdir().unwrap();
    // The agent prints its credential's reach: its own task works, others and member APIs do not.
    let body = r#"
echo "$DROVER_TOKEN" > "$TOKEN_FILE"
[ "$(command -v drover)" = "$DROVER" ] && echo ON-PATH
"$DROVER" task comment "mine" && echo OWN-OK
"$DROVER" task comment --task "$OTHER" "theirs" 2>&1 || echo OTHER-REFUSED
"$DROVER" session list 2>&1 || echo MEMBER-REFUSED
"$DROVER" session show "$DROVER_SESSION" 2>&1 || echo VIEW-REFUSED
env -u DROVER_TOKEN "$DROVER" task list 2>&1 || echo NO-FALLBACK
q=$("$DROVER" task ask "which colour?" --timeout 60)
echo "ANSWER: $q"
"$DROVER" task advance --note "asked and answered"
sleep 60
"#;
    let script = agent_script(tmp.path(), body);
    let _repo = setup(&d, &script);
    let other = d.ok(&["task", "create", "--repo", "app", "--title", "other", "--stages", "code"]).trim().to_string();
    let token_file = tmp.path().join("token");
    let text = std::fs::read_to_string(&script).unwrap().replace("$OTHER", &other).replace("$TOKEN_FILE", token_file.to_str().unwrap());
    std::fs::write(&script, text).unwrap();
    let id = d.ok(&["task", "create", "--repo", "app", "--title", "asker", "--stages", "code", "--assign", "code=bot"]).trim().to_string();
    let t = wait_task(&d, &id, secs(30), "a question", |t| t["notes"].as_array().is_some_and(|n| !n.is_empty()));
    let note = t["notes"][0]["id"].as_str().unwrap().to_string();
    assert_eq!(t["notes"][0]["kind"], "question");
    d.ok(&["task", "answer", &note, "blue"]);
    let t = wait_task(&d, &id, secs(30), "done", finished);
    let session = t["sessions"][0]["id"].as_str().unwrap().to_string();
    let text = d.ok(&["session", "tail", &session, "-n", "200"]);
    assert!(text.contains("OWN-OK"), "{text}");
    assert!(text.contains("ON-PATH"), "the device's drover is on the run's PATH, as the stage prompt promises: {text}");
    assert!(text.contains("OTHER-REFUSED") && text.contains("only act on the task of its own session"), "{text}");
    assert!(text.contains("MEMBER-REFUSED"), "{text}");
    assert!(text.contains("VIEW-REFUSED"), "an agent does not see sessions, not even its own: {text}");
    assert!(text.contains("NO-FALLBACK"), "inside a run the owner's client.json is never used: {text}");
    assert!(text.contains("ANSWER: blue"), "{text}");
    let kinds: Vec<&str> = t["events"].as_array().unwrap().iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert!(kinds.contains(&"question_asked") && kinds.contains(&"question_answered"), "{kinds:?}");
    assert!(task(&d, &other)["events"].as_array().unwrap().iter().all(|e| e["kind"] != "comment"));
    // The credential died with its run.
    let token = std::fs::read_to_string(&token_file).unwrap().trim().to_string();
    assert!(token.starts_with("drs_"));
    let out =
        d.cmd().env("DROVER_URL", &d.url).env("DROVER_TOKEN", &token).args(["task", "comment", "--task", &id, "late"]).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("its session has ended"), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn the_mcp_server_gives_an_agent_the_same_calls_as_tools() {
    use std::io::{BufRead, BufReader, Write};
    let d = Drover::up();
    let tmp = tempfile::tempdir().unwrap();
    let token_file = tmp.path().join("token");
    let script = agent_script(tmp.path(), &format!("echo \"$DROVER_TOKEN\" > '{}'\nsleep 600", token_file.display()));
    let _repo = setup(&d, &script);
    let id = d
        .ok(&["task", "create", "--repo", "app", "--title", "via mcp", "--stages", "code,review", "--assign", "code=bot"])
        .trim()
        .to_string();
    let deadline = Instant::now() + secs(30);
    while std::fs::read_to_string(&token_file).map(|t| t.trim().is_empty()).unwrap_or(true) {
        assert!(Instant::now() < deadline, "the run never started");
        std::thread::sleep(Duration::from_millis(50));
    }
    let token = std::fs::read_to_string(&token_file).unwrap().trim().to_string();
    let mut mcp = d
        .cmd()
        .args(["mcp"])
        .env("DROVER_URL", &d.url)
        .env("DROVER_TOKEN", &token)
        .env("DROVER_TASK", &id)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = mcp.stdin.take().unwrap();
    let mut output = BufReader::new(mcp.stdout.take().unwrap());
    let mut call = |msg: Value| -> Option<Value> {
        writeln!(input, "{msg}").unwrap();
        input.flush().unwrap();
        msg.get("id")?;
        let mut line = String::new();
        output.read_line(&mut line).unwrap();
        Some(serde_json::from_str(&line).unwrap())
    };
    let init = call(serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}}))
    .unwrap();
    assert_eq!(init["result"]["serverInfo"]["name"], "drover", "{init}");
    call(serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let list = call(serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})).unwrap();
    let names: Vec<&str> = list["result"]["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["advance", "comment", "block", "unblock", "ask"]);
    let r = call(serde_json::json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "comment", "arguments": {"text": "from a tool"}}})).unwrap();
    assert_eq!(r["result"]["isError"], false, "{r}");
    let r = call(serde_json::json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "comment", "arguments": {}}}))
        .unwrap();
    assert!(r.get("error").is_some() || r["result"]["isError"] == true, "a missing argument is refused: {r}");
    let r = call(serde_json::json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "advance", "arguments": {"note": "done via mcp"}}})).unwrap();
    assert_eq!(r["result"]["content"][0]["text"], "handed off; the task moves to its review stage", "{r}");
    drop(input);
    let _ = mcp.wait();
    let t = task(&d, &id);
    let kinds: Vec<&str> = t["events"].as_array().unwrap().iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert!(kinds.contains(&"comment") && kinds.contains(&"stage_advanced"), "{kinds:?}");
    assert_eq!(t["task"]["stage"], "review");
    let s = d.wait_ended(t["sessions"][0]["id"].as_str().unwrap(), secs(20));
    assert_eq!(s["outcome"], "completed");
}

#[test]
fn a_harness_that_takes_no_prompt_argument_gets_its_first_message_typed_in() {
    // A stand-in `goose` on PATH: it reads its first message from the terminal.
    let bin_dir = tempfile::tempdir().unwrap();
    let got = bin_dir.path().join("got.txt");
    let goose = bin_dir.path().join("goose");
    let script = format!(
        "#!/bin/sh\nread first\necho \"$first\" > '{}'\n'{}' task advance --note typed\nsleep 60\n",
        got.display(),
        bin().display()
    );
    std::fs::write(&goose, script).unwrap();
    Command::new("chmod").arg("+x").arg(&goose).status().unwrap();
    let path = format!("{}:{}", bin_dir.path().display(), std::env::var("PATH").unwrap_or_default());
    // Each test runs in its own process (nextest), so setting PATH here touches no other test.
    std::env::set_var("PATH", &path);
    let d = Drover::up();
    let r = repo();
    d.ok(&["repo", "add", "app", "--device", &d.device, "--path", r.path().to_str().unwrap()]);
    d.ok(&["agent", "create", "goose-1", "--harness", "goose"]);
    let id = d
        .ok(&["task", "create", "--repo", "app", "--title", "typed prompt", "--stages", "code", "--assign", "code=goose-1"])
        .trim()
        .to_string();
    let t = wait_task(&d, &id, secs(30), "done", finished);
    assert_eq!(std::fs::read_to_string(&got).unwrap().trim(), "You are working the `code` stage of this task.");
    let session = t["sessions"][0]["id"].as_str().unwrap().to_string();
    let events = d.json(&["session", "events", &session]);
    let sent: Vec<&Value> = events.as_array().unwrap().iter().filter(|e| e["kind"] == "input_sent").collect();
    assert_eq!(sent.len(), 1, "the first message went through the audited path: {events}");
    assert_eq!(sent[0]["actor"], "scheduler");
}

#[test]
fn a_slow_checkout_holds_up_no_other_session_and_a_cancel_during_it_stops_the_run() {
    // A `git` on PATH whose `worktree add` takes 3 s (then the real git does the work).
    let real_git =
        String::from_utf8(Command::new("sh").args(["-c", "command -v git"]).output().unwrap().stdout).unwrap().trim().to_string();
    let bin_dir = tempfile::tempdir().unwrap();
    let slow = bin_dir.path().join("git");
    std::fs::write(&slow, format!("#!/bin/sh\ncase \"$*\" in *\"worktree add\"*) sleep 3;; esac\nexec '{real_git}' \"$@\"\n")).unwrap();
    Command::new("chmod").arg("+x").arg(&slow).status().unwrap();
    // Each test runs in its own process (nextest), so setting PATH here touches no other test.
    std::env::set_var("PATH", format!("{}:{}", bin_dir.path().display(), std::env::var("PATH").unwrap_or_default()));
    let d = Drover::up();
    let tmp = tempfile::tempdir().unwrap();
    let script = agent_script(tmp.path(), "sleep 600");
    let _repo = setup(&d, &script);
    let other = d.start(&["cat"]);
    d.wait_for(&other, secs(20), |s| s["outcome"] == "running");
    let id = d.ok(&["task", "create", "--repo", "app", "--title", "slow checkout", "--agent", "bot"]).trim().to_string();
    let t = wait_task(&d, &id, secs(20), "a run being set up", |t| !t["sessions"].as_array().unwrap().is_empty());
    let run = t["sessions"][0]["id"].as_str().unwrap().to_string();
    // While the checkout runs, the other session still takes audited input.
    d.ok(&["session", "input", &other, "still answering"]);
    assert_eq!(d.show(&run)["outcome"], "starting", "the checkout should still be going on");
    d.wait_text(&other, "still answering", secs(10));
    // Cancelled mid-checkout: once the checkout is done the run is stopped, not left running.
    d.ok(&["task", "cancel", &id]);
    let s = d.wait_ended(&run, secs(30));
    assert_eq!(s["outcome"], "released", "{s}");
}

/// Posts its first message as a comment (so the test can read what it was told), asks
/// a question in the plan stage, then hands off.
const TELL_ASK_AND_HAND_OFF: &str = r#"
"$DROVER" task comment "told: $1"
if [ "$DROVER_STAGE" = plan ]; then "$DROVER" task ask "Which database?" > /dev/null; fi
"$DROVER" task advance --note "did $DROVER_STAGE"
sleep 60
"#;

/// The `NOW` column of the task list for `id`.
fn now_column(d: &Drover, id: &str) -> String {
    let list = d.ok(&["task", "list"]);
    let line = list.lines().find(|l| l.starts_with(id)).unwrap_or_else(|| panic!("{id} not listed: {list}"));
    let header = list.lines().next().unwrap();
    let (from, to) = (header.find("NOW").unwrap(), header.find("TITLE").unwrap());
    line.chars().skip(from).take(to - from).collect::<String>().trim().to_string()
}

/// What the run of `stage` was told first (its `told:` comment).
fn told(t: &Value, stage: &str) -> String {
    let runs: Vec<String> =
        t["sessions"].as_array().unwrap().iter().filter(|s| s["stage"] == stage).map(|s| s["id"].as_str().unwrap().to_string()).collect();
    let events = t["events"].as_array().unwrap();
    let comment = events.iter().find(|e| {
        e["kind"] == "comment"
            && runs.iter().any(|r| e["session"] == r.as_str())
            && e["detail"]["text"].as_str().is_some_and(|x| x.starts_with("told:"))
    });
    comment.map(|e| e["detail"]["text"].as_str().unwrap().to_string()).unwrap_or_default()
}

#[test]
fn a_stage_kept_for_people_holds_the_task_whatever_its_agent() {
    let d = Drover::up();
    let tmp = tempfile::tempdir().unwrap();
    let script = agent_script(tmp.path(), TELL_ASK_AND_HAND_OFF);
    let _r = setup(&d, &script);
    let shown = d.ok(&["workflow", "set", "--stages", "plan,code,review,merge", "--assign", "review=human"]);
    assert_eq!(shown.trim(), "plan (unassigned) → code (unassigned) → review (human) → merge (unassigned, merges)");
    // The README's own command: --agent fills the unassigned stages, never review.
    let id = d.ok(&["task", "create", "--repo", "app", "--title", "Needs a review", "--agent", "bot"]).trim().to_string();
    // The plan run asks; the list says what it waits on, and a person answers.
    let t = wait_task(&d, &id, secs(60), "a question", |t| t["notes"].as_array().unwrap().iter().any(|n| n["closed_at"].is_null()));
    assert_eq!(now_column(&d, &id), "waiting for an answer: Which database?");
    assert_eq!(t["task"]["turn"]["kind"], "answer");
    let note = t["notes"][0]["id"].as_str().unwrap().to_string();
    d.ok(&["task", "answer", &note, "PostgreSQL 16"]);
    let t = wait_task(&d, &id, secs(60), "review", |t| t["task"]["stage"] == "review");
    let stages: Vec<String> =
        t["task"]["workflow"].as_array().unwrap().iter().map(|s| s["assignee"].as_str().unwrap_or("-").to_string()).collect();
    assert_eq!(stages, ["bot", "bot", "human", "bot"]);
    // The code run was told what plan handed off and what the person answered.
    let code = wait_task(&d, &id, secs(30), "code's comment", |t| !told(t, "code").is_empty());
    let code = told(&code, "code");
    assert!(code.contains("`plan` stage, handed off by") && code.contains("did plan"), "{code}");
    assert!(code.contains("A person answered \"Which database?\": PostgreSQL 16"), "{code}");
    assert!(!told(&t, "plan").contains("earlier work"), "the first stage has nothing before it");
    // It holds at review, and everyone can see it is a person's turn.
    assert_eq!(now_column(&d, &id), "needs a person: review");
    assert_eq!(t["task"]["turn"]["needs_person"], true);
    let (_, overview) = support::http(&d.url, "GET", "/api/v1/overview", Some(&d.token()), b"");
    let overview: Value = serde_json::from_str(&overview).unwrap();
    assert_eq!(overview["tasks_needing_a_person"], 1, "{overview}");
    let shown = d.ok(&["task", "show", &id]);
    assert!(shown.contains("now:      needs a person: review"), "{shown}");
    assert!(shown.contains("Hand-off notes:") && shown.contains("    did code"), "{shown}");
    // No run is started for review, however long it waits.
    std::thread::sleep(Duration::from_secs(3));
    let t = task(&d, &id);
    assert_eq!(t["task"]["stage"], "review");
    let runs = t["sessions"].as_array().unwrap();
    assert!(runs.iter().all(|s| s["stage"] != "review"), "no agent run for the people's stage: {runs:?}");
    assert!(d.fails(&["task", "launch", &id]).contains("worked by a person"));
    // A person hands it on with a note the merge run is told.
    d.ok(&["task", "advance", "--task", &id, "--note", "looks good, ship it"]);
    let t = wait_task(&d, &id, secs(60), "done", finished);
    let stages: Vec<&str> = t["sessions"].as_array().unwrap().iter().map(|s| s["stage"].as_str().unwrap()).collect();
    assert_eq!(stages, ["plan", "code", "merge"]);
    assert!(told(&t, "merge").contains("`review` stage, handed off by") && told(&t, "merge").contains("looks good, ship it"));
    assert_eq!(now_column(&d, &id), "-");
    let (_, overview) = support::http(&d.url, "GET", "/api/v1/overview", Some(&d.token()), b"");
    assert!(overview.contains("\"tasks_needing_a_person\":0"), "{overview}");
    // No agent may take the name that marks people's stages.
    assert!(d.fails(&["agent", "create", "human", "--harness", "custom", "--", "true"]).contains("pick another agent name"));
}

#[test]
fn a_run_that_cannot_be_set_up_flags_its_task_at_once_with_the_cause() {
    let d = Drover::up();
    let r = repo();
    d.ok(&["repo", "add", "app", "--device", &d.device, "--path", r.path().to_str().unwrap()]);
    // No such command: one run, flagged with why, never retried.
    d.ok(&["agent", "create", "ghost", "--harness", "custom", "--", "/nonexistent/agent-cli", "{prompt}"]);
    let id =
        d.ok(&["task", "create", "--repo", "app", "--title", "Ghost", "--stages", "code", "--assign", "code=ghost"]).trim().to_string();
    let t = wait_task(&d, &id, secs(30), "flagged", |t| t["task"]["flagged"].is_string());
    let why = t["task"]["flagged"].as_str().unwrap();
    assert!(why.starts_with("the code stage could not start:") && why.contains("/nonexistent/agent-cli"), "{why}");
    std::thread::sleep(Duration::from_secs(2));
    let t = task(&d, &id);
    assert_eq!(t["sessions"].as_array().unwrap().len(), 1, "not retried: {t}");
    assert!(d.ok(&["task", "list"]).contains("needs a person: the code stage could not start"));
}

#[test]
fn repos_are_checked_on_the_device_and_a_wrong_base_can_be_put_right_before_the_first_run() {
    let d = Drover::up();
    let tmp = tempfile::tempdir().unwrap();
    let script = agent_script(tmp.path(), WORK_AND_HAND_OFF);
    let r = setup(&d, &script);
    let path = r.path().to_str().unwrap();
    // repo add asks the device: the path, that it is a clone, that the base exists.
    let missing = d.fails(&["repo", "add", "x", "--device", &d.device, "--path", "/nonexistent/clone"]);
    assert!(missing.contains("/nonexistent/clone does not exist on this device"), "{missing}");
    let plain = tempfile::tempdir().unwrap();
    let not_git = d.fails(&["repo", "add", "x", "--device", &d.device, "--path", plain.path().to_str().unwrap()]);
    assert!(not_git.contains("is not a git repository"), "{not_git}");
    let no_base = d.fails(&["repo", "add", "x", "--device", &d.device, "--path", path, "--base", "nope"]);
    assert!(no_base.contains("branch `nope` does not exist"), "{no_base}");
    assert!(!d.ok(&["repo", "list"]).contains("x "), "nothing half-registered");

    // A base that goes away after the repo was added: the task is flagged at once, with why.
    git(r.path(), &["branch", "release"]);
    d.ok(&["repo", "add", "rel", "--device", &d.device, "--path", path, "--base", "release"]);
    git(r.path(), &["branch", "-D", "release"]);
    let id =
        d.ok(&["task", "create", "--repo", "rel", "--title", "Wrong base", "--stages", "code", "--assign", "code=bot"]).trim().to_string();
    let t = wait_task(&d, &id, secs(30), "flagged", |t| t["task"]["flagged"].is_string());
    assert!(t["task"]["flagged"].as_str().unwrap().contains("branch `release` does not exist"), "{}", t["task"]["flagged"]);
    assert_eq!(t["sessions"].as_array().unwrap().len(), 1, "not retried");
    // It can be put right: checked on the device, then a fresh run starts from it.
    assert!(d.fails(&["task", "set", &id, "--base", "nope"]).contains("branch `nope` does not exist"));
    assert!(d.ok(&["task", "set", &id, "--base", "main"]).contains("task launch"));
    d.ok(&["task", "launch", &id]);
    let t = wait_task(&d, &id, secs(60), "done", finished);
    assert_eq!(t["sessions"].as_array().unwrap().last().unwrap()["outcome"], "completed");
    assert!(t["events"].as_array().unwrap().iter().any(|e| e["kind"] == "task_base_changed" && e["detail"]["to"] == "main"));
    // Once a run has started, its branch came from that base: no more changes.
    let refused = d.fails(&["task", "set", &id, "--base", "main"]);
    assert!(refused.contains("already done") || refused.contains("has started"), "{refused}");
}

#[test]
fn a_prepared_run_waits_for_activate_and_a_stage_can_ask_for_it_too() {
    let d = Drover::up();
    let tmp = tempfile::tempdir().unwrap();
    let script = agent_script(tmp.path(), WORK_AND_HAND_OFF);
    let r = setup(&d, &script);
    let id = d
        .ok(&[
            "task",
            "create",
            "--repo",
            "app",
            "--title",
            "Set up first",
            "--stages",
            "code,merge",
            "--agent",
            "bot",
            "--prepare-only",
            "--activate",
            "merge",
        ])
        .trim()
        .to_string();
    // Set up, not started: the worktree is there, no run, and it is a person's turn.
    let t = wait_task(&d, &id, secs(30), "prepared", |t| t["task"]["turn"]["kind"] == "ready" && t["task"]["sandbox"].is_string());
    assert_eq!(t["task"]["turn"]["label"], "ready to start: code (Activate starts it)");
    assert_eq!(t["task"]["sandbox_state"], "ready");
    let deadline = Instant::now() + secs(20);
    while git(r.path(), &["worktree", "list"]).lines().count() < 2 {
        assert!(Instant::now() < deadline, "the prepared sandbox has no worktree");
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs(2));
    assert!(task(&d, &id)["sessions"].as_array().unwrap().is_empty(), "nothing starts before Activate");
    assert!(d.ok(&["workflow", "show"]).contains("plan"), "the workspace's workflow is untouched");
    // Activate starts it; it hands off, and the merge stage waits for its own Activate.
    d.ok(&["task", "activate", &id]);
    let t = wait_task(&d, &id, secs(60), "merge waiting", |t| t["task"]["stage"] == "merge" && t["task"]["turn"]["kind"] == "ready");
    assert_eq!(t["sessions"].as_array().unwrap().len(), 1);
    d.ok(&["task", "activate", &id]);
    let t = wait_task(&d, &id, secs(60), "done", finished);
    let stages: Vec<&str> = t["sessions"].as_array().unwrap().iter().map(|s| s["stage"].as_str().unwrap()).collect();
    assert_eq!(stages, ["code", "merge"]);
    let kinds: Vec<&str> = t["events"].as_array().unwrap().iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds.iter().filter(|k| **k == "activated").count(), 2, "{kinds:?}");
    assert!(kinds.contains(&"sandbox_prepared"));
    // Nothing waits for Activate now.
    assert!(d.fails(&["task", "activate", &id]).contains("done"));
}

//! "Needs you" end to end: a stand-in for Claude Code (named `claude`, first on the
//! PATH) runs the hooks of the `--settings` Drover starts it with exactly as the hook
//! contract says (the event as JSON on stdin of a shell command; a `PermissionRequest`
//! hook's JSON on stdout decides), and prints what it was told. Held calls show in the
//! inbox and the task list, `drover approve` / `deny` / `approve --always` reach the
//! harness, a finished turn waits without counting as a stall, and input clears it.

mod support;

use std::time::{Duration, Instant};

use serde_json::Value;
use support::{secs, wait_until, Drover};

/// The stand-in: three held calls, then a finished turn, then it waits for input.
const STAND_IN: &str = r#"#!/usr/bin/env python3
import json, os, subprocess, sys, time
args = sys.argv[1:]
settings = json.loads(args[args.index("--settings") + 1])

def run_hook(name, event):
    outs = []
    for group in settings["hooks"].get(name, []):
        for h in group["hooks"]:
            ev = dict(event, hook_event_name=name, session_id="s-1", cwd=os.getcwd(), transcript_path="/dev/null")
            p = subprocess.run(h["command"], shell=True, input=json.dumps(ev), capture_output=True, text=True, timeout=h.get("timeout", 60))
            outs.append(p.stdout.strip())
    return outs[0] if outs else ""

print("stand-in claude, allowed:", json.dumps(settings["permissions"]["allow"]), flush=True)

def ask(n, command, suggest):
    ev = {"tool_name": "Bash", "tool_input": {"command": command}}
    if suggest:
        ev["permission_suggestions"] = [{"type": "addRules", "rules": [{"toolName": "Bash", "ruleContent": command}], "behavior": "allow", "destination": "localSettings"}]
    out = run_hook("PermissionRequest", ev)
    d = json.loads(out)["hookSpecificOutput"]["decision"] if out else {}
    rules = ",".join(r["toolName"] + "(" + r["ruleContent"] + ")@" + u["destination"] for u in d.get("updatedPermissions", []) for r in u["rules"])
    print("DECISION %d: %s msg=%s rules=%s" % (n, d.get("behavior", "none"), d.get("message", ""), rules), flush=True)

ask(1, "make deploy", False)
ask(2, "rm -rf build", False)
ask(3, "npm test", True)
run_hook("Stop", {"stop_hook_active": False})
print("TURN OVER", flush=True)
line = sys.stdin.readline()
run_hook("UserPromptSubmit", {"prompt": line.strip()})
print("GOT:", line.strip(), flush=True)
# At work on the new instruction, as an agent is: printing, so not a stall (3 s here)
# however long the steps after it take on a loaded machine.
for _ in range(1200):
    print("working", flush=True)
    time.sleep(0.5)
"#;

/// The open inbox items.
fn inbox(d: &Drover) -> Vec<Value> {
    d.json(&["inbox"])["items"].as_array().cloned().unwrap_or_default()
}

/// Waits for a held call whose subject is `command`; returns it.
fn held(d: &Drover, command: &str) -> Value {
    wait_until(&format!("{command} held in the inbox"), secs(30), || inbox(d).into_iter().find(|i| i["subject"] == command))
}

/// The NOW column of the task list for `task`.
fn now(d: &Drover, task: &str) -> String {
    let list = d.json(&["task", "list"]);
    let t = list.as_array().unwrap().iter().find(|t| t["id"] == task).cloned().unwrap();
    t["turn"]["label"].as_str().unwrap().to_string()
}

/// A `drover up` (stall window 3 s) whose `claude` is `stand_in`, and a task filed for
/// a Claude Code agent: (server, task, the dirs to keep).
fn claude_task(stand_in: &str) -> (Drover, String, [tempfile::TempDir; 2]) {
    let bin = tempfile::tempdir().unwrap();
    support::executable(&bin.path().join("claude"), stand_in);
    let path = format!("{}:{}", bin.path().display(), std::env::var("PATH").unwrap_or_default());
    // SAFETY: nextest runs each test in its own process, and nothing else runs yet.
    unsafe { std::env::set_var("PATH", &path) };
    let mut args = support::test_sandbox_args();
    args.extend(["--stall-secs", "3", "--monitor-secs", "1"].map(String::from));
    let d = Drover::up_with(tempfile::tempdir().unwrap(), 4, args);
    let repo = tempfile::tempdir().unwrap();
    let repo_path = support::git_repo(repo.path());
    d.ok(&["repo", "add", "app", "--device", &d.device, "--path", repo_path.to_str().unwrap()]);
    d.ok(&["agent", "create", "claude-1", "--harness", "claude"]);
    let t = d.json(&["task", "create", "--repo", "app", "--title", "ship it", "--agent", "claude-1"]);
    (d, t["id"].as_str().unwrap().to_string(), [bin, repo])
}

/// The task's first run, once it has one.
fn first_run(d: &Drover, task: &str) -> String {
    wait_until("the run", secs(30), || {
        let t = d.json(&["task", "show", task]);
        t["sessions"].as_array()?.first().map(|s| s["id"].as_str().unwrap().to_string())
    })
}

/// A stand-in that answers each line slowly, with quiet gaps longer than a prompt's
/// settle time, and then says its turn is over (the `Stop` hook).
const SLOW_STAND_IN: &str = r#"#!/usr/bin/env python3
import json, os, subprocess, sys, time
args = sys.argv[1:]
settings = json.loads(args[args.index("--settings") + 1])
def stop():
    h = settings["hooks"]["Stop"][0]["hooks"][0]
    ev = {"hook_event_name": "Stop", "session_id": "s-1", "cwd": os.getcwd(), "transcript_path": "/dev/null"}
    subprocess.run(h["command"], shell=True, input=json.dumps(ev), capture_output=True, text=True, timeout=60)
print("ready", flush=True)
for line in sys.stdin:
    print("thinking about", line.strip(), flush=True)
    time.sleep(2)
    print("answer for:", line.strip(), flush=True)
    stop()
"#;

#[test]
fn an_ask_settles_when_the_harness_says_its_turn_is_over() {
    let (d, task, _dirs) = claude_task(SLOW_STAND_IN);
    let run = first_run(&d, &task);
    d.wait_text(&run, "ready", secs(20));
    // Stillness alone would settle it only after 15 s; the harness says so after ~2 s.
    let t0 = Instant::now();
    let reply = d.json(&["session", "ask", &run, "what is up", "--still-ms", "15000", "--timeout", "30"]);
    let took = t0.elapsed();
    assert_eq!(reply["settled_by"], "harness", "{reply}");
    assert!(reply["reply"].as_str().unwrap().contains("answer for: what is up"), "{reply}");
    assert!(took < Duration::from_secs(12), "the ask took {took:?}");
}

#[test]
fn held_calls_are_decided_from_anywhere_and_reach_the_harness() {
    let (d, task, _dirs) = claude_task(STAND_IN);

    // 1. A held call: in the inbox with its tool and command, and in the task list.
    let first = held(&d, "make deploy");
    assert_eq!(first["kind"], "permission");
    assert_eq!(first["tool"], "Bash");
    assert_eq!(first["words"], "needs approval: Bash");
    assert_eq!(first["decisions"], serde_json::json!(["approve", "deny"]), "no rule was suggested: {first}");
    let run = first["session"].as_str().unwrap().to_string();
    assert_eq!(now(&d, &task), "needs approval: Bash");
    let rows = d.json(&["sandbox", "list"]);
    let row = rows.as_array().unwrap().iter().find(|b| b["last_run"]["id"] == run.as_str()).cloned().unwrap();
    assert_eq!(row["waiting"], "needs approval: Bash", "the Sessions list shows it too: {row}");
    let why = d.ok(&["task", "why", &task]);
    assert!(why.contains(&format!("holds a Bash call for approval. `drover approve {}`", first["id"].as_str().unwrap())), "{why}");
    let text = d.ok(&["inbox"]);
    assert!(text.contains("make deploy") && text.contains(&format!("drover approve {}", first["id"].as_str().unwrap())), "{text}");

    // 2. Approve reaches the harness at once.
    let t0 = Instant::now();
    d.ok(&["approve", first["id"].as_str().unwrap()]);
    d.wait_text(&run, "DECISION 1: allow", secs(10));
    let took = t0.elapsed();
    assert!(took < Duration::from_secs(3), "approve took {took:?} to reach the harness");

    // 3. Deny, with a message; a second decision is refused.
    let second = held(&d, "rm -rf build");
    d.ok(&["deny", second["id"].as_str().unwrap(), "--message", "keep the build"]);
    d.wait_text(&run, "DECISION 2: deny msg=keep the build", secs(10));
    let again = d.fails(&["approve", second["id"].as_str().unwrap()]);
    assert!(again.contains("already decided"), "{again}");

    // 4. Approve always: the harness's rule, for this session of the harness only, and
    //    kept on the task for its later runs.
    let third = held(&d, "npm test");
    assert_eq!(third["always_rules"], serde_json::json!(["Bash(npm test)"]));
    d.ok(&["approve", third["id"].as_str().unwrap(), "--always"]);
    d.wait_text(&run, "DECISION 3: allow msg= rules=Bash(npm test)@session", secs(10));
    let shown = d.json(&["task", "show", &task]);
    assert_eq!(shown["allow_rules"], serde_json::json!(["Bash(npm test)"]), "{shown}");

    // 5. A finished turn waits on a person, and is not a stall (3 s here).
    d.wait_text(&run, "TURN OVER", secs(10));
    let idle = wait_until("the finished turn in the inbox", secs(10), || inbox(&d).into_iter().find(|i| i["kind"] == "idle"));
    assert_eq!(idle["words"], "waiting for its next instruction");
    assert_eq!(idle["decisions"], serde_json::json!([]), "a finished turn is answered with input");
    assert_eq!(now(&d, &task), "waiting for its next instruction");
    std::thread::sleep(secs(5));
    assert_eq!(d.show(&run)["outcome"], "running", "a run waiting on a person was taken for stalled");

    // 6. Input moves it on: the inbox empties.
    d.ok(&["session", "input", &run, "carry on"]);
    d.wait_text(&run, "GOT: carry on", secs(10));
    wait_until("an empty inbox", secs(10), || inbox(&d).is_empty().then_some(()));

    // 7. Every decision is in the run's activity: who, what.
    let events = d.json(&["session", "events", &run]);
    let decided: Vec<(String, String)> = events
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "attention_decided")
        .map(|e| (e["detail"]["decision"].as_str().unwrap().to_string(), e["actor"].as_str().unwrap().to_string()))
        .collect();
    let owner = d.json(&["member", "list"])[0]["name"].as_str().unwrap().to_string();
    let want: Vec<(String, String)> = ["approve", "deny", "approve_always"].iter().map(|k| (k.to_string(), owner.clone())).collect();
    assert_eq!(decided, want, "{events}");

    // 8. Its next run starts with the kept rule.
    d.ok(&["session", "stop", &run]);
    wait_until("the run to end", secs(20), || (d.show(&run)["outcome"] != "running").then_some(()));
    d.ok(&["task", "launch", &task]);
    let next = wait_until("a replacement run", secs(30), || {
        let t = d.json(&["task", "show", &task]);
        t["sessions"].as_array()?.iter().map(|s| s["id"].as_str().unwrap().to_string()).find(|s| *s != run)
    });
    d.wait_text(&next, r#"allowed: ["Bash(npm test)"]"#, secs(20));
}

#[test]
fn task_why_says_what_holds_each_task_and_what_moves_it() {
    let d = Drover::up_with_slots(tempfile::tempdir().unwrap(), 1);
    let repo = tempfile::tempdir().unwrap();
    let repo_path = support::git_repo(repo.path());
    d.ok(&["repo", "add", "app", "--device", &d.device, "--path", repo_path.to_str().unwrap()]);
    let script = repo.path().join("agent.sh");
    support::executable(&script, "#!/bin/sh\necho working\nexec sleep 600\n");
    d.ok(&["agent", "create", "worker", "--harness", "custom", "--", script.to_str().unwrap(), "{prompt}"]);
    let file = |title: &str| {
        d.json(&["task", "create", "--repo", "app", "--title", title, "--agent", "worker"])["id"].as_str().unwrap().to_string()
    };
    let first = file("first");
    let run = first_run(&d, &first);
    d.wait_text(&run, "working", secs(20));
    let second = file("second");
    let why = wait_until("the second task queued", secs(10), || {
        let w = d.ok(&["task", "why", &second]);
        w.contains("busy").then_some(w)
    });
    assert_eq!(why.trim(), "Waiting for a slot: every device that has its repository is busy (testdev 1/1).");
    let third = file("third");
    let why = wait_until("the third task queued", secs(10), || {
        let w = d.ok(&["task", "why", &third]);
        w.contains("busy").then_some(w)
    });
    assert!(why.trim().ends_with("1 task is ahead of it."), "{why}");
    assert_eq!(
        d.ok(&["task", "why", &first]).trim(),
        format!("An agent is working: run {run} on testdev. Watch with `drover session attach {run}`.")
    );
    let shown = d.ok(&["task", "show", &second]);
    assert!(shown.contains("why:      Waiting for a slot"), "{shown}");
    let json = d.json(&["task", "why", &second]);
    assert!(json["why"].as_str().unwrap().starts_with("Waiting for a slot"), "{json}");
}

#[test]
fn a_still_prompt_of_a_harness_without_hooks_is_guessed_and_labelled_so() {
    let mut args = support::test_sandbox_args();
    args.extend(["--guess-after-secs", "1"].map(String::from));
    let d = Drover::up_with(tempfile::tempdir().unwrap(), 4, args);
    let repo = tempfile::tempdir().unwrap();
    let repo_path = support::git_repo(repo.path());
    d.ok(&["repo", "add", "app", "--device", &d.device, "--path", repo_path.to_str().unwrap()]);
    let script = repo.path().join("agent.sh");
    support::executable(
        &script,
        "#!/bin/sh\nprintf 'Deploy to production? [y/N] '\nread answer\necho \"answered $answer\"\necho working quietly\nexec sleep 600\n",
    );
    d.ok(&["agent", "create", "plain", "--harness", "custom", "--", script.to_str().unwrap(), "{prompt}"]);
    let task = d.json(&["task", "create", "--repo", "app", "--title", "deploy", "--agent", "plain"])["id"].as_str().unwrap().to_string();
    let run = first_run(&d, &task);
    let item = wait_until("the guess", secs(20), || inbox(&d).into_iter().find(|i| i["kind"] == "probably_waiting"));
    assert_eq!(item["guess"], true);
    assert_eq!(item["subject"], "Deploy to production? [y/N]");
    assert!(item["words"].as_str().unwrap().contains("a guess"), "{item}");
    assert_eq!(item["decisions"], serde_json::json!([]), "a guess is answered in the terminal or with input");
    assert!(now(&d, &task).starts_with("probably waiting"), "{}", now(&d, &task));
    // The answer makes it print: the guess is gone, and quiet work is not guessed again.
    d.ok(&["session", "input", &run, "n"]);
    d.wait_text(&run, "working quietly", secs(10));
    wait_until("the guess cleared", secs(10), || inbox(&d).is_empty().then_some(()));
    std::thread::sleep(secs(4));
    assert!(inbox(&d).is_empty(), "quiet work was guessed: {:?}", inbox(&d));
}

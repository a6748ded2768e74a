//! Skills end to end: a workspace enables a skill; a task run of a Claude Code agent (a
//! stand-in `claude` first on the PATH) finds it in its sandbox's `.claude/skills/`,
//! untracked by git; the run reports it reached; a custom agent's run reports
//! `unsupported` (its harness has no skills folder).

mod support;

use support::{secs, wait_until, Drover};

#[test]
fn an_enabled_skill_reaches_a_claude_run_and_is_reported() {
    let bin = tempfile::tempdir().unwrap();
    support::executable(
        &bin.path().join("claude"),
        "#!/bin/sh\necho skills-here:; ls .claude/skills; cat .claude/skills/drover-review/SKILL.md; echo; echo git-sees:; git status --porcelain; echo end-of-status; sleep 600\n",
    );
    let path = format!("{}:{}", bin.path().display(), std::env::var("PATH").unwrap_or_default());
    // SAFETY: nextest runs each test in its own process, and nothing else runs yet.
    unsafe { std::env::set_var("PATH", &path) };
    let d = Drover::up();
    let skill = tempfile::tempdir().unwrap();
    std::fs::write(skill.path().join("SKILL.md"), "---\nname: review\n---\nAlways check the diff twice.").unwrap();
    std::fs::create_dir(skill.path().join("refs")).unwrap();
    std::fs::write(skill.path().join("refs/style.md"), "tabs, not spaces").unwrap();
    d.ok(&["skill", "add", "review", skill.path().to_str().unwrap()]);
    assert_eq!(d.json(&["skill", "list"])[0]["files"], serde_json::json!(["SKILL.md", "refs/style.md"]));
    // A skill without SKILL.md is refused, and nothing is stored.
    let bare = tempfile::tempdir().unwrap();
    std::fs::write(bare.path().join("notes.md"), "x").unwrap();
    assert!(d.fails(&["skill", "add", "bare", bare.path().to_str().unwrap()]).contains("needs a SKILL.md"));

    let repo = tempfile::tempdir().unwrap();
    let repo_path = support::git_repo(repo.path());
    d.ok(&["repo", "add", "app", "--device", &d.device, "--path", repo_path.to_str().unwrap()]);
    d.ok(&["agent", "create", "reviewer", "--harness", "claude"]);
    let t = d.json(&["task", "create", "--repo", "app", "--title", "use the skill", "--agent", "reviewer"]);
    let id = t["id"].as_str().unwrap().to_string();
    let run = wait_until("the run", secs(30), || {
        let t = d.json(&["task", "show", &id]);
        t["sessions"].as_array()?.first().map(|s| s["id"].as_str().unwrap().to_string())
    });
    let text = d.wait_text(&run, "end-of-status", secs(30));
    assert!(text.contains("Always check the diff twice."), "{text}");
    let status = text.split("git-sees:").nth(1).unwrap().split("end-of-status").next().unwrap();
    assert!(!status.contains(".claude"), "git must not see the installed skill: {status}");
    let shown = d.show(&run);
    assert_eq!(shown["skills"][0]["name"], "review", "{shown}");
    assert_eq!(shown["skills"][0]["outcome"], "installed");
    assert_eq!(shown["skills"][0]["detail"], ".claude/skills/drover-review");
    let text = d.ok(&["session", "show", &run]);
    assert!(text.lines().any(|l| l == "Skills      review: reached this session (.claude/skills/drover-review)"), "{text}");
    assert!(text.lines().any(|l| l == "Cost        - (no model use reported)"), "{text}");
    d.ok(&["session", "stop", &run]);

    // A custom agent's harness has no skills folder: the skill cannot reach it, and says so.
    let script = repo.path().join("agent.sh");
    support::executable(&script, "#!/bin/sh\necho custom-run\nsleep 600\n");
    d.ok(&["agent", "create", "plain", "--harness", "custom", "--", script.to_str().unwrap(), "{prompt}"]);
    let t = d.json(&["task", "create", "--repo", "app", "--title", "no skills here", "--agent", "plain"]);
    let id = t["id"].as_str().unwrap().to_string();
    let shown = wait_until("the custom run's skills report", secs(30), || {
        let t = d.json(&["task", "show", &id]);
        let s = t["sessions"].as_array()?.first()?.clone();
        (!s["skills"].is_null()).then_some(s)
    });
    assert_eq!(shown["skills"][0]["outcome"], "unsupported", "{shown}");
    let text = d.ok(&["session", "show", shown["id"].as_str().unwrap()]);
    assert!(text.contains("did not reach it: its harness has no skills folder"), "{text}");
    d.ok(&["session", "stop", shown["id"].as_str().unwrap()]);
}

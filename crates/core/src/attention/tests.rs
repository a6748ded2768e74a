use serde_json::json;

use super::*;

fn held(event: Value) -> HeldCall {
    match read_claude_hook(&event).unwrap() {
        HookSignal::Held(h) => h,
        other => panic!("not held: {other:?}"),
    }
}

#[test]
fn kinds_round_trip() {
    for k in AttentionKind::ALL {
        assert_eq!(AttentionKind::parse(k.as_str()), Some(k));
    }
    assert_eq!(AttentionKind::parse("question"), None);
}

#[test]
fn a_permission_request_shows_its_tool_command_and_rule() {
    let h = held(json!({
        "hook_event_name": "PermissionRequest",
        "tool_name": "Bash",
        "tool_input": { "command": "npm test", "description": "run the tests" },
        "permission_suggestions": [
            { "type": "addRules", "rules": [{ "toolName": "Bash", "ruleContent": "npm test" }], "behavior": "allow", "destination": "localSettings" },
            { "type": "setMode", "mode": "acceptEdits", "destination": "session" }
        ]
    }));
    assert_eq!(h.tool.as_deref(), Some("Bash"));
    assert_eq!(h.subject, "npm test");
    assert_eq!(h.diff, None);
    assert_eq!(h.always, vec!["Bash(npm test)".to_string()]);
    assert!(!h.clipped);
}

#[test]
fn an_edit_shows_its_file_and_diff() {
    let h = held(json!({
        "hook_event_name": "PermissionRequest",
        "tool_name": "Edit",
        "tool_input": { "file_path": "src/main.rs", "old_string": "a\nb", "new_string": "c" }
    }));
    assert_eq!(h.subject, "src/main.rs");
    assert_eq!(h.diff.as_deref(), Some("- a\n- b\n+ c\n"));
    let w =
        held(json!({ "hook_event_name": "PermissionRequest", "tool_name": "Write", "tool_input": { "file_path": "x", "content": "new" } }));
    assert_eq!(w.diff.as_deref(), Some("+ new\n"));
}

#[test]
fn a_tool_that_is_not_a_name_shows_as_none_and_its_input_as_json() {
    let h = held(json!({ "hook_event_name": "PermissionRequest", "tool_name": "Bash\u{202e}evil <b>", "tool_input": { "x": 1 } }));
    assert_eq!(h.tool, None);
    assert_eq!(h.subject, r#"{"x":1}"#);
    assert_eq!(waiting_words(AttentionKind::Permission, h.tool.as_deref()), "needs approval: a tool");
    assert!(is_tool_name("mcp__drover__ask"));
}

#[test]
fn a_long_command_is_clipped_at_a_character_and_marked() {
    let long = "é".repeat(MAX_SUBJECT);
    let h = held(json!({ "hook_event_name": "PermissionRequest", "tool_name": "Bash", "tool_input": { "command": long } }));
    assert!(h.clipped);
    assert!(h.subject.len() <= MAX_SUBJECT && h.subject.chars().all(|c| c == 'é'));
}

#[test]
fn only_content_allow_rules_are_kept() {
    let s = json!([
        { "type": "addRules", "behavior": "allow", "rules": [
            { "toolName": "Bash", "ruleContent": "npm test" },
            { "toolName": "Bash", "ruleContent": "npm test" },
            { "toolName": "Bash" },
            { "toolName": "Bash", "ruleContent": "x) Bash(rm -rf /" },
            { "toolName": "Bash", "ruleContent": "a\nb" },
            { "toolName": "Bad name", "ruleContent": "ls" }
        ]},
        { "type": "addRules", "behavior": "deny", "rules": [{ "toolName": "Bash", "ruleContent": "ls" }] },
        { "type": "addDirectories", "directories": ["/"] },
        { "type": "setMode", "mode": "bypassPermissions" }
    ]);
    assert_eq!(allow_rules(&s), vec!["Bash(npm test)".to_string()]);
    let many: Vec<Value> = (0..100).map(|i| json!({ "toolName": "Bash", "ruleContent": format!("{i}{}", "x".repeat(400)) })).collect();
    assert!(allow_rules(&json!([{ "type": "addRules", "behavior": "allow", "rules": many }])).is_empty());
}

#[test]
fn notifications_stop_and_prompts_are_read() {
    let n =
        |t: &str, m: &str| read_claude_hook(&json!({ "hook_event_name": "Notification", "notification_type": t, "message": m })).unwrap();
    assert_eq!(
        n("permission_prompt", "Claude needs your permission to use Bash"),
        HookSignal::Prompt("Claude needs your permission to use Bash".into())
    );
    assert_eq!(n("idle_prompt", "Claude is waiting for your input"), HookSignal::Idle);
    assert_eq!(n("", "Claude is waiting for your input"), HookSignal::Idle);
    assert_eq!(n("auth_success", "signed in"), HookSignal::Ignored);
    assert_eq!(read_claude_hook(&json!({ "hook_event_name": "Stop" })).unwrap(), HookSignal::Idle);
    assert_eq!(read_claude_hook(&json!({ "hook_event_name": "UserPromptSubmit", "prompt": "go" })).unwrap(), HookSignal::MovedOn);
    assert_eq!(read_claude_hook(&json!({ "hook_event_name": "PreCompact" })).unwrap(), HookSignal::Ignored);
    assert_eq!(read_claude_hook(&json!({ "tool_name": "Bash" })), Err(AttentionError::NotAnEvent));
    assert_eq!(read_claude_hook(&json!("Stop")), Err(AttentionError::NotAnEvent));
}

fn waiting(kind: AttentionKind) -> Waiting<'static> {
    Waiting { kind, held: true, closed: None, clipped: false, has_rules: true }
}

#[test]
fn decisions_are_allowed_only_on_an_open_held_call() {
    let held = waiting(AttentionKind::Permission);
    for d in [Decision::Approve, Decision::ApproveAlways, Decision::Deny(String::new())] {
        assert_eq!(check_decision(&held, &d), Ok(()));
    }
    let decided = Waiting { closed: Some("decided"), ..held };
    assert_eq!(check_decision(&decided, &Decision::Approve), Err(AttentionError::Closed("decided".into())));
    let prompt = Waiting { held: false, ..held };
    assert!(matches!(check_decision(&prompt, &Decision::Approve), Err(AttentionError::NotHeld(_))));
    assert!(matches!(check_decision(&waiting(AttentionKind::Idle), &Decision::Deny(String::new())), Err(AttentionError::NotHeld(_))));
    assert!(matches!(check_decision(&waiting(AttentionKind::ProbablyWaiting), &Decision::Approve), Err(AttentionError::NotHeld(_))));
    let clipped = Waiting { clipped: true, ..held };
    assert_eq!(check_decision(&clipped, &Decision::Approve), Err(AttentionError::Clipped));
    assert_eq!(check_decision(&clipped, &Decision::Deny("no".into())), Ok(()));
    let no_rule = Waiting { has_rules: false, ..held };
    assert_eq!(check_decision(&no_rule, &Decision::ApproveAlways), Err(AttentionError::NoRule));
    assert_eq!(check_decision(&no_rule, &Decision::Approve), Ok(()));
}

#[test]
fn decisions_parse() {
    assert_eq!(Decision::parse("approve", None), Some(Decision::Approve));
    assert_eq!(Decision::parse("deny", Some(" use yarn ")), Some(Decision::Deny("use yarn".into())));
    assert_eq!(Decision::parse("approve_always", None).unwrap().as_str(), "approve_always");
    assert_eq!(Decision::parse("allow", None), None);
}

#[test]
fn the_hook_prints_the_contract_s_decision() {
    let out = claude_hook_output(&Decision::Approve, &[]);
    assert_eq!(out, json!({ "hookSpecificOutput": { "hookEventName": "PermissionRequest", "decision": { "behavior": "allow" } } }));
    let deny = claude_hook_output(&Decision::Deny("use yarn".into()), &[]);
    assert_eq!(deny["hookSpecificOutput"]["decision"], json!({ "behavior": "deny", "message": "use yarn" }));
    let blank = claude_hook_output(&Decision::Deny(String::new()), &[]);
    assert!(blank["hookSpecificOutput"]["decision"]["message"].as_str().unwrap().contains("denied"));
    let always = claude_hook_output(&Decision::ApproveAlways, &["Bash(npm test)".into()]);
    let update = &always["hookSpecificOutput"]["decision"]["updatedPermissions"][0];
    assert_eq!(update["destination"], "session", "never written into the worktree's settings");
    assert_eq!(update["rules"], json!([{ "toolName": "Bash", "ruleContent": "npm test" }]));
}

#[test]
fn the_settings_hold_the_hooks_and_only_well_formed_rules() {
    let s = claude_settings(&["Bash(npm test)".into(), "Bash".into(), "Bash(a) Write(b)".into()]);
    assert_eq!(s["permissions"]["allow"], json!(["Bash(npm test)"]));
    for event in ["PermissionRequest", "Notification", "Stop", "UserPromptSubmit"] {
        assert_eq!(s["hooks"][event][0]["hooks"][0]["command"], CLAUDE_HOOK_COMMAND, "{event}");
    }
    assert_eq!(s["hooks"]["PermissionRequest"][0]["hooks"][0]["timeout"], HELD_CALL_TIMEOUT_SECS);
}

#[test]
fn prompt_lines_are_told_from_work() {
    for line in [
        "Deploy to production? [y/N] ",
        "Overwrite (y/n)",
        "Password:",
        "Enter passphrase for key:",
        "$ ",
        "user@host:~/app$",
        ">>> ",
        "❯",
        "Continue?",
    ] {
        assert!(looks_like_prompt(line), "{line:?}");
    }
    for line in ["", "Compiling drover v0.1.0", "test result: ok. 12 passed", "100%|█████| 5/5", "price: $5"] {
        assert!(!looks_like_prompt(line), "{line:?}");
    }
}

#[test]
fn only_claude_reports_its_waiting() {
    use crate::harness::Harness;
    assert!(reports_waiting(Harness::Claude));
    assert!(!reports_waiting(Harness::Custom) && !reports_waiting(Harness::Aider));
}

#[test]
fn a_codex_turn_complete_is_a_finished_turn() {
    assert_eq!(read_codex_notify(&json!({ "type": "agent-turn-complete", "turn-id": "1" })).unwrap(), HookSignal::Idle);
    assert_eq!(read_codex_notify(&json!({ "type": "something-else" })).unwrap(), HookSignal::Ignored);
    assert_eq!(read_codex_notify(&json!([1])), Err(AttentionError::NotAnEvent));
    let argv = crate::harness::with_settings(crate::harness::Harness::Codex, vec!["codex".into(), "resume".into(), "--last".into()], &[]);
    assert_eq!(argv, vec!["codex", "-c", CODEX_NOTIFY, "resume", "--last"]);
    let argv = crate::harness::with_settings(crate::harness::Harness::Claude, vec!["claude".into(), "--".into(), "hi".into()], &[]);
    assert_eq!(argv[1], "--settings");
    assert_eq!(argv[3..], ["--", "hi"]);
    let plain = crate::harness::with_settings(crate::harness::Harness::Aider, vec!["aider".into()], &[]);
    assert_eq!(plain, vec!["aider"]);
}

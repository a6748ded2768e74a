//! Spend read from the harness's own records, end to end: a stand-in harness writes a
//! Claude Code transcript (in Claude's folder layout, under CLAUDE_CONFIG_DIR) while it
//! runs; the device reads it as it grows and the session's spend, priced from the
//! shipped table, follows — totals computed by hand here.

mod support;

use serde_json::Value;
use support::{secs, Drover};

/// A transcript line for response `n` on `model`, stamped when the script writes it.
fn line(n: u32, model: &str, output: u32) -> String {
    format!(
        r#"{{"type":"assistant","requestId":"req_{n}","timestamp":"'"$(date -u +%Y-%m-%dT%H:%M:%S.%3NZ)"'","isSidechain":false,"message":{{"id":"msg_{n}","model":"{model}","usage":{{"input_tokens":100,"output_tokens":{output},"cache_creation_input_tokens":1000,"cache_read_input_tokens":9000}}}}}}"#
    )
}

#[test]
fn a_runs_spend_follows_its_transcript_as_it_grows() {
    let claude = tempfile::tempdir().unwrap();
    // SAFETY: nextest runs each test in its own process, and nothing else runs yet.
    unsafe { std::env::set_var("CLAUDE_CONFIG_DIR", claude.path()) };
    let d = Drover::up();
    let work = tempfile::tempdir().unwrap();
    let cwd = work.path().to_str().unwrap().to_string();
    let script = writer(claude.path(), &cwd);
    let id = d.ok(&["session", "start", "--device", &d.device, "--cwd", &cwd, "--", "bash", "-c", &script]).trim().to_string();
    // While the last line is half written, two responses count.
    let shown = d.wait_for(&id, secs(20), |s| s["spend"]["turns"] == 2);
    // Sonnet, each response: 100 × $3/M + 1000 × $3.75/M + 9000 × $0.30/M reads, plus output × $15/M:
    // msg_1: 300,000 + 3,750,000 + 200 × 15,000 = 7,050,000 generation; 2,700,000 reads.
    // msg_2: 300,000 + 3,750,000 + 300 × 15,000 = 8,550,000 generation; 2,700,000 reads.
    assert_eq!(usd(&shown, "generation_usd"), 0.0156, "{shown}");
    assert_eq!(usd(&shown, "cache_read_usd"), 0.0054);
    d.wait_text(&id, "written", secs(20));
    let shown = d.wait_for(&id, secs(20), |s| s["spend"]["turns"] == 3);
    // msg_3 on Opus: 100 × 5,000 + 1000 × 6,250 + 40 × 25,000 = 7,750,000; 9000 × 500 = 4,500,000.
    assert_eq!(usd(&shown, "generation_usd"), 0.02335);
    assert_eq!(usd(&shown, "cache_read_usd"), 0.0099);
    assert_eq!(usd(&shown, "total_usd"), 0.03325);
    assert_eq!(shown["spend"]["model"], "claude-opus-4-5-20251101");
    // Cache-hit: 27,000 reads of 30,300 prompt tokens.
    let hit = shown["spend"]["cache_hit_pct"].as_f64().unwrap();
    assert!((hit - 27_000.0 * 100.0 / 30_300.0).abs() < 1e-9, "{hit}");
    // `show` for people says the same, as the web does.
    let text = d.ok(&["session", "show", &id]);
    let cost = text.lines().find(|l| l.starts_with("Cost")).unwrap_or_else(|| panic!("no Cost row: {text}"));
    assert_eq!(cost, "Cost        $0.0333 (generation $0.0234 + cache reads $0.0099) · 3 turns · 89% cache hit · claude-opus-4-5-20251101");
    // The switch is on the record.
    let log = d.ok(&["audit", "export", "--since", "2000-01-01"]);
    let change: Value = log
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|e| e["kind"] == "route_changed")
        .expect("a route change event");
    assert_eq!(
        (change["detail"]["from"].as_str(), change["detail"]["to"].as_str()),
        (Some("claude-sonnet-4-5-20250929"), Some("claude-opus-4-5-20251101"))
    );
    // The sandbox list shows the run's cost.
    let list = d.json(&["sandbox", "list"]);
    let row = list.as_array().unwrap().iter().find(|b| b["last_run"]["id"] == id.as_str()).expect("its sandbox").clone();
    assert!((row["cost_usd"].as_f64().unwrap() - 0.03325).abs() < 1e-12, "{row}");
    d.ok(&["session", "stop", &id]);
}

/// A stand-in harness: writes a Claude Code transcript for `cwd` under `claude` as it
/// runs: an early copy of response 1 (fewer output tokens), its final copy, response 2,
/// then a `/model` switch to Opus whose line is written in two halves.
fn writer(claude: &std::path::Path, cwd: &str) -> String {
    let project: String = cwd.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '-' }).collect();
    let dir = claude.join("projects").join(project);
    let file = dir.join("conversation.jsonl");
    let last = line(3, "claude-opus-4-5-20251101", 40);
    let (first, second) = last.split_at(30);
    format!(
        "mkdir -p '{dir}' && echo '{l1a}' >> '{f}' && echo '{l1b}' >> '{f}' && sleep 1 && echo '{l2}' >> '{f}' && printf '%s' '{first}' >> '{f}' && sleep 3 && echo '{second}' >> '{f}' && echo written && sleep 600",
        dir = dir.display(),
        f = file.display(),
        l1a = line(1, "claude-sonnet-4-5-20250929", 1),
        l1b = line(1, "claude-sonnet-4-5-20250929", 200),
        l2 = line(2, "claude-sonnet-4-5-20250929", 300),
    )
}

#[test]
fn reaching_the_workspace_cap_stops_the_spending_run_as_released() {
    let claude = tempfile::tempdir().unwrap();
    // SAFETY: nextest runs each test in its own process, and nothing else runs yet.
    unsafe { std::env::set_var("CLAUDE_CONFIG_DIR", claude.path()) };
    let d = Drover::up();
    d.ok(&["spend", "--cap", "0.02"]);
    let work = tempfile::tempdir().unwrap();
    let cwd = work.path().to_str().unwrap().to_string();
    let script = writer(claude.path(), &cwd);
    let id = d.ok(&["session", "start", "--device", &d.device, "--cwd", &cwd, "--", "bash", "-c", &script]).trim().to_string();
    // Two responses cost $0.021: over the $0.02 cap, so the run is stopped.
    let ended = d.wait_ended(&id, secs(30));
    assert_eq!(ended["outcome"], "released", "{ended}");
    assert!(
        ended["reason"].as_str().unwrap().starts_with("spend cap: the workspace has spent $0.0210 this month of its $0.0200 cap"),
        "{ended}"
    );
    let log = d.ok(&["audit", "export", "--since", "2000-01-01"]);
    let capped: Value =
        log.lines().map(|l| serde_json::from_str::<Value>(l).unwrap()).find(|e| e["kind"] == "spend_cap_reached").expect("recorded");
    assert_eq!((capped["detail"]["scope"].as_str(), capped["detail"]["cap_usd"].as_f64()), (Some("workspace"), Some(0.02)));
    // The spend view has it by agent, model and day.
    let spend = d.json(&["spend"]);
    assert_eq!(spend["cap_usd"], 0.02);
    assert!((spend["month_usd"].as_f64().unwrap() - 0.021).abs() < 1e-12, "{spend}");
    assert_eq!(spend["by_model"][0]["key"], "claude-sonnet-4-5-20250929");
    assert_eq!(spend["by_model"][0]["turns"], 2);
    assert_eq!(spend["by_day"].as_array().unwrap().len(), 1);
    assert_eq!(spend["by_agent"][0]["key"], "(no agent)");
}

fn usd(s: &Value, field: &str) -> f64 {
    let v = s["spend"][field].as_f64().unwrap_or_else(|| panic!("no spend.{field} in {s}"));
    (v * 1e9).round() / 1e9
}

#[test]
fn a_tasks_cap_stops_its_run_and_its_lifetime_spend_is_shown() {
    let claude = tempfile::tempdir().unwrap();
    // SAFETY: nextest runs each test in its own process, and nothing else runs yet.
    unsafe { std::env::set_var("CLAUDE_CONFIG_DIR", claude.path()) };
    let d = Drover::up();
    let repo = tempfile::tempdir().unwrap();
    let path = support::git_repo(repo.path());
    d.ok(&["repo", "add", "app", "--device", &d.device, "--path", path.to_str().unwrap()]);
    // The stand-in agent writes a transcript for its own worktree, wherever that is.
    let agent = repo.path().join("spender.sh");
    let l = |n: u32, out: u32| line(n, "claude-sonnet-4-5-20250929", out);
    let body = format!(
        "#!/bin/bash\ndir=\"$CLAUDE_CONFIG_DIR/projects/$(pwd | tr -c 'A-Za-z0-9\\n' '-' | tr -d '\\n')\"\nmkdir -p \"$dir\"\necho '{}' >> \"$dir/t.jsonl\"\nsleep 1\necho '{}' >> \"$dir/t.jsonl\"\nsleep 600\n",
        l(1, 200),
        l(2, 300)
    );
    support::executable(&agent, &body);
    d.ok(&["agent", "create", "spender", "--harness", "custom", "--", agent.to_str().unwrap(), "{prompt}"]);
    let t = d.json(&["task", "create", "--repo", "app", "--title", "spend it", "--agent", "spender", "--spend-cap", "0.015"]);
    let id = t["id"].as_str().unwrap().to_string();
    // Response 1 costs $0.00975, response 2 brings the task to $0.021: over its $0.015 cap.
    let shown = support::wait_until("the task's run stopped at its cap", secs(40), || {
        let t = d.json(&["task", "show", &id]);
        let run = t["sessions"].as_array()?.first()?.clone();
        (run["outcome"] == "released").then_some(t)
    });
    let run = &shown["sessions"][0];
    assert!(run["reason"].as_str().unwrap().starts_with("spend cap: the task has cost $0.0210 of its $0.0150 cap"), "{run}");
    assert!((shown["task"]["cost_usd"].as_f64().unwrap() - 0.021).abs() < 1e-12, "{shown}");
    assert_eq!(shown["task"]["spend_cap_usd"], 0.015);
    // The run's execution route was recorded when it started.
    let log = d.ok(&["audit", "export", "--since", "2000-01-01"]);
    let started: Value = log.lines().map(|l| serde_json::from_str::<Value>(l).unwrap()).find(|e| e["kind"] == "session_started").unwrap();
    assert_eq!(started["detail"]["route"]["harness"], "custom", "{started}");
    // No new run until the cap is raised.
    assert!(d.fails(&["task", "launch", &id]).contains("spend cap: the task has cost $0.0210 of its $0.0150 cap"));
}

#[test]
fn a_workspace_price_makes_an_unknown_cost_known_and_reprices_running_sessions() {
    let claude = tempfile::tempdir().unwrap();
    // SAFETY: nextest runs each test in its own process, and nothing else runs yet.
    unsafe { std::env::set_var("CLAUDE_CONFIG_DIR", claude.path()) };
    let d = Drover::up();
    let work = tempfile::tempdir().unwrap();
    let cwd = work.path().to_str().unwrap().to_string();
    let project: String = cwd.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '-' }).collect();
    let dir = claude.path().join("projects").join(project);
    let script = format!("mkdir -p '{0}' && echo '{1}' >> '{0}/t.jsonl' && sleep 600", dir.display(), line(1, "in-house-model", 1000));
    let id = d.ok(&["session", "start", "--device", &d.device, "--cwd", &cwd, "--", "bash", "-c", &script]).trim().to_string();
    let shown = d.wait_for(&id, secs(20), |s| s["spend"]["turns"] == 1);
    assert!(shown["spend"]["total_usd"].is_null(), "no price: unknown, never guessed: {shown}");
    // $1/M input, $2/M output, $0.5/M cache writes, $0.1/M reads:
    // 100 × 1000 + 1000 × 2000 + 1000 × 500 = 2,600,000 generation; 9000 × 100 = 900,000 reads.
    d.ok(&["prices", "set", "in-house-model", "1", "2", "--cache-write", "0.5", "--cache-read", "0.1"]);
    let shown = d.wait_for(&id, secs(20), |s| s["spend"]["total_nano"] == 3_500_000);
    assert_eq!((shown["spend"]["generation_nano"].as_u64(), shown["spend"]["cache_read_nano"].as_u64()), (Some(2_600_000), Some(900_000)));
    let listed = d.json(&["prices", "list"]);
    assert_eq!(listed["overrides"][0]["model"], "in-house-model");
    assert!(listed["shipped"].as_array().unwrap().iter().any(|p| p["model"] == "claude-sonnet-4-5"));
    d.ok(&["session", "stop", &id]);
}

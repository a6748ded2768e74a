//! End-to-end: an agent's and a repository's pages (`drover agent show`, `drover repo
//! show`, and `GET /api/v1/agents/{name}` / `/repos/{name}` behind them): live runs
//! first, then newest first; the tasks with whose turn it is; what the runs cost.

mod support;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;
use support::{bin, secs, Drover};

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git").arg("-C").arg(dir).args(args).output().expect("git");
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// The stand-in agent: it hands its `plan` stages off at once and works (lingers on)
/// any other stage.
fn setup(d: &Drover, dir: &Path) {
    let repo = dir.join("repo");
    std::fs::create_dir(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    git(&repo, &["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "start"]);
    let script = dir.join("agent.sh");
    let body = format!(
        "#!/bin/sh\nset -e\nif [ \"$DROVER_STAGE\" = plan ]; then '{}' task advance --note planned; fi\nexec sleep 600\n",
        bin().display()
    );
    std::fs::write(&script, body).unwrap();
    Command::new("chmod").arg("+x").arg(&script).status().unwrap();
    d.ok(&["repo", "add", "app", "--device", &d.device, "--path", repo.to_str().unwrap()]);
    d.ok(&["agent", "create", "bot", "--harness", "custom", "--model", "m-1", "--", script.to_str().unwrap(), "{prompt}"]);
}

fn wait_task(d: &Drover, id: &str, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + secs(60);
    loop {
        let t = d.json(&["task", "show", id]);
        if pred(&t) {
            return t;
        }
        assert!(Instant::now() < deadline, "task never reached {what}: {t}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn runs(t: &Value) -> &Vec<Value> {
    t["sessions"].as_array().unwrap()
}

fn ids(list: &Value) -> Vec<&str> {
    list.as_array().unwrap().iter().map(|v| v["id"].as_str().unwrap()).collect()
}

fn live(s: &Value) -> bool {
    s["outcome"] == "running" || s["outcome"] == "starting"
}

#[test]
fn agent_and_repo_pages_list_live_runs_first_their_tasks_and_spend() {
    let d = Drover::up();
    let tmp = tempfile::tempdir().unwrap();
    setup(&d, tmp.path());

    // A: its run lingers (live). B, filed later: its run hands off and ends, so it is
    // the newest run but not a live one. C: people work it; the agent never touches it.
    let a =
        d.ok(&["task", "create", "--repo", "app", "--title", "Live work", "--stages", "code", "--assign", "code=bot"]).trim().to_string();
    let ta = wait_task(&d, &a, "a running run", |t| runs(t).iter().any(|s| s["outcome"] == "running"));
    let a_run = runs(&ta)[0]["id"].as_str().unwrap().to_string();
    let b = d.ok(&["task", "create", "--repo", "app", "--title", "Planned", "--stages", "plan", "--assign", "plan=bot"]).trim().to_string();
    let tb = wait_task(&d, &b, "done", |t| t["task"]["status"] == "done" && runs(t).iter().all(|s| !live(s)));
    let b_run = runs(&tb)[0]["id"].as_str().unwrap().to_string();
    let c = d.ok(&["task", "create", "--repo", "app", "--title", "For people", "--stages", "review"]).trim().to_string();

    // The agent's page: live first although B's run is newer; its tasks only.
    let p = d.json(&["agent", "show", "bot"]);
    assert_eq!((p["agent"]["name"].as_str(), p["agent"]["harness"].as_str()), (Some("bot"), Some("custom")), "{p}");
    assert_eq!(p["agent"]["model"], "m-1");
    assert_eq!(ids(&p["sessions"]), [a_run.as_str(), b_run.as_str()], "{p}");
    assert!(p["sessions"][1]["created_at"].as_str() > p["sessions"][0]["created_at"].as_str(), "B's run is the newer one");
    assert_eq!(p["sessions"][0]["outcome"], "running");
    assert_eq!(p["sessions"][1]["outcome"], "completed");
    assert_eq!(p["more_sessions"], false);
    assert_eq!(ids(&p["tasks"]), [b.as_str(), a.as_str()], "newest first, not the people's task: {p}");
    assert_eq!(p["tasks"][1]["turn"]["kind"], "running");
    assert_eq!(p["tasks"][0]["turn"]["kind"], "finished");
    assert_eq!(p["tasks"][1]["live_session"], a_run.as_str());
    assert_eq!((p["spend"]["cost_usd"].clone(), p["spend"]["cost_unknown"].clone()), (Value::Null, Value::Bool(false)), "no usage yet");

    // The repository's page: every task, its clone, the same runs in the same order.
    let r = d.json(&["repo", "show", "app"]);
    assert_eq!(r["repo"]["name"], "app");
    assert_eq!(r["repo"]["devices"][0][0], d.device.as_str(), "{r}");
    assert!(r["repo"]["devices"][0][1].as_str().unwrap().ends_with("/repo"), "{r}");
    assert_eq!(ids(&r["sessions"]), [a_run.as_str(), b_run.as_str()], "{r}");
    assert_eq!(ids(&r["tasks"]), [c.as_str(), b.as_str(), a.as_str()], "{r}");
    assert_eq!(r["tasks"][0]["turn"]["needs_person"], true, "{r}");

    // Spend: every run's cost adds up; a run on a model with no price makes it unknown.
    let home = d.home.path();
    support::database_exec(
        home,
        &format!("UPDATE sessions SET usage = '{{}}', cost_generation = 1500000000, cost_cache_read = 250000000 WHERE id = '{b_run}'"),
    );
    let p = d.json(&["agent", "show", "bot"]);
    assert_eq!(p["spend"]["cost_usd"], 1.75, "{p}");
    assert_eq!(d.json(&["repo", "show", "app"])["spend"]["cost_usd"], 1.75);
    let text = d.ok(&["agent", "show", "bot"]);
    assert!(text.contains("Total spend: $1.75"), "{text}");
    support::database_exec(home, &format!("UPDATE sessions SET usage = '{{}}', cost_unpriced = 1 WHERE id = '{a_run}'"));
    let p = d.json(&["agent", "show", "bot"]);
    assert_eq!((p["spend"]["cost_usd"].clone(), p["spend"]["cost_unknown"].clone()), (Value::Null, Value::Bool(true)), "{p}");

    // The text for people: the facts, then the tables, the live run's row first.
    let text = d.ok(&["agent", "show", "bot"]);
    for needle in
        ["agent bot", "harness:  custom", "model:    m-1", "operator:", "ID", "OUTCOME", "STAGE", "TASK", "STARTED", "COST", "NOW", "TITLE"]
    {
        assert!(text.contains(needle), "no `{needle}` in:\n{text}");
    }
    assert!(text.contains("Total spend: unknown"), "{text}");
    let (live_at, done_at) = (text.find(&a_run).unwrap(), text.find(&b_run).unwrap());
    assert!(live_at < done_at, "the live run comes first:\n{text}");
    let live_line = text.lines().find(|l| l.starts_with(&a_run)).unwrap();
    assert!(live_line.contains("running") && live_line.contains("code") && live_line.contains(&a), "{live_line}");
    let text = d.ok(&["repo", "show", "app"]);
    for needle in ["repository app", "base:", &format!("{}:", d.device), "For people", "Planned", "Live work", "needs a person"] {
        assert!(text.contains(needle), "no `{needle}` in:\n{text}");
    }

    // Names that are not there say what to do.
    assert!(d.fails(&["agent", "show", "nobody"]).contains("no agent named `nobody`"));
    assert!(d.fails(&["repo", "show", "nothing"]).contains("no repository named `nothing`"));
}

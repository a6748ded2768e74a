//! End-to-end: the stale monitor (seed 001 "When a session goes quiet") with its windows
//! shortened, on a real server and a real device daemon in separate processes. A
//! silent device's session is flagged, then marked lost with the seed's reason; when
//! the device comes back, the old run is fenced (stopped), never resumed; a lost task
//! run is replaced, and no stage ever has two live runs.

mod support;

use std::time::Duration;

use serde_json::Value;
use support::{bin, group_alive, http, secs, wait_until, Split};

/// Windows in seconds: silent after 2 s, checks every 0.5 s, heartbeats every 0.3 s.
const FAST: [&str; 4] = ["--device-silent-secs", "2", "--monitor-secs", "0.5"];
const HEARTBEAT: [&str; 2] = ["--heartbeat-secs", "0.3"];

fn overview(s: &Split) -> Value {
    let (status, body) = http(&s.url, "GET", "/api/v1/overview", Some(&s.cli.token()), b"");
    assert_eq!(status, 200, "{body}");
    serde_json::from_str(&body).unwrap()
}

fn pgid(s: &Split, id: &str) -> i32 {
    wait_until("the child's pid", secs(20), || std::fs::read_to_string(s.session_dir(id).join("child.pid")).ok()?.trim().parse().ok())
}

#[test]
fn a_silent_devices_session_is_flagged_then_lost_and_fenced_when_the_device_returns() {
    let mut s = Split::start_with("flaky", &FAST, &HEARTBEAT);
    let id = s.cli.start(&["sh", "-c", "echo up; sleep 300"]);
    s.cli.wait_text(&id, "up", secs(20));
    let group = pgid(&s, &id);
    // Heartbeats keep a live device's sessions unflagged across several checks.
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(overview(&s)["stale"], 0);

    s.kill_device();
    // Flagged first: a warning, in "Sessions needing attention", with Last contact.
    let row = wait_until("the Device silent flag", secs(20), || {
        let o = overview(&s);
        (o["stale"] == 1).then(|| o["attention"][0].clone())
    });
    assert_eq!((row["session"].as_str(), row["flag"].as_str()), (Some(id.as_str()), Some("Device silent")));
    assert!(row["last_contact_at"].is_string());
    assert_eq!(s.cli.show(&id)["outcome"], "running", "a flag is not a verdict");
    // Still flagged at the next check: lost, with the seed's reason, in the activity too.
    let shown = s.cli.wait_ended(&id, secs(20));
    assert_eq!(
        (shown["outcome"].as_str(), shown["reason"].as_str()),
        (Some("lost"), Some("the device dropped off and missed its check-ins"))
    );
    assert_eq!(overview(&s)["stale"], 0);
    let events = s.cli.json(&["session", "events", &id]);
    let last = events.as_array().unwrap().last().unwrap();
    assert_eq!(last["label"], "session connection lost");
    assert!(group_alive(group), "the program itself outlived its daemon");

    // The device comes back with the run still going: its lease is gone, so it is
    // stopped, not resumed, and stays lost.
    s.start_device();
    wait_until("the fenced run to stop", secs(20), || (!group_alive(group)).then_some(()));
    std::thread::sleep(Duration::from_millis(500));
    let after = s.cli.show(&id);
    assert_eq!(
        (after["outcome"].as_str(), after["reason"].as_str()),
        (Some("lost"), Some("the device dropped off and missed its check-ins"))
    );
}

#[test]
fn stopping_a_session_while_its_device_is_offline_releases_it_and_the_device_stops_it_on_return() {
    // A long silent window: only the Stop decides here.
    let mut s = Split::start_with("away", &["--device-silent-secs", "600", "--monitor-secs", "0.5"], &HEARTBEAT);
    let id = s.cli.start(&["sh", "-c", "echo up; sleep 300"]);
    s.cli.wait_text(&id, "up", secs(20));
    let group = pgid(&s, &id);
    s.kill_device();
    s.cli.wait_device("away", false);
    let stopped = s.cli.json(&["session", "stop", &id]);
    assert_eq!(
        (stopped["outcome"].as_str(), stopped["reason"].as_str()),
        (Some("released"), Some("the session was stopped while its device was offline"))
    );
    let events = s.cli.json(&["session", "events", &id]);
    let last = events.as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["label"], "session killed");
    assert!(!last["actor"].as_str().unwrap().starts_with("device"), "the operator stopped it: {last}");
    assert!(group_alive(group));
    s.start_device();
    wait_until("the stopped run to end on the device", secs(20), || (!group_alive(group)).then_some(()));
}

#[test]
fn a_lost_task_run_is_replaced_and_no_stage_ever_has_two_live_runs() {
    let mut s = Split::start_with("worker", &FAST, &HEARTBEAT);
    let tmp = tempfile::tempdir().unwrap();
    let repo = support::git_repo(tmp.path());
    // The first run leaves its work in the sandbox and waits; a replacement finds the
    // work there and hands off.
    let script = tmp.path().join("agent.sh");
    let body = format!(
        "#!/bin/sh\nset -e\nif [ -f started ]; then echo 'picked up'; '{}' task advance --note resumed; sleep 60; fi\ntouch started\necho first; sleep 300\n",
        bin().display()
    );
    support::executable(&script, &body);
    let cli = &s.cli;
    cli.ok(&["repo", "add", "app", "--device", "worker", "--path", repo.to_str().unwrap()]);
    cli.ok(&["agent", "create", "bot", "--harness", "custom", "--", script.to_str().unwrap(), "{prompt}"]);
    let task =
        cli.ok(&["task", "create", "--repo", "app", "--title", "Survive", "--stages", "code", "--assign", "code=bot"]).trim().to_string();
    let first = wait_until("the first run", secs(30), || {
        let t = cli.json(&["task", "show", &task]);
        t["task"]["live_session"].as_str().map(str::to_string)
    });
    cli.wait_text(&first, "first", secs(20));
    let group = pgid(&s, &first);

    s.kill_device();
    // Lost, and the stage waits for a slot again (the device is away).
    wait_until("the first run lost and the stage queued again", secs(30), || {
        let t = s.cli.json(&["task", "show", &task]);
        (t["sessions"][0]["outcome"] == "lost" && t["task"]["queued_at"].is_string()).then_some(())
    });
    s.start_device();
    // Until the task is done, never two live runs on the stage by the server's record;
    // on the device, the returning daemon is told to stop the fenced run first.
    let t = wait_until("the replacement's hand-off", secs(60), || {
        let t = s.cli.json(&["task", "show", &task]);
        let live = t["sessions"].as_array().unwrap().iter().filter(|r| r["outcome"] == "running" || r["outcome"] == "starting").count();
        assert!(live <= 1, "two live runs on one stage: {t}");
        (t["task"]["status"] == "done" && live == 0).then_some(t)
    });
    let runs = t["sessions"].as_array().unwrap();
    assert_eq!(runs.iter().map(|r| r["outcome"].as_str().unwrap()).collect::<Vec<_>>(), ["lost", "completed"]);
    assert!(s.cli.ok(&["session", "tail", runs[1]["id"].as_str().unwrap()]).contains("picked up"), "the replacement found the work");
    assert!(!group_alive(group));
}

#[test]
fn a_run_still_going_after_its_sandbox_finished_is_flagged_sandbox_retired_and_lost() {
    // Only the retired check can fire: the silent window is long.
    let server = ["--device-silent-secs", "600", "--sandbox-retired-secs", "1", "--monitor-secs", "0.5"];
    let mut s = Split::start_with("box", &server, &HEARTBEAT);
    let tmp = tempfile::tempdir().unwrap();
    let repo = support::git_repo(tmp.path());
    let script = tmp.path().join("agent.sh");
    support::executable(&script, "#!/bin/sh\necho working; sleep 300\n");
    let cli = &s.cli;
    cli.ok(&["repo", "add", "app", "--device", "box", "--path", repo.to_str().unwrap()]);
    cli.ok(&["agent", "create", "bot", "--harness", "custom", "--", script.to_str().unwrap(), "{prompt}"]);
    let task =
        cli.ok(&["task", "create", "--repo", "app", "--title", "Leftover", "--stages", "code", "--assign", "code=bot"]).trim().to_string();
    let run = wait_until("the run", secs(30), || cli.json(&["task", "show", &task])["task"]["live_session"].as_str().map(str::to_string));
    cli.wait_text(&run, "working", secs(20));
    // With its device away, the sandbox is closed, but nobody can stop the run.
    s.kill_device();
    s.cli.wait_device("box", false);
    s.cli.ok(&["task", "finish", &task]);
    s.cli.ok(&["task", "mark-done", &task]);
    let row = wait_until("the Sandbox retired flag", secs(20), || {
        let o = overview(&s);
        (o["stale"] == 1).then(|| o["attention"][0].clone())
    });
    assert_eq!(row["flag"], "Sandbox retired");
    let shown = s.cli.wait_ended(&run, secs(20));
    assert_eq!(
        (shown["outcome"].as_str(), shown["reason"].as_str()),
        (Some("lost"), Some("the session was still running after its sandbox had finished"))
    );
}

#[test]
fn after_a_reboot_the_lost_run_is_reported_and_its_replacement_resumes_the_conversation() {
    // A stand-in for Claude Code on the device's PATH: `--continue` resumes (and waits
    // for the carry-on message), otherwise it starts a conversation and works on.
    let tmp = tempfile::tempdir().unwrap();
    let bin_dir = tmp.path().join("bin");
    std::fs::create_dir(&bin_dir).unwrap();
    let claude = bin_dir.join("claude");
    let script = "#!/bin/sh\ncase \" $* \" in\n  *\" --continue \"*) echo 'resumed the conversation'; read line; echo \"told: $line\"; drover task advance --note resumed; sleep 60;;\n  *) echo 'new conversation'; sleep 300;;\nesac\n";
    support::executable(&claude, script);
    let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap_or_default());
    // Each test is its own process (nextest): the device daemon inherits this PATH.
    std::env::set_var("PATH", path);
    let mut s = Split::start_with("rebooted", &["--monitor-secs", "0.5"], &HEARTBEAT);
    let repo = support::git_repo(tmp.path());
    let cli = &s.cli;
    cli.ok(&["repo", "add", "app", "--device", "rebooted", "--path", repo.to_str().unwrap()]);
    cli.ok(&["agent", "create", "bot", "--harness", "claude"]);
    let task =
        cli.ok(&["task", "create", "--repo", "app", "--title", "Reboot me", "--stages", "code", "--assign", "code=bot"]).trim().to_string();
    let first =
        wait_until("the first run", secs(30), || cli.json(&["task", "show", &task])["task"]["live_session"].as_str().map(str::to_string));
    cli.wait_text(&first, "new conversation", secs(20));

    // "Reboot": the daemon and every session process die; the daemon comes back.
    s.kill_device();
    support::kill_sessions(s.device_home.path());
    s.start_device();
    let t = wait_until("the replacement's hand-off", secs(60), || {
        let t = s.cli.json(&["task", "show", &task]);
        let live = t["sessions"].as_array().unwrap().iter().any(|r| r["outcome"] == "running" || r["outcome"] == "starting");
        (t["task"]["status"] == "done" && !live).then_some(t)
    });
    let runs = t["sessions"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    assert_eq!(runs[0]["outcome"], "lost");
    assert!(runs[0]["reason"].as_str().unwrap().contains("may have restarted"), "{}", runs[0]["reason"]);
    let second = runs[1]["id"].as_str().unwrap();
    assert!(runs[1]["command"].as_array().unwrap().iter().any(|a| a == "--continue"), "{}", runs[1]["command"]);
    let text = s.cli.ok(&["session", "tail", second]);
    assert!(text.contains("resumed the conversation") && text.contains("told: Your previous session was interrupted"), "{text}");
    let started = t["events"].as_array().unwrap().iter().filter(|e| e["kind"] == "session_started").collect::<Vec<_>>();
    assert_eq!((started[0]["detail"]["resumed"].as_bool(), started[1]["detail"]["resumed"].as_bool()), (Some(false), Some(true)));
}

#[test]
fn a_stalled_run_is_replaced_but_one_waiting_on_a_person_is_not() {
    let server = ["--stall-secs", "2", "--monitor-secs", "0.5"];
    let s = Split::start_with("staller", &server, &HEARTBEAT);
    let tmp = tempfile::tempdir().unwrap();
    let repo = support::git_repo(tmp.path());
    let drover = bin().display().to_string();
    // Goes quiet after one line; its replacement finds the mark and hands off.
    let quiet = tmp.path().join("quiet.sh");
    support::executable(&quiet, &format!("#!/bin/sh\nif [ -f started ]; then echo 'fresh run'; '{drover}' task advance --note done; sleep 60; fi\ntouch started\necho 'one line'; sleep 300\n"));
    // Asks a person and waits quietly for the answer, then hands off.
    let asker = tmp.path().join("asker.sh");
    support::executable(
        &asker,
        &format!("#!/bin/sh\na=$('{drover}' task ask 'Which colour?')\necho \"got $a\"\n'{drover}' task advance --note \"$a\"\nsleep 60\n"),
    );
    let cli = &s.cli;
    cli.ok(&["repo", "add", "app", "--device", "staller", "--path", repo.to_str().unwrap()]);
    cli.ok(&["agent", "create", "quiet", "--harness", "custom", "--", quiet.to_str().unwrap(), "{prompt}"]);
    cli.ok(&["agent", "create", "asker", "--harness", "custom", "--", asker.to_str().unwrap(), "{prompt}"]);
    let t1 = cli
        .ok(&["task", "create", "--repo", "app", "--title", "Goes quiet", "--stages", "code", "--assign", "code=quiet"])
        .trim()
        .to_string();
    let t2 =
        cli.ok(&["task", "create", "--repo", "app", "--title", "Asks", "--stages", "code", "--assign", "code=asker"]).trim().to_string();
    let done = wait_until("the quiet task done by a replacement", secs(60), || {
        let t = cli.json(&["task", "show", &t1]);
        let live = t["sessions"].as_array().unwrap().iter().any(|r| r["outcome"] == "running" || r["outcome"] == "starting");
        (t["task"]["status"] == "done" && !live).then_some(t)
    });
    // (A run that could not start on a loaded machine may come first; what matters is
    // that the quiet one was replaced for stalling and a fresh one finished.)
    let runs = done["sessions"].as_array().unwrap();
    let stall = "the session had stalled (no output or progress for 2 seconds) and was replaced with a fresh one";
    assert!(runs.iter().any(|r| r["outcome"] == "lost" && r["reason"] == stall), "{done}");
    assert_eq!(runs.last().unwrap()["outcome"], "completed");
    // The asker has been quiet all this while (and a little longer), waiting on its
    // question: never replaced.
    std::thread::sleep(Duration::from_millis(1500));
    let t = cli.json(&["task", "show", &t2]);
    assert_eq!(t["sessions"].as_array().unwrap().len(), 1, "{t}");
    assert_eq!(t["sessions"][0]["outcome"], "running");
    let note = t["notes"][0]["id"].as_str().unwrap().to_string();
    cli.ok(&["task", "answer", &note, "green"]);
    let t = wait_until("the asker's hand-off", secs(30), || {
        let t = cli.json(&["task", "show", &t2]);
        (t["task"]["status"] == "done").then_some(t)
    });
    assert_eq!(t["sessions"].as_array().unwrap().len(), 1);
}

#[test]
fn a_revoked_device_is_refused_and_its_sessions_are_flagged_then_lost() {
    let s = Split::start_with("stolen", &["--monitor-secs", "0.5"], &HEARTBEAT);
    let id = s.cli.start(&["sh", "-c", "echo up; sleep 300"]);
    s.cli.wait_text(&id, "up", secs(20));
    let revoked = s.cli.json(&["device", "revoke", "stolen"]);
    assert!(revoked["revoked_at"].is_string(), "{revoked}");
    s.cli.wait_device("stolen", false);
    let row = wait_until("the Device revoked flag", secs(20), || {
        let o = overview(&s);
        (o["stale"] == 1).then(|| o["attention"][0].clone())
    });
    assert_eq!(row["flag"], "Device revoked");
    let shown = s.cli.wait_ended(&id, secs(20));
    assert_eq!((shown["outcome"].as_str(), shown["reason"].as_str()), (Some("lost"), Some("the device's credential was revoked")));
    // Its daemon keeps trying, and is refused.
    std::thread::sleep(Duration::from_millis(1500));
    let list = s.cli.json(&["device", "list"]);
    assert_eq!((list[0]["connected"].as_bool(), list[0]["revoked_at"].is_string()), (Some(false), true), "{list}");
    assert!(s.cli.ok(&["device", "list"]).contains("revoked"));
    let (status, body) = http(&s.url, "GET", "/api/v1/events?limit=1000", Some(&s.cli.token()), b"");
    assert_eq!(status, 200);
    assert!(body.contains("\"device_revoked\""), "the revocation is on the record");
}

#[test]
fn a_silent_device_takes_no_new_runs_and_what_it_lost_costs_no_attempt() {
    // One run per stage: a lost run that counted would flag the task at once.
    let server: Vec<&str> = FAST.iter().copied().chain(["--stage-runs", "1"]).collect();
    let s = Split::start_with("frozen", &server, &HEARTBEAT);
    let tmp = tempfile::tempdir().unwrap();
    let repo = support::git_repo(tmp.path());
    let marks = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    // Each run that starts leaves a mark named after its session, then hands off.
    let script = tmp.path().join("agent.sh");
    let body = format!(
        "#!/bin/sh\nset -e\ntouch '{}'/\"$DROVER_SESSION\"\n'{}' task advance --note done\nsleep 60\n",
        marks.path().display(),
        bin().display()
    );
    support::executable(&script, &body);
    let cli = &s.cli;
    cli.ok(&["repo", "add", "app", "--device", "frozen", "--path", repo.to_str().unwrap()]);
    cli.ok(&["agent", "create", "bot", "--harness", "custom", "--", script.to_str().unwrap(), "{prompt}"]);

    // The daemon freezes (its link stays open) just as a run is staffed on it.
    s.signal_device("STOP");
    let task =
        cli.ok(&["task", "create", "--repo", "app", "--title", "Frozen", "--stages", "code", "--assign", "code=bot"]).trim().to_string();
    let t = wait_until("the first run lost and the stage queued again", secs(30), || {
        let t = cli.json(&["task", "show", &task]);
        (t["sessions"][0]["outcome"] == "lost" && t["task"]["queued_at"].is_string()).then_some(t)
    });
    assert!(t["task"]["flagged"].is_null(), "a run its device lost is not the agent's attempt: {t}");
    assert_eq!(t["task"]["attempts"], 0);
    assert_eq!(t["task"]["turn"]["label"], "queued for a slot");
    let lost = t["sessions"][0]["id"].as_str().unwrap().to_string();
    // Silent, though still connected: no replacement is sent its way.
    std::thread::sleep(Duration::from_secs(3));
    let t = cli.json(&["task", "show", &task]);
    assert_eq!(t["sessions"].as_array().unwrap().len(), 1, "a silent device took a new run: {t}");

    // It wakes: the run it was sent before it froze never starts; a replacement does.
    s.signal_device("CONT");
    let t = wait_until("the replacement's hand-off", secs(60), || {
        let t = cli.json(&["task", "show", &task]);
        (t["task"]["status"] == "done").then_some(t)
    });
    let runs: Vec<&str> = t["sessions"].as_array().unwrap().iter().map(|r| r["outcome"].as_str().unwrap()).collect();
    assert_eq!(runs[0], "lost");
    let replacement = t["sessions"].as_array().unwrap().last().unwrap()["id"].as_str().unwrap().to_string();
    assert!(marks.path().join(&replacement).exists(), "the replacement ran");
    std::thread::sleep(Duration::from_secs(1));
    assert!(!marks.path().join(&lost).exists(), "a run already marked lost must never start");
}

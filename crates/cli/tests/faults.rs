//! End-to-end fault injection on the device↔server link: the link (not either process)
//! is cut for longer than the silent window while a task's run works. The run is
//! flagged, marked lost, `session.lost` fires, and the stage is staffed again once a
//! device can take it; when the link comes back, the old run — still alive on the
//! device — is fenced and stopped, and at no point does the stage have two live runs.

mod support;

use std::time::Duration;

use support::webhook::{entries, receiver};
use support::{bin, group_alive, secs, wait_until, Split};

#[test]
fn a_link_cut_past_the_silent_window_loses_the_run_restaffs_it_and_fences_the_old_one() {
    let server = ["--device-silent-secs", "2", "--monitor-secs", "0.5", "--webhook-retry-secs", "0.2", "--allow-webhook-host", "127.0.0.1"];
    let (s, link) = Split::start_with_link("remote", &server, &["--heartbeat-secs", "0.3"]);
    let tmp = tempfile::tempdir().unwrap();
    let secrets = tmp.path().join("secrets.txt");
    std::fs::write(&secrets, "").unwrap();
    let hooks = receiver(tmp.path(), 0, &secrets, 0, "");
    let added = s.cli.json(&["webhook", "add", &hooks.url, "--event", "session.lost"]);
    std::fs::write(&secrets, format!("{}\n", added["secret"].as_str().unwrap())).unwrap();

    let repo = support::git_repo(tmp.path());
    // The first run leaves its mark in the sandbox and keeps working; a replacement
    // finds the mark and hands off.
    let script = tmp.path().join("agent.sh");
    let body = format!(
        "#!/bin/sh\nif [ -f started ]; then echo 'picked up'; '{}' task advance --note resumed; sleep 60; fi\ntouch started\necho working\ni=0; while :; do i=$((i+1)); echo \"tick $i\"; sleep 0.3; done\n",
        bin().display()
    );
    support::executable(&script, &body);
    let cli = &s.cli;
    cli.ok(&["repo", "add", "app", "--device", "remote", "--path", repo.to_str().unwrap()]);
    cli.ok(&["agent", "create", "bot", "--harness", "custom", "--", script.to_str().unwrap(), "{prompt}"]);
    let task =
        cli.ok(&["task", "create", "--repo", "app", "--title", "Cut off", "--stages", "code", "--assign", "code=bot"]).trim().to_string();
    let first =
        wait_until("the first run", secs(30), || cli.json(&["task", "show", &task])["task"]["live_session"].as_str().map(str::to_string));
    cli.wait_text(&first, "working", secs(20));
    let group: i32 = wait_until("the run's pid", secs(20), || {
        std::fs::read_to_string(s.session_dir(&first).join("child.pid")).ok()?.trim().parse().ok()
    });

    link.cut();
    let lost = wait_until("the run lost", secs(30), || {
        let t = cli.json(&["task", "show", &task]);
        (t["sessions"][0]["outcome"] == "lost" && t["task"]["queued_at"].is_string()).then_some(t)
    });
    assert_eq!(lost["sessions"][0]["reason"], "the device dropped off and missed its check-ins");
    // What the lost run printed while cut off is refused when the link is back: its
    // recording ends where its lease did.
    let bytes_at_loss = cli.show(&first)["output_bytes"].as_u64().unwrap();
    let hook = wait_until("session.lost delivered", secs(20), || entries(&hooks.log).into_iter().find(|e| e["type"] == "session.lost"));
    assert_eq!(hook["verified_by"], serde_json::json!([0]));
    // Cut off, the device's daemon and the run itself are still alive.
    assert!(group_alive(group));

    link.restore();
    let done = wait_until("the replacement's hand-off", secs(60), || {
        let t = cli.json(&["task", "show", &task]);
        let live = t["sessions"].as_array().unwrap().iter().filter(|r| r["outcome"] == "running" || r["outcome"] == "starting").count();
        assert!(live <= 1, "two live runs on one stage: {t}");
        (t["task"]["status"] == "done" && live == 0).then_some(t)
    });
    let runs = done["sessions"].as_array().unwrap();
    assert_eq!(runs.iter().map(|r| r["outcome"].as_str().unwrap()).collect::<Vec<_>>(), ["lost", "completed"]);
    assert!(cli.ok(&["session", "tail", runs[1]["id"].as_str().unwrap()]).contains("picked up"));
    // The fenced run was stopped on the device, and stayed lost.
    wait_until("the fenced run to stop", secs(20), || (!group_alive(group)).then_some(()));
    std::thread::sleep(Duration::from_millis(300));
    let after = cli.show(&first);
    assert_eq!(after["outcome"], "lost");
    assert_eq!(after["output_bytes"].as_u64().unwrap(), bytes_at_loss, "output of the fenced run was stored");
    assert!(link.cuts() == 1);
}

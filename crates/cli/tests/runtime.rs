//! End-to-end: the session runtime through the real `drover` binary.

mod support;

use std::time::Duration;

use support::{group_alive, http, secs, Drover};

#[test]
fn device_list_shows_the_local_device() {
    let d = Drover::up();
    let devices = d.json(&["device", "list"]);
    let dev = &devices[0];
    assert_eq!(dev["name"], "testdev");
    assert_eq!(dev["slots"], 200);
    assert_eq!(dev["connected"], true);
    assert!(dev["last_contact_at"].is_string());
    let table = d.ok(&["device", "list"]);
    assert!(table.contains("testdev") && table.contains("LAST CONTACT"), "{table}");
}

#[test]
fn outcomes_follow_how_the_process_ended() {
    let d = Drover::up();
    let ok = d.start(&["sh", "-c", "echo done"]);
    let s = d.wait_ended(&ok, secs(20));
    assert_eq!(s["outcome"], "incomplete");
    assert_eq!(s["exit_code"], 0);
    assert!(s["started_at"].is_string() && s["ended_at"].is_string() && s["duration_secs"].is_number(), "{s}");
    assert_eq!(s["device"], "testdev");

    let bad = d.start(&["sh", "-c", "exit 3"]);
    let s = d.wait_ended(&bad, secs(20));
    assert_eq!(s["outcome"], "failed");
    assert_eq!(s["exit_code"], 3);
    assert_eq!(s["reason"], "the process exited with code 3");

    // A command that does not exist fails to start, with the reason, and `start` says so.
    let out = d.run(&["session", "start", "--device", "testdev", "--", "no-such-command-xyz"]);
    assert!(!out.status.success());
    let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(String::from_utf8_lossy(&out.stderr).contains("command not found: no-such-command-xyz"));
    let s = d.show(&id);
    assert_eq!(s["outcome"], "failed");
    assert!(s["reason"].as_str().unwrap().contains("could not start: command not found"), "{s}");

    let list = d.json(&["session", "list", "--all"]);
    assert_eq!(list.as_array().unwrap().len(), 3);
    assert!(d.json(&["session", "list"]).as_array().unwrap().is_empty(), "no live sessions remain");
}

#[test]
fn each_session_says_what_its_outcome_means_in_the_words_the_server_serves() {
    let d = Drover::up();
    let (status, body) = http(&d.url, "GET", "/api/v1/outcomes", None, b"");
    assert_eq!(status, 200, "{body}");
    let guide: serde_json::Value = serde_json::from_str(&body).unwrap();
    let words = |outcome: &str| guide["outcomes"].as_array().unwrap().iter().find(|o| o["outcome"] == outcome).cloned().unwrap();
    assert_eq!(guide["outcomes"].as_array().unwrap().len(), 7, "{guide}");

    let live = d.start(&["sleep", "30"]);
    let s = d.wait_for(&live, secs(20), |s| s["outcome"] == "running");
    assert_eq!(s["live"], true);
    assert_eq!(s["outcome_explanation"], words("running")["explanation"]);

    let bad = d.start(&["sh", "-c", "exit 3"]);
    let s = d.wait_ended(&bad, secs(20));
    assert_eq!((&s["outcome"], &s["live"]), (&"failed".into(), &false.into()));
    assert_eq!(s["outcome_explanation"], words("failed")["explanation"]);
    assert_eq!(words("failed")["live"], false);
    let shown = d.ok(&["session", "show", &bad]);
    assert!(shown.contains(words("failed")["explanation"].as_str().unwrap()), "{shown}");
}

#[test]
fn working_directory_and_title_are_kept() {
    let d = Drover::up();
    let dir = tempfile::tempdir().unwrap();
    let out = d.ok(&["session", "start", "--device", "testdev", "--cwd", dir.path().to_str().unwrap(), "--title", "my run", "--", "pwd"]);
    let id = out.trim();
    let s = d.wait_ended(id, secs(20));
    assert_eq!(s["title"], "my run");
    assert_eq!(s["cwd"], dir.path().to_str().unwrap());
    assert!(d.ok(&["session", "tail", id]).contains(dir.path().to_str().unwrap()));
    let err = d.fails(&["session", "start", "--device", "testdev", "--cwd", "/no/such/dir", "--", "true"]);
    assert!(err.contains("working directory /no/such/dir does not exist"), "{err}");
}

#[test]
fn stop_kills_the_whole_process_group_and_is_released() {
    let d = Drover::up();
    // Ignores SIGTERM, so Stop must escalate to SIGKILL after the grace; has children too.
    let id = d.start(&["sh", "-c", "trap '' TERM; sleep 300 & sleep 300 & echo ready; wait"]);
    d.wait_text(&id, "ready", secs(20));
    let pgid: i32 = std::fs::read_to_string(d.session_dir(&id).join("child.pid")).unwrap().trim().parse().unwrap();
    assert!(group_alive(pgid));
    let s = d.json(&["session", "stop", &id]);
    assert_eq!(s["outcome"], "released");
    assert!(s["reason"].as_str().unwrap().starts_with("stopped by an operator"), "{s}");
    assert!(!group_alive(pgid), "processes of the session's group survived Stop");
    let events = d.json(&["session", "events", &id]);
    let last = events.as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["label"], "session killed");
    assert_ne!(last["actor"], "");
    let err = d.fails(&["session", "stop", &id]);
    assert!(err.contains("already ended"), "{err}");
}

#[test]
fn input_is_audited_and_keeps_newlines_and_tabs() {
    let d = Drover::up();
    let id = d.start(&["cat"]);
    d.wait_for(&id, secs(20), |s| s["outcome"] == "running");
    let receipt = d.json(&["session", "input", &id, "a\tb\nsecond line"]);
    assert_eq!(receipt["bracketed_paste"], false);
    // The terminal echoes the text, then cat prints it back: each line twice.
    let text = d.wait_text(&id, "second line\na       b\nsecond line", secs(20));
    assert!(text.starts_with("a       b\nsecond line"), "tab and newline kept: {text}");
    let events = d.json(&["session", "events", &id]);
    let input = events.as_array().unwrap().iter().find(|e| e["kind"] == "input_sent").expect("input event").clone();
    assert_eq!(input["detail"]["text"], "a\tb\nsecond line");
    assert!(!input["actor"].as_str().unwrap().is_empty());

    // Control characters are refused with a clear message, and nothing is sent.
    let err = d.fails(&["session", "input", &id, "bad\u{1b}[A"]);
    assert!(err.contains("control character U+001B"), "{err}");
    let err = d.fails(&["session", "input", &id, ""]);
    assert!(err.contains("input is empty"), "{err}");
}

#[test]
fn input_goes_as_a_bracketed_paste_when_the_program_enables_it() {
    let d = Drover::up();
    let script = r#"printf '\033[?2004h'; stty raw -echo; echo ready; dd bs=1 count=17 2>/dev/null | od -An -c; sleep 30"#;
    let id = d.start(&["sh", "-c", script]);
    d.wait_text(&id, "ready", secs(20));
    std::thread::sleep(Duration::from_millis(200));
    let receipt = d.json(&["session", "input", &id, "a\nb"]);
    assert_eq!(receipt["bracketed_paste"], true);
    // ESC [ 2 0 0 ~ a \r b ESC [ 2 0 1 ~ \r  = 17 bytes, as od prints them.
    let text = d.wait_text(&id, "~  \\r", secs(20));
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(flat.contains("033 [ 2 0 0 ~ a \\r b 033 [ 2 0 1 ~ \\r"), "{flat}");
}

#[test]
fn ask_waits_for_the_reply() {
    let d = Drover::up();
    let id = d.start(&["sh", "-c", "while read l; do sleep 0.3; echo \"got: $l\"; done"]);
    d.wait_for(&id, secs(20), |s| s["outcome"] == "running");
    let reply = d.json(&["session", "ask", &id, "ping", "--still-ms", "800", "--timeout", "20"]);
    assert_eq!(reply["settled"], true);
    assert_eq!(reply["reply"], "got: ping", "{reply}");
    let plain = d.ok(&["session", "ask", &id, "pong", "--still-ms", "800"]);
    assert_eq!(plain.trim(), "got: pong");
}

#[test]
fn tail_renders_text_and_follows_to_the_end() {
    let d = Drover::up();
    let id = d.start(&[
        "sh",
        "-c",
        "printf '\\033[31mred\\033[0m\\n'; printf '10%%\\r20%%\\r100%%\\n'; for i in 1 2 3 4 5; do echo n$i; sleep 0.2; done",
    ]);
    let out = d.ok(&["session", "tail", &id, "--follow"]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines, ["red", "100%", "n1", "n2", "n3", "n4", "n5"]);
    let last2 = d.ok(&["session", "tail", &id, "-n", "2"]);
    assert_eq!(last2, "n4\nn5\n");
}

#[test]
fn export_is_an_asciicast_v3_recording() {
    let d = Drover::up();
    let id = d.start(&["cat"]);
    d.wait_for(&id, secs(20), |s| s["outcome"] == "running");
    d.ok(&["session", "input", &id, "hello"]);
    d.wait_text(&id, "hello\nhello", secs(20));
    d.ok(&["session", "stop", &id]);
    let cast = d.ok(&["session", "export", &id]);
    let mut lines = cast.lines();
    let header: serde_json::Value = serde_json::from_str(lines.next().unwrap()).unwrap();
    assert_eq!(header["version"], 3);
    assert_eq!(header["term"]["cols"], 100);
    let events: Vec<serde_json::Value> = lines.map(|l| serde_json::from_str(l).unwrap()).collect();
    let codes: Vec<&str> = events.iter().map(|e| e[1].as_str().unwrap()).collect();
    assert!(codes.contains(&"o") && codes.contains(&"m"), "{codes:?}");
    assert_eq!(*codes.last().unwrap(), "x");
    let marker = events.iter().find(|e| e[1] == "m").unwrap();
    assert!(marker[2].as_str().unwrap().contains("hello"));
    let output: String = events.iter().filter(|e| e[1] == "o").map(|e| e[2].as_str().unwrap()).collect();
    assert!(output.contains("hello\r\nhello"), "{output:?}");
    assert!(events.iter().all(|e| e[0].as_f64().unwrap() >= 0.0));
}

#[test]
fn errors_are_one_clear_line() {
    let d = Drover::up();
    let err = d.fails(&["session", "show", "ses_0190b8c2d7e87c3d8a0a2d9f3e4b5c6d"]);
    assert!(err.contains("no session ses_0190b8c2d7e87c3d8a0a2d9f3e4b5c6d"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    let err = d.fails(&["session", "show", "sbx_0190b8c2d7e87c3d8a0a2d9f3e4b5c6d"]);
    assert!(err.contains("session ids start with `ses_`"), "{err}");
    let err = d.fails(&["session", "start", "--device", "nope", "--", "true"]);
    assert!(err.contains("no device named `nope`"), "{err}");
    let id = d.start(&["true"]);
    d.wait_ended(&id, secs(20));
    let err = d.fails(&["session", "input", &id, "late"]);
    assert!(err.contains("has ended") && err.contains("cannot be delivered"), "{err}");
    let err = d.fails(&["session", "attach", &id]);
    assert!(err.contains("has ended"), "{err}");

    // No server: a clear message, not a stack of errors.
    let out = d.cmd().env("DROVER_URL", "http://127.0.0.1:9").env("DROVER_TOKEN", "x").args(["session", "list"]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("is `drover up` running?"));
    // A bad token.
    let out = d.cmd().env("DROVER_URL", &d.url).env("DROVER_TOKEN", "drv_wrong").args(["session", "list"]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("not valid or was revoked"));
}

#[test]
fn a_second_up_on_the_same_home_is_refused() {
    let d = Drover::up();
    let out = d.cmd().args(["up", "--listen", "127.0.0.1:0"]).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("another drover is already running with DROVER_HOME="), "{err}");
    assert!(err.contains(&format!("pid {}", d.up_pid())), "{err}");
}

#[test]
fn an_idle_unwatched_session_is_parked_and_a_busy_one_is_not() {
    let d = Drover::up_with(tempfile::tempdir().unwrap(), 8, vec!["--park-after".into(), "2".into()]);
    let idle = d.start(&["sh", "-c", "echo hi; sleep 300"]);
    let busy = d.start(&["sh", "-c", "while true; do echo tick; sleep 0.3; done"]);
    let shown = d.wait_ended(&idle, secs(20));
    assert_eq!(shown["outcome"], "released", "{shown}");
    assert_eq!(shown["reason"], "idle-parked after 2 seconds with no output, input or viewer");
    let events = d.json(&["session", "events", &idle]);
    assert!(events.as_array().unwrap().iter().any(|e| e["actor"] == "idle parking"), "audited: {events}");
    // Printing keeps a session from being parked.
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(d.show(&busy)["outcome"], "running");
}

/// The children of `pid` (alive or not yet reaped), as `(pid, state)` from `/proc`.
fn children_of(pid: u32) -> Vec<(u32, char)> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .flatten()
        .filter_map(|e| {
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            // pid (comm) state ppid ...: comm may hold spaces, so split after its ')'.
            let (head, rest) = stat.rsplit_once(')')?;
            let mut fields = rest.split_whitespace();
            let state = fields.next()?.chars().next()?;
            let ppid: u32 = fields.next()?.parse().ok()?;
            let child: u32 = head.split_whitespace().next()?.parse().ok()?;
            (ppid == pid).then_some((child, state))
        })
        .collect()
}

#[test]
fn every_shim_is_forked_by_the_daemons_launcher_and_reaped_as_it_ends() {
    let d = Drover::up();
    // Long enough that every shim is still there when the last session has started.
    let ids: Vec<String> = (0..5).map(|i| d.start(&["sh", "-c", &format!("sleep 8; echo run {i}")])).collect();
    // One launcher, a child of the daemon, forked every session's shim.
    let launchers: Vec<u32> = children_of(d.up_pid())
        .into_iter()
        .map(|(pid, _)| pid)
        .filter(|pid| std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c.split(|b| *b == 0).any(|w| w == b"shim-launcher")))
        .collect();
    assert_eq!(launchers.len(), 1, "the daemon's launchers: {launchers:?}");
    let launcher = launchers[0];
    let live = children_of(launcher);
    for id in &ids {
        let shim: u32 = std::fs::read_to_string(d.session_dir(id).join("shim.pid")).unwrap().trim().parse().unwrap();
        assert!(live.iter().any(|(pid, _)| *pid == shim), "the shim {shim} of {id} is not the launcher's: {live:?}");
    }
    for id in &ids {
        assert_eq!(d.wait_ended(id, secs(30))["exit_code"], 0);
    }
    // Once a shim has handed over its session and exited, nothing of it stays: no zombie
    // waits on a reaper that is not there.
    support::wait_until("every shim reaped", secs(30), || children_of(launcher).is_empty().then_some(()));
}

//! End-to-end: retention prunes a finished session's recording and events after the
//! window (its summary stays and says so), and never touches a live session, however
//! old.

mod support;

use std::time::Duration;

use support::{secs, wait_until, Split};

#[test]
fn finished_sessions_are_pruned_after_the_window_and_live_ones_never() {
    let s = Split::start_with("keeper", &["--retention-secs", "2", "--prune-secs", "0.3"], &[]);
    let live = s.cli.start(&["sh", "-c", "echo still here; sleep 300"]);
    s.cli.wait_text(&live, "still here", secs(20));
    let done = s.cli.start(&["sh", "-c", "echo short lived"]);
    s.cli.wait_ended(&done, secs(20));
    assert!(s.cli.ok(&["session", "tail", &done]).contains("short lived"));
    let shown = wait_until("the finished session pruned", secs(20), || {
        let v = s.cli.show(&done);
        v["pruned_at"].is_string().then_some(v)
    });
    assert!(shown["ended_at"].is_string() && shown["exit_code"] == 0, "the summary stays: {shown}");
    let err = s.cli.fails(&["session", "tail", &done]);
    assert!(err.contains("was pruned") && err.contains("retention window"), "{err}");
    assert_eq!(s.cli.json(&["session", "events", &done]).as_array().unwrap().len(), 0);
    // The live one, older than the window by now, keeps everything.
    std::thread::sleep(Duration::from_millis(2500));
    let v = s.cli.show(&live);
    assert!(v["pruned_at"].is_null() && v["outcome"] == "running");
    assert!(s.cli.ok(&["session", "tail", &live]).contains("still here"));
    assert!(!s.cli.json(&["session", "events", &live]).as_array().unwrap().is_empty());
    s.cli.ok(&["session", "stop", &live]);
}

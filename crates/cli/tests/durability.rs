//! End-to-end: sessions outlive their viewers, their CLI and their device daemon, and
//! output is delivered exactly once across killed processes and dropped links.

mod support;

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use support::{secs, Drover, Split};

/// A program that prints a known stream slowly enough to be interrupted, keeping a copy.
fn known_stream(copy: &Path, lines: u32) -> Vec<String> {
    let script = format!(
        "i=0; while [ $i -lt {lines} ]; do i=$((i+1)); echo \"line $i of the known stream \\t ✓\"; \
         [ $((i % 50)) -eq 0 ] && sleep 0.05; done | tee {}; sleep 0.3",
        copy.display()
    );
    vec!["sh".into(), "-c".into(), script]
}

fn normalise(raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        if raw[i] == b'\r' && raw.get(i + 1) == Some(&b'\n') {
            i += 1;
            continue;
        }
        out.push(raw[i]);
        i += 1;
    }
    out
}

fn assert_identical(stored: &[u8], copy: &Path) {
    let expected = std::fs::read(copy).expect("the program's own copy");
    let got = normalise(stored);
    assert!(!expected.is_empty());
    if got != expected {
        let at = got.iter().zip(&expected).position(|(a, b)| a != b).unwrap_or(got.len().min(expected.len()));
        panic!(
            "stored output differs from what the program wrote: {} vs {} bytes, first difference at {at}: {:?} vs {:?}",
            got.len(),
            expected.len(),
            String::from_utf8_lossy(&got[at.saturating_sub(40)..(at + 40).min(got.len())]),
            String::from_utf8_lossy(&expected[at.saturating_sub(40)..(at + 40).min(expected.len())]),
        );
    }
}

#[test]
fn killing_the_device_daemon_loses_nothing_and_doubles_nothing() {
    let mut d = Drover::up();
    let work = tempfile::tempdir().unwrap();
    let copy = work.path().join("tee.out");
    let cmd = known_stream(&copy, 3000);
    let args: Vec<&str> = cmd.iter().map(String::as_str).collect();
    let id = d.start(&args);
    d.wait_text(&id, "line 200 of", secs(20));
    let shim_pid: i32 = std::fs::read_to_string(d.session_dir(&id).join("shim.pid")).unwrap().trim().parse().unwrap();

    d.kill_up();
    let at_kill = std::fs::read(&copy).unwrap().len(); // kill -9 of server and device daemon while the program streams
    std::thread::sleep(Duration::from_millis(400));
    assert!(unsafe { libc::kill(shim_pid, 0) } == 0, "the shim died with the daemon");
    d.restart_up();

    let s = d.wait_ended(&id, secs(60));
    assert_eq!(s["outcome"], "incomplete", "{s}");
    assert!(at_kill < std::fs::read(&copy).unwrap().len(), "the daemon was killed after the stream ended; the test proves nothing");
    assert_identical(&d.raw(&id), &copy);
}

#[test]
fn a_session_outlives_its_viewers_cli_and_daemon_and_is_re_adopted() {
    let mut d = Drover::up();
    let id = d.start(&["cat"]);
    d.wait_for(&id, secs(20), |s| s["outcome"] == "running");
    // A viewer that goes away abruptly.
    let mut viewer = d.cmd().args(["session", "attach", &id, "--read-only"]).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    d.wait_for(&id, secs(20), |s| s["attached"] == 1);
    viewer.kill().unwrap();
    viewer.wait().unwrap();
    d.wait_for(&id, secs(20), |s| s["attached"] == 0);

    d.kill_up();
    std::thread::sleep(Duration::from_millis(300));
    d.restart_up();
    let s = d.show(&id);
    assert_eq!(s["outcome"], "running", "{s}");
    // Re-adopted: it still takes input and answers.
    d.ok(&["session", "input", &id, "still here"]);
    d.wait_text(&id, "still here\nstill here", secs(20));
}

#[test]
fn server_and_device_run_apart_and_a_dropped_link_resumes_from_the_stored_offset() {
    let mut split = Split::start("remote1");
    let d = &split.cli;
    let work = tempfile::tempdir().unwrap();
    let copy = work.path().join("tee.out");
    let cmd = known_stream(&copy, 3000);
    let mut args = vec!["session", "start", "--device", "remote1", "--"];
    args.extend(cmd.iter().map(String::as_str));
    let id = d.ok(&args).trim().to_string();
    d.wait_text(&id, "line 200 of", secs(20));

    // Drop the link by killing the server mid-stream; bring it back on the same address.
    split.kill_server();
    let at_kill = std::fs::read(&copy).unwrap().len();
    std::thread::sleep(Duration::from_millis(500));
    split.restart_server();

    let d = &split.cli;
    let s = d.wait_ended(&id, secs(60));
    assert_eq!(s["outcome"], "incomplete", "{s}");
    assert_eq!(s["final_offset"], s["output_bytes"], "the recording reaches the end the device reported: {s}");
    assert!(at_kill < std::fs::read(&copy).unwrap().len(), "the server was killed after the stream ended; the test proves nothing");
    assert_identical(&d.raw(&id), &copy);
    // A device credential cannot be used as a member token.
    let out =
        d.cmd().args(["session", "list"]).env("DROVER_URL", &split.url).env("DROVER_TOKEN", split.device_credential()).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("device credentials can only open the device link"));
}

#[test]
fn a_device_that_disappears_mid_command_gives_a_prompt_clear_error() {
    let mut split = Split::start("flaky");
    // Never reads its input: a large audited input fills the PTY and waits for the device.
    let id = split.cli.ok(&["session", "start", "--device", "flaky", "--", "sleep", "300"]).trim().to_string();
    split.cli.wait_for(&id, secs(20), |s| s["outcome"] == "running");
    let text = "a line of input that the program never reads\n".repeat(1200);
    let input = split.cli.cmd().args(["session", "input", &id, &text]).stderr(Stdio::piped()).spawn().unwrap();
    std::thread::sleep(Duration::from_millis(700));
    let started = std::time::Instant::now();
    split.kill_device();
    let out = input.wait_with_output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("disconnected before confirming delivery"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(5), "the error took {:?}", started.elapsed());
    let err = split.cli.fails(&["session", "input", &id, "again"]);
    assert!(err.contains("device `flaky` is not connected; the input was not sent"), "{err}");
    // The device comes back and re-adopts the session, which kept running.
    split.start_device();
    assert_eq!(split.cli.show(&id)["outcome"], "running");
    split.cli.ok(&["session", "stop", &id]);
}

#[test]
fn starting_on_a_device_that_is_not_connected_says_so() {
    let mut split = Split::start("ghost");
    split.kill_device();
    split.cli.wait_device("ghost", false);
    let err = split.cli.fails(&["session", "start", "--device", "ghost", "--", "true"]);
    assert!(err.contains("device `ghost` is not connected"), "{err}");
    let table = split.cli.ok(&["device", "list"]);
    assert!(table.contains("ghost") && table.contains("offline"), "{table}");
}

/// Makes the server's database refuse (or accept again) every write of output: a
/// trigger that aborts each insert into `output_chunks`, as a failing disk or a broken
/// connection would, while everything else keeps working.
fn refuse_output(home: &Path, refuse: bool) {
    let status = match support::test_database(home) {
        Some(url) => {
            let sql = if refuse {
                "CREATE OR REPLACE FUNCTION test_refuse_output() RETURNS trigger LANGUAGE plpgsql AS $$ \
                 BEGIN RAISE EXCEPTION 'output refused by the test'; END $$; \
                 CREATE TRIGGER test_refuse_output BEFORE INSERT ON output_chunks FOR EACH ROW EXECUTE FUNCTION test_refuse_output();"
            } else {
                "DROP TRIGGER test_refuse_output ON output_chunks;"
            };
            std::process::Command::new("psql").args(["-Xq", "-v", "ON_ERROR_STOP=1", &url, "-c", sql]).status()
        }
        None => {
            let sql = if refuse {
                "CREATE TRIGGER test_refuse_output BEFORE INSERT ON output_chunks BEGIN SELECT RAISE(ABORT, 'output refused by the test'); END;"
            } else {
                "DROP TRIGGER test_refuse_output;"
            };
            let db = home.join("drover.db");
            std::process::Command::new("sqlite3").args(["-bail", "-cmd", ".timeout 10000"]).arg(&db).arg(sql).status()
        }
    };
    assert!(status.expect("sqlite3 / psql").success(), "changing the output trigger failed");
}

/// Runs `cmd` (which keeps a copy of what it prints in `copy`, then exits) while the
/// database refuses output; once it accepts output again, all of it is stored, once.
fn refused_output_is_stored_whole(cmd: Vec<String>, copy: &Path, last: &str) {
    let d = Drover::up();
    refuse_output(d.home.path(), true);
    let args: Vec<&str> = cmd.iter().map(String::as_str).collect();
    let id = d.start(&args);
    // The program prints everything and exits while no output can be stored.
    support::wait_until("the program to finish", secs(30), || std::fs::read_to_string(copy).ok().filter(|t| t.contains(last)).map(|_| ()));
    std::thread::sleep(Duration::from_secs(2));
    let s = d.show(&id);
    // Its end is not recorded ahead of output that is not stored yet, and nothing of it
    // counts as stored.
    assert_eq!(s["outcome"], "running", "{s}");
    assert_eq!(s["output_bytes"], 0, "{s}");

    refuse_output(d.home.path(), false);
    let s = d.wait_ended(&id, secs(60));
    assert_eq!(s["outcome"], "incomplete", "{s}");
    let raw = d.raw(&id);
    assert_identical(&raw, copy);
    assert_eq!(s["output_bytes"].as_u64(), Some(raw.len() as u64), "{s}");
}

#[test]
fn output_the_database_refuses_for_a_while_is_kept_retried_and_stored_whole() {
    let work = tempfile::tempdir().unwrap();
    let copy = work.path().join("tee.out");
    refused_output_is_stored_whole(known_stream(&copy, 2000), &copy, "line 2000 of");
}

#[test]
fn a_link_with_more_refused_output_than_it_may_queue_waits_and_loses_nothing() {
    let work = tempfile::tempdir().unwrap();
    let copy = work.path().join("tee.out");
    // About 19 MB, more than the server queues for one link (16 MiB): the link waits for
    // the database while the program finishes.
    let script =
        format!("head -c 14000000 /dev/urandom | base64 | tee {}; echo the end | tee -a {}; sleep 0.3", copy.display(), copy.display());
    refused_output_is_stored_whole(vec!["sh".into(), "-c".into(), script], &copy, "the end");
}

#[test]
fn a_link_that_ends_holding_refused_output_leaves_it_and_the_end_to_the_next_link() {
    let mut split = Split::start("refused");
    let work = tempfile::tempdir().unwrap();
    let copy = work.path().join("tee.out");
    refuse_output(split.server_home.path(), true);
    let cmd = known_stream(&copy, 2000);
    let mut args = vec!["session", "start", "--device", "refused", "--"];
    args.extend(cmd.iter().map(String::as_str));
    let id = split.cli.ok(&args).trim().to_string();
    support::wait_until("the program to finish", secs(30), || {
        std::fs::read_to_string(&copy).ok().filter(|t| t.contains("line 2000 of")).map(|_| ())
    });
    std::thread::sleep(Duration::from_secs(1));

    // The link ends while the server holds output it could not store, and the end
    // reported behind it: neither is recorded.
    split.kill_device();
    std::thread::sleep(Duration::from_millis(500));
    let s = split.cli.show(&id);
    assert_eq!(s["outcome"], "running", "{s}");
    assert_eq!(s["output_bytes"], 0, "{s}");

    // The next link resends both.
    refuse_output(split.server_home.path(), false);
    split.start_device();
    let s = split.cli.wait_ended(&id, secs(60));
    assert_eq!(s["outcome"], "incomplete", "{s}");
    assert_identical(&split.cli.raw(&id), &copy);
}

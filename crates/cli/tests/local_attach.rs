//! End-to-end: `drover session attach` on the machine a session runs on, as the device's
//! user, takes its bytes and keys straight from the session's shim, while the server
//! still opens the terminal, counts the viewer, says how the session ended, and ends the
//! terminal the moment the right to drop in is gone.

mod support;

use std::time::Duration;

use support::term::Attached;
use support::{secs, Drover, Split};

/// Whether the server counts `n` viewers attached to session `id`.
fn attached(d: &Drover, id: &str, n: u32) -> Option<()> {
    d.ok(&["--json", "session", "show", id]).contains(&format!("\"attached\": {n}")).then_some(())
}

#[test]
fn attach_on_the_sessions_machine_goes_to_its_shim_and_keeps_typing_while_the_device_daemon_is_away() {
    let mut split = Split::start("here");
    let id = split.cli.start(&["cat"]);
    split.cli.wait_for(&id, secs(20), |s| s["outcome"] == "running");
    // The device daemon's home is this machine's Drover home; the member's credential
    // comes from the environment.
    let (url, token) = (split.url.clone(), split.cli.json(&["token", "create", "here"])["token"].as_str().unwrap().to_string());
    let env = [("DROVER_URL", url.as_str()), ("DROVER_TOKEN", token.as_str())];
    let home = split.device_home.path().to_path_buf();
    let mut viewer = Attached::start_in(&home, &env, &id, &[], (80, 24));
    viewer.wait_for("[attached to", secs(20));
    support::wait_until("the server counting the viewer", secs(20), || attached(&split.cli, &id, 1));
    viewer.type_bytes(b"one\r");
    viewer.wait_for("one\r\none", secs(20));

    split.kill_device();
    split.cli.wait_device("here", false);
    // The server's path has no device to hand keys to; the local one does not need it.
    viewer.type_bytes(b"two\r");
    viewer.wait_for("two\r\ntwo", secs(20));
    let mut remote = Attached::start_in(&home, &env, &id, &["--via-server"], (80, 24));
    remote.wait_for("[attached to", secs(20));
    remote.type_bytes(b"three\r");
    remote.wait_for("was not delivered", secs(20));
    drop(remote);
    assert!(!viewer.text().contains("was not delivered"), "{}", viewer.text());

    split.start_device();
    split.cli.ok(&["session", "stop", &id]);
    viewer.wait_for(&format!("[session {id} ended: released, exit code 143: stopped by an operator"), secs(30));
    assert!(viewer.wait_exit(secs(10)), "attach ends cleanly when the session does");
}

#[test]
fn a_local_attach_ends_at_once_when_its_token_is_revoked() {
    let mut split = Split::start("revoked");
    let id = split.cli.start(&["cat"]);
    split.cli.wait_for(&id, secs(20), |s| s["outcome"] == "running");
    let made = split.cli.json(&["token", "create", "revoked-soon"]);
    let token = made["token"].as_str().unwrap().to_string();
    let env = [("DROVER_URL", split.url.as_str()), ("DROVER_TOKEN", token.as_str())];
    let mut viewer = Attached::start_in(split.device_home.path(), &env, &id, &[], (80, 24));
    viewer.wait_for("[attached to", secs(20));
    // Typing reaches cat with the device daemon gone: this attach is on the local path.
    split.kill_device();
    split.cli.wait_device("revoked", false);
    viewer.type_bytes(b"local\r");
    viewer.wait_for("local\r\nlocal", secs(20));

    split.cli.ok(&["token", "revoke", made["info"]["id"].as_str().unwrap()]);
    viewer.wait_for("revoked", secs(10));
    assert!(!viewer.wait_exit(secs(20)), "attach reports the revocation as a failure");
    support::wait_until("the viewer gone", secs(20), || attached(&split.cli, &id, 0));
    split.start_device();
    split.cli.ok(&["session", "stop", &id]);
}

#[test]
fn the_server_sends_a_local_viewer_no_bytes_but_counts_it_and_tells_it_the_end() {
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    let d = Drover::up();
    let id = d.start(&["sh", "-c", "while :; do echo tick; sleep 0.1; done"]);
    d.wait_text(&id, "tick", secs(20));
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let (binary, texts) = rt.block_on(async {
        let (mut sink, mut stream) = support::term::terminal_socket(&d, &id, "local=true").await.split();
        // Asking to re-sync does not get it the screen either.
        sink.send(Message::Text(r#"{"type":"resync"}"#.into())).await.unwrap();
        let (mut binary, mut texts) = (0usize, Vec::new());
        let mut stopped = false;
        let until = tokio::time::Instant::now() + Duration::from_secs(20);
        while let Ok(Some(Ok(msg))) = tokio::time::timeout_at(until, stream.next()).await {
            match msg {
                Message::Binary(b) => binary += b.len(),
                Message::Text(t) => texts.push(t.to_string()),
                Message::Close(_) => break,
                _ => {}
            }
            // Counted as attached while it prints; then the end.
            if !stopped && texts.len() == 1 {
                support::wait_until("the local viewer counted", secs(20), || attached(&d, &id, 1));
                d.ok(&["session", "stop", &id]);
                stopped = true;
            }
        }
        (binary, texts)
    });
    assert_eq!(binary, 0, "no terminal bytes to a local viewer: {texts:?}");
    assert!(texts[0].contains(r#""type":"hello""#), "{texts:?}");
    assert!(texts.iter().any(|t| t.contains(r#""type":"ended""#)), "told of the end: {texts:?}");
}

#[test]
fn a_local_attach_that_reads_slowly_gets_the_whole_tail_after_the_session_ends() {
    use std::io::Read;
    use std::process::Stdio;
    let d = Drover::up();
    // About 18 MB: far more than the sockets and the shim's queue hold for a viewer
    // that does not read.
    let script = "read go; yes 0123456789abcdefghijklmnopqrstuvwxyz | head -n 500000; echo END-OF-OUTPUT";
    let id = d.start(&["sh", "-c", script]);
    d.wait_for(&id, secs(20), |s| s["outcome"] == "running");
    let mut attach =
        d.cmd().args(["session", "attach", &id]).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    support::wait_until("the viewer counted", secs(20), || attached(&d, &id, 1));
    d.ok(&["session", "input", &id, "go"]);
    // Nobody reads attach's output until the session has ended and the device has had
    // time to release the shim.
    d.wait_ended(&id, secs(60));
    std::thread::sleep(Duration::from_secs(2));
    let mut stderr = attach.stderr.take().unwrap();
    let errors = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let mut out = Vec::new();
    attach.stdout.take().unwrap().read_to_end(&mut out).unwrap();
    let status = attach.wait().unwrap();
    let errors = errors.join().unwrap();
    let text = String::from_utf8_lossy(&out);
    let lines = text.matches("0123456789abcdefghijklmnopqrstuvwxyz").count();
    assert_eq!(
        lines,
        500_000,
        "every line reaches the viewer; it ended with {:?} and said {errors:?}",
        &text[text.len().saturating_sub(200)..]
    );
    assert!(text.contains("END-OF-OUTPUT"), "the last line too: {errors:?}");
    assert!(errors.contains(&format!("[session {id} ended: ")), "{errors:?}");
    assert!(status.success(), "{errors:?}");
}

#[test]
fn a_local_attach_hands_its_terminal_to_the_shim_which_echoes_even_while_attach_is_stopped() {
    use nix::sys::signal::{kill, Signal};
    use nix::unistd::Pid;
    let d = Drover::up();
    let id = d.start(&["cat"]);
    d.wait_for(&id, secs(20), |s| s["outcome"] == "running");
    let mut viewer = Attached::start(&d, &id, &[], 80, 24);
    viewer.wait_for("[attached to", secs(20));
    viewer.type_bytes(b"one\r");
    viewer.wait_for("one\r\none", secs(20));
    // Attach can neither read nor write now: only the shim, holding its terminal, can
    // send the keys on and write their echo.
    let attach = Pid::from_raw(viewer.pid() as i32);
    kill(attach, Signal::SIGSTOP).unwrap();
    viewer.type_bytes(b"two\r");
    let until = std::time::Instant::now() + secs(20);
    while !viewer.text().contains("two\r\ntwo") && std::time::Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
    kill(attach, Signal::SIGCONT).unwrap();
    assert!(viewer.text().contains("two\r\ntwo"), "the shim echoes with attach stopped: {:?}", viewer.text());
    // The detach key, read by the shim, hands the terminal back and ends attach.
    viewer.type_bytes(&[0x1d]);
    viewer.wait_for(&format!("[detached from {id}"), secs(20));
    assert!(viewer.wait_exit(secs(10)), "attach ends cleanly on detach");
    assert_eq!(d.show(&id)["outcome"], "running", "detaching leaves the session running");
    assert!(d.raw(&id).ends_with(b"two\r\n"), "nothing after the detach key reached the program");
    // The shim no longer reads that terminal: what is typed there now goes nowhere.
    viewer.type_bytes(b"four\r");
    std::thread::sleep(Duration::from_millis(500));
    assert!(d.raw(&id).ends_with(b"two\r\n"), "the shim let go of the terminal");
}

#[test]
fn the_detach_key_gets_through_while_a_stalled_screen_holds_the_output_back() {
    let d = Drover::up();
    let script = "read go; yes 0123456789abcdefghijklmnopqrstuvwxyz | head -n 20000; exec cat";
    let id = d.start(&["sh", "-c", script]);
    d.wait_for(&id, secs(20), |s| s["outcome"] == "running");
    let mut viewer = Attached::start(&d, &id, &[], 80, 24);
    viewer.wait_for("[attached to", secs(20));
    support::wait_until("the viewer counted", secs(20), || attached(&d, &id, 1));
    // Nothing reads the screen now: 740 KB fill the terminal, and the shim that holds it
    // waits for room.
    viewer.pause_reading(true);
    d.ok(&["session", "input", &id, "go"]);
    support::wait_until("the output recorded", secs(30), || (d.raw(&id).len() > 700_000).then_some(()));
    viewer.type_bytes(&[0x1d]);
    support::wait_until("attach detached with its screen stalled", secs(20), || attached(&d, &id, 0));
    viewer.pause_reading(false);
    viewer.wait_for(&format!("[detached from {id}"), secs(30));
    assert!(viewer.wait_exit(secs(20)), "attach ends cleanly on detach");
    assert_eq!(d.show(&id)["outcome"], "running", "detaching leaves the session running");
}

//! End-to-end: `attach` is a real terminal; late joiners get a snapshot; slow viewers
//! never hold the program back.

mod support;

use std::io::Write;
use std::time::{Duration, Instant};

use support::term::Attached;
use support::{secs, Drover, Split};

#[test]
fn attach_is_an_interactive_terminal_and_typing_is_not_audited() {
    let d = Drover::up();
    let id = d.start(&["cat"]);
    d.wait_for(&id, secs(20), |s| s["outcome"] == "running");
    let mut a = Attached::start(&d, &id, &[], 80, 24);
    d.wait_for(&id, secs(20), |s| s["attached"] == 1);
    a.type_bytes(b"typed by hand\r");
    a.wait_for("typed by hand\r\ntyped by hand", secs(20));
    d.wait_text(&id, "typed by hand\ntyped by hand", secs(20));
    let events = d.json(&["session", "events", &id]);
    assert!(events.as_array().unwrap().iter().all(|e| e["kind"] != "input_sent"), "typing in attach was recorded: {events}");

    // Ctrl-] detaches; the session keeps running.
    a.type_bytes(&[0x1d]);
    assert!(a.wait_exit(secs(20)), "attach exited non-zero: {}", a.text());
    assert!(a.text().contains("detached from"), "{}", a.text());
    assert_eq!(d.show(&id)["outcome"], "running");
}

#[test]
fn window_resizes_propagate_to_the_session() {
    let d = Drover::up();
    let id = d.start(&["sh", "-c", "while :; do stty size; sleep 0.1; done"]);
    d.wait_for(&id, secs(20), |s| s["outcome"] == "running");
    let a = Attached::start(&d, &id, &[], 91, 21);
    a.wait_for("21 91", secs(20));
    a.resize(117, 33);
    a.wait_for("33 117", secs(20));
    let s = d.show(&id);
    assert_eq!((s["cols"].as_u64(), s["rows"].as_u64()), (Some(117), Some(33)));
}

#[test]
fn read_only_viewers_cannot_type() {
    let d = Drover::up();
    let id = d.start(&["cat"]);
    d.wait_for(&id, secs(20), |s| s["outcome"] == "running");
    let mut ro = Attached::start(&d, &id, &["--read-only"], 80, 24);
    d.wait_for(&id, secs(20), |s| s["attached"] == 1);
    ro.type_bytes(b"should not arrive\r");
    d.ok(&["session", "input", &id, "marker"]);
    ro.wait_for("marker", secs(20));
    assert!(!d.ok(&["session", "tail", &id]).contains("should not arrive"));
    ro.type_bytes(&[0x1d]);
    assert!(ro.wait_exit(secs(20)));
}

#[test]
fn several_clients_share_one_session_and_see_each_other() {
    let d = Drover::up();
    let id = d.start(&["cat"]);
    d.wait_for(&id, secs(20), |s| s["outcome"] == "running");
    let mut a = Attached::start(&d, &id, &[], 80, 24);
    let mut b = Attached::start(&d, &id, &[], 80, 24);
    d.wait_for(&id, secs(20), |s| s["attached"] == 2);
    // They take turns line by line (two people typing at the same instant interleave at
    // whatever granularity their terminals send keystrokes, which no server can undo);
    // each sees the other's lines, and everything reaches the program in order.
    for i in 0..20 {
        a.type_bytes(format!("from-a-{i}\r").as_bytes());
        b.wait_for(&format!("from-a-{i}\r\n"), secs(20));
        b.type_bytes(format!("from-b-{i}\r").as_bytes());
        a.wait_for(&format!("from-b-{i}\r\n"), secs(20));
    }
    a.wait_for("from-b-19", secs(20));
    b.wait_for("from-a-19", secs(20));
    // Each line comes back twice: the terminal's echo and cat's copy.
    let deadline = Instant::now() + secs(20);
    let text = loop {
        let text = d.ok(&["session", "tail", &id, "--lines", "1000"]);
        if text.matches("from-a-19\n").count() == 2 && text.matches("from-b-19\n").count() == 2 {
            break text;
        }
        assert!(Instant::now() < deadline, "{text}");
        std::thread::sleep(Duration::from_millis(50));
    };
    // Every line arrived whole (never interleaved mid-line), twice, and each client's
    // lines reached the program in the order they were typed.
    let lines: Vec<&str> = text.lines().collect();
    for who in ["a", "b"] {
        let first: Vec<usize> =
            (0..20).map(|i| lines.iter().position(|l| *l == format!("from-{who}-{i}")).expect("line arrived")).collect();
        assert!(first.windows(2).all(|w| w[0] < w[1]), "{who}: {first:?}");
        assert!((0..20).all(|i| lines.iter().filter(|l| **l == format!("from-{who}-{i}")).count() == 2));
    }
    assert!(text.lines().all(|l| l.is_empty() || l.starts_with("from-a-") || l.starts_with("from-b-")), "{text}");
}

#[test]
fn full_screen_programs_work_through_attach() {
    let d = Drover::up();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("note.txt");
    let id = d.start(&["vim", "-u", "NONE", "-N", "-n", file.to_str().unwrap()]);
    d.wait_for(&id, secs(20), |s| s["outcome"] == "running");
    let mut a = Attached::start(&d, &id, &[], 80, 24);
    a.wait_for("~", secs(20));
    std::thread::sleep(Duration::from_millis(300));
    a.type_bytes(b"iwritten in vim through drover\x1b");
    std::thread::sleep(Duration::from_millis(300));
    a.type_bytes(b":wq\r");
    let s = d.wait_ended(&id, secs(20));
    assert_eq!(s["outcome"], "incomplete", "{s}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "written in vim through drover\n");
}

#[test]
fn a_late_joiner_gets_the_screen_not_a_replay() {
    let d = Drover::up();
    let id = d.start(&["sh", "-c", "seq 1 30000 | sed 's/^/history line /'; echo ALL-PRINTED; sleep 300"]);
    d.wait_text(&id, "ALL-PRINTED", secs(30));
    let total = d.show(&id)["output_bytes"].as_u64().unwrap();
    assert!(total > 400_000, "{total}");
    let a = Attached::start(&d, &id, &["--read-only"], 80, 24);
    a.wait_for("ALL-PRINTED", secs(20));
    std::thread::sleep(Duration::from_millis(500));
    let got = a.output.lock().unwrap().len() as u64;
    assert!(got < 20_000, "the late joiner received {got} bytes of {total}: a replay, not a snapshot");
    let mut screen = vt100::Parser::new(24, 80, 0);
    screen.process(&a.output.lock().unwrap());
    let contents = screen.screen().contents();
    assert!(contents.contains("history line 30000") && contents.contains("ALL-PRINTED"), "{contents}");
    assert!(!contents.contains("history line 29970\n"), "more than a screen was drawn: {contents}");
}

#[test]
fn a_stalled_viewer_never_holds_the_program_or_other_viewers_back() {
    let d = Drover::up();
    let id = d.start(&[
        "sh",
        "-c",
        "sleep 1; yes 'a line of streaming output for the slow viewer test' | head -c 30000000; echo END-OF-STREAM; sleep 300",
    ]);
    d.wait_for(&id, secs(20), |s| s["outcome"] == "running");
    // A viewer that completes the WebSocket handshake and then never reads a byte.
    let cfg: serde_json::Value = serde_json::from_slice(&std::fs::read(d.home.path().join("client.json")).unwrap()).unwrap();
    let host = d.url.trim_start_matches("http://");
    let mut stalled = std::net::TcpStream::connect(host).unwrap();
    write!(
        stalled,
        "GET /api/v1/sessions/{id}/terminal?read_only=true HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nAuthorization: Bearer {}\r\n\r\n",
        cfg["token"].as_str().unwrap()
    )
    .unwrap();
    let live = Attached::start(&d, &id, &["--read-only"], 80, 24);
    d.wait_for(&id, secs(20), |s| s["attached"] == 2);
    // The program streams 30 MB past the stalled viewer; the live viewer sees the end.
    live.wait_for("END-OF-STREAM", secs(120));
    d.wait_text(&id, "END-OF-STREAM", secs(60));
    // Commands to the session during the flood (snapshots, viewer counts) left its link
    // intact: it is still running, not lost.
    assert_eq!(d.show(&id)["outcome"], "running");
    d.ok(&["session", "input", &id, "still answering"]);
    drop(stalled);
}

/// `n` bytes of letters and digits, the same every run.
fn paste(n: usize) -> Vec<u8> {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    let mut x: u32 = 7;
    (0..n)
        .map(|_| {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            ALPHABET[(x >> 16) as usize % ALPHABET.len()]
        })
        .collect()
}

/// A session running `script` after putting its terminal in raw mode without echo, and
/// an attach client to it once the script runs.
fn raw_session(d: &Drover, script: &str) -> (String, Attached) {
    let id = d.start(&["sh", "-c", &format!("stty raw -echo; echo READY; {script}")]);
    let a = Attached::start(d, &id, &[], 80, 24);
    a.wait_for("READY", secs(20));
    (id, a)
}

#[test]
fn a_large_paste_through_attach_arrives_whole_and_in_order() {
    let d = Drover::up();
    let (id, mut a) = raw_session(&d, "head -c 300000 | cksum; sleep 600");
    let data = paste(300_000);
    a.type_bytes(&data);
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), &data).unwrap();
    let expected = std::process::Command::new("cksum").stdin(std::fs::File::open(file.path()).unwrap()).output().unwrap();
    let expected = String::from_utf8(expected.stdout).unwrap();
    d.wait_text(&id, expected.trim(), secs(60));
}

/// Input waits for a program that does not read it without holding up the program's
/// output or its Stop.
#[test]
fn input_waiting_for_a_program_that_does_not_read_holds_up_neither_output_nor_stop() {
    let d = Drover::up();
    let (id, mut a) = raw_session(&d, "while :; do echo tick; sleep 0.1; done");
    // Far more than the terminal holds: most of it waits in the shim for a read that
    // never comes.
    a.type_bytes(&paste(200_000));
    let ticks = || d.ok(&["session", "tail", &id, "--lines", "100000"]).matches("tick").count();
    let before = ticks();
    let deadline = Instant::now() + secs(30);
    while ticks() < before + 10 {
        assert!(Instant::now() < deadline, "the program's output stopped while its input waited");
        std::thread::sleep(Duration::from_millis(100));
    }
    d.ok(&["session", "stop", &id]);
    d.wait_for(&id, secs(20), |s| s["outcome"] != "running");
}

/// A program that never reads its input cannot make its session unstoppable by being
/// sent more than the shim holds (16 MiB): what does not fit is refused, and Stop still
/// comes through.
#[test]
fn more_input_than_the_shim_holds_for_a_program_that_does_not_read_leaves_stop_working() {
    let d = Drover::up();
    let (id, mut a) = raw_session(&d, "while :; do echo tick; sleep 0.1; done");
    let piece = paste(8192);
    for _ in 0..2_500 {
        a.type_bytes(&piece);
    }
    d.ok(&["session", "stop", &id]);
    d.wait_for(&id, secs(30), |s| s["outcome"] != "running");
}

/// The answer a program printed after its `n`th terminal query (see the asker below).
fn answer(d: &Drover, id: &str, n: u32) -> String {
    let text = d.wait_text(id, &format!("GOT{n}:"), secs(20));
    let after = text.split(&format!("GOT{n}:")).nth(1).unwrap_or_default();
    after.split(":END").next().unwrap_or_default().to_string()
}

#[test]
fn terminal_queries_are_left_to_a_viewer_who_types_and_answered_by_the_shim_once_none_does() {
    let mut split = Split::start("asker");
    // Asks for the terminal's attributes twice, each after a line of input, and prints
    // the first answer it reads: the shim's comes at once, a viewer's only when typed.
    let id = split.cli.start(&[
        "bash",
        "-c",
        "stty -icanon -echo; for n in 1 2; do IFS= read -r go; printf '\\033[c'; IFS= read -r -d c reply; echo \"GOT$n:${reply:1}:END\"; done; sleep 600",
    ]);
    // Keys typed while the device still prepares the session are dropped (noted as a
    // gap): type once it runs.
    split.cli.wait_for(&id, secs(20), |s| s["outcome"] == "running");
    let mut viewer = Attached::start(&split.cli, &id, &[], 80, 24);
    viewer.wait_for("[attached to", secs(20));
    viewer.type_bytes(b"go\r");
    viewer.wait_for("\x1b[c", secs(20));
    viewer.type_bytes(b"\x1b[?9;9c");
    assert_eq!(answer(&split.cli, &id, 1), "[?9;9", "the shim answered a query while a viewer could type");

    // The device's daemon goes away, the viewer leaves meanwhile, the daemon comes back:
    // the shim, which kept running, learns that no one types now.
    split.kill_device();
    drop(viewer);
    split.cli.wait_for(&id, secs(20), |s| s["attached"] == 0);
    split.start_device();
    split.cli.ok(&["session", "input", &id, "go"]);
    let second = answer(&split.cli, &id, 2);
    assert!(second.starts_with("[?") && second != "[?9;9", "the shim answers once no viewer can: {second:?}");
    split.cli.ok(&["session", "stop", &id]);
}

#[test]
fn a_quiet_session_packs_its_screen_and_goes_on_exactly_from_it() {
    // Every pause of 50 ms packs the session's screen in the shim.
    let quiet = vec![("DROVER_SCREEN_QUIET_MS".to_string(), "50".to_string())];
    let d = Drover::up_env(tempfile::tempdir().unwrap(), 200, support::test_sandbox_args(), quiet);
    // Colours, a cursor saved (with bold) where nothing is drawn, a full-screen program
    // that leaves, bracketed paste on; then, after the pause, the saved cursor restored.
    let script = r"stty -echo; printf '\033[?1049h\033[Hfull screen\033[?1049l\033[?2004h'; \
        printf 'shell \033[1;31mred\033[m\r\n\033[3;5H\033[1m\0337\033[m\033[H'; read line; \
        printf '\0338RESTORED\033[m plain'; sleep 300";
    let id = d.start(&["sh", "-c", script]);
    d.wait_text(&id, "shell red", secs(30));
    std::thread::sleep(Duration::from_millis(500));
    // Audited input reads the (packed) screen's bracketed-paste mode.
    d.ok(&["session", "input", &id, "go"]);
    d.wait_text(&id, "RESTORED", secs(30));
    std::thread::sleep(Duration::from_millis(500));
    let a = Attached::start(&d, &id, &["--read-only"], 80, 24);
    a.wait_for("RESTORED", secs(20));
    std::thread::sleep(Duration::from_millis(300));
    let mut seen = vt100::Parser::new(24, 80, 0);
    seen.process(&a.output.lock().unwrap());
    let s = seen.screen();
    assert_eq!(s.contents(), "shell red\n\n    RESTORED plain", "the saved cursor survived packing");
    assert!(s.cell(2, 4).unwrap().bold(), "and the attributes saved with it");
    assert!(!s.cell(2, 13).unwrap().bold());
    assert_eq!(s.cell(0, 6).unwrap().fgcolor(), vt100::Color::Idx(1));
    assert!(s.bracketed_paste(), "the input modes survived packing");
}

#[test]
fn a_viewer_that_asks_to_resync_gets_the_screen_again_at_most_every_200_ms() {
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    let d = Drover::up();
    let id = d.start(&["sh", "-c", "printf 'screen-now'; sleep 60"]);
    d.wait_text(&id, "screen-now", secs(20));
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let answers = rt.block_on(async {
        // Read-only: watching is enough to ask.
        let (mut sink, mut stream) = support::term::terminal_socket(&d, &id, "read_only=true").await.split();
        let started = Instant::now();
        // Each resync event, when it came, and whether the screen followed it.
        let mut answers: Vec<(Duration, bool)> = Vec::new();
        let ask = r#"{"type":"resync"}"#;
        sink.send(Message::Text(ask.into())).await.unwrap();
        let until = tokio::time::Instant::now() + Duration::from_secs(3);
        while let Ok(Some(Ok(msg))) = tokio::time::timeout_at(until, stream.next()).await {
            match msg {
                Message::Text(t) if t.contains(r#""type":"resync""#) => answers.push((started.elapsed(), false)),
                Message::Binary(b) if String::from_utf8_lossy(&b).contains("screen-now") => {
                    let first = answers.len() == 1;
                    if let Some(last) = answers.last_mut() {
                        if !last.1 && first {
                            // Answered: ask twice more at once.
                            sink.send(Message::Text(ask.into())).await.unwrap();
                            sink.send(Message::Text(ask.into())).await.unwrap();
                        }
                        last.1 = true;
                    }
                }
                _ => {}
            }
        }
        answers
    });
    // The first at once; the two asked together after it, by one re-sync 200 ms on.
    assert_eq!(answers.len(), 2, "{answers:?}");
    assert!(answers.iter().all(|a| a.1), "a fresh screen follows every resync event: {answers:?}");
    assert!(answers[1].0 - answers[0].0 >= Duration::from_millis(190), "{answers:?}");
    d.ok(&["session", "stop", &id]);
}

#[test]
fn keys_typed_while_the_device_is_away_are_said_to_be_lost_and_reach_the_program_once_it_is_back() {
    let mut split = Split::start("away");
    let id = split.cli.start(&["cat"]);
    split.cli.wait_for(&id, secs(20), |s| s["outcome"] == "running");
    split.kill_device();
    let gone = || (split.cli.json(&["device", "list"])[0]["connected"] == false).then_some(());
    support::wait_until("the device's link gone", secs(20), gone);
    let mut viewer = Attached::start(&split.cli, &id, &[], 80, 24);
    viewer.wait_for("[attached to", secs(20));
    viewer.type_bytes(b"lost\r");
    viewer.wait_for("was not delivered", secs(20));
    // Typing on is not answered key by key.
    viewer.type_bytes(b"more\r");
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(viewer.text().matches("was not delivered").count(), 1, "{}", viewer.text());

    split.start_device();
    let back = || (split.cli.json(&["device", "list"])[0]["connected"] == true).then_some(());
    support::wait_until("the device back", secs(20), back);
    viewer.type_bytes(b"found\r");
    viewer.wait_for("found\r\nfound", secs(20));
    assert!(!viewer.text().contains("lost\r\nlost"), "{}", viewer.text());
    split.cli.ok(&["session", "stop", &id]);
}

#[test]
fn a_viewer_with_a_window_is_sent_no_more_than_it_takes_in_and_then_a_fresh_screen() {
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    let d = Drover::up();
    let flood = "echo ready; read go; yes flood-line | head -c 4000000; echo; echo END-OF-FLOOD; read done";
    let id = d.start(&["sh", "-c", flood]);
    d.wait_text(&id, "ready", secs(20));
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    // The viewer takes in nothing of the flood: it is sent its window's worth, and then
    // nothing while the rest is printed.
    let (mut sink, mut stream, received) = rt.block_on(async {
        let (mut sink, mut stream) = support::term::terminal_socket(&d, &id, "window=65536").await.split();
        sink.send(Message::Binary(b"go\r".to_vec().into())).await.unwrap();
        let (mut received, mut all) = (0usize, Vec::new());
        let until = tokio::time::Instant::now() + Duration::from_secs(20);
        while let Ok(Ok(Some(Ok(msg)))) = tokio::time::timeout_at(until, tokio::time::timeout(Duration::from_secs(3), stream.next())).await
        {
            if let Message::Binary(b) = msg {
                received += b.len();
                all.extend_from_slice(&b[..b.len().min(1024)]);
            }
        }
        assert!(!String::from_utf8_lossy(&all).contains("END-OF-FLOOD"), "the whole flood was sent");
        (sink, stream, received)
    });
    d.wait_text(&id, "END-OF-FLOOD", secs(60));
    // A window, one piece past it (64 KiB at most) and the first screen, of the 4 MB
    // printed.
    assert!(received < 256 * 1024, "a viewer with a 64 KiB window that took nothing in was sent {received} bytes");
    // Done with all of it: a re-sync, and the screen as it is now.
    let fresh = rt.block_on(async {
        let consumed = format!(r#"{{"type":"consumed","bytes":{received}}}"#);
        sink.send(Message::Text(consumed.into())).await.unwrap();
        let (mut resync, mut screen) = (false, Vec::new());
        let until = tokio::time::Instant::now() + Duration::from_secs(20);
        while let Ok(Some(Ok(msg))) = tokio::time::timeout_at(until, stream.next()).await {
            match msg {
                Message::Text(t) if t.contains(r#""type":"resync""#) => resync = true,
                Message::Binary(b) if resync => screen.extend_from_slice(&b),
                _ => {}
            }
            if String::from_utf8_lossy(&screen).contains("END-OF-FLOOD") {
                break;
            }
        }
        (resync, String::from_utf8_lossy(&screen).into_owned())
    });
    assert!(fresh.0, "no resync once the viewer caught up");
    assert!(fresh.1.contains("END-OF-FLOOD"), "the fresh screen shows the flood's end: {:?}", &fresh.1[..fresh.1.len().min(400)]);
    assert!(fresh.1.len() < 64 * 1024, "a screen, not the held-back output: {} bytes", fresh.1.len());
    d.ok(&["session", "stop", &id]);
}

/// Polls the session's stored output until it holds `needle`.
fn wait_raw(d: &Drover, id: &str, needle: &[u8], timeout: Duration) {
    let deadline = Instant::now() + timeout;
    while !d.raw(id).windows(needle.len()).any(|w| w == needle) {
        assert!(Instant::now() < deadline, "timed out waiting for {:?} in {id}", String::from_utf8_lossy(needle));
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A viewer's two halves.
type Halves = (
    futures_util::stream::SplitSink<support::term::TerminalSocket, tokio_tungstenite::tungstenite::Message>,
    futures_util::stream::SplitStream<support::term::TerminalSocket>,
);

/// A session that prints 8 MiB of "clear the screen", then waits for a line and prints
/// `GOT-` and it; and a viewer (as `token`) with a window it does not take in, held back
/// through the flood, which is printed and stored on return. Each four bytes rewrite
/// every cell, so the shim's screen parses them far more slowly than they are printed,
/// and a snapshot taken after them waits for the parser for seconds.
fn held_through_a_slow_screen(d: &Drover, rt: &tokio::runtime::Runtime, token: &str) -> (String, Halves) {
    use futures_util::{SinkExt, StreamExt};
    let flood = r#"echo ready; read go; yes "$(printf '\033[2J')" | tr -d '\n' | head -c 8388608; echo END-OF-FLOOD; read x; echo "GOT-$x"; read done"#;
    let id = d.start(&["sh", "-c", flood]);
    d.wait_text(&id, "ready", secs(20));
    let (mut sink, stream) = rt.block_on(async {
        let (mut sink, stream) = support::term::terminal_socket_as(d, token, &id, "window=65536").await.split();
        sink.send(tokio_tungstenite::tungstenite::Message::Binary(b"go\r".to_vec().into())).await.unwrap();
        (sink, stream)
    });
    wait_raw(d, &id, b"END-OF-FLOOD", secs(60));
    // Done with everything: the server re-syncs the viewer.
    let consumed = r#"{"type":"consumed","bytes":16777216}"#;
    rt.block_on(sink.send(tokio_tungstenite::tungstenite::Message::Text(consumed.into()))).unwrap();
    (id, (sink, stream))
}

#[test]
fn keys_typed_while_a_re_sync_waits_for_its_screen_reach_the_program_at_once() {
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    let d = Drover::up();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let (id, (mut sink, mut stream)) = held_through_a_slow_screen(&d, &rt, &d.token());
    // While the re-sync's screen is on its way, the viewer types.
    let t0 = Instant::now();
    let (screen_at, got_at) = std::thread::scope(|s| {
        let got = s.spawn(|| {
            wait_raw(&d, &id, b"GOT-typed", secs(60));
            Instant::now()
        });
        let screen_at = rt.block_on(async {
            let until = tokio::time::Instant::now() + Duration::from_secs(60);
            let mut resync = false;
            while let Ok(Some(Ok(msg))) = tokio::time::timeout_at(until, stream.next()).await {
                match msg {
                    Message::Text(t) if t.contains(r#""type":"resync""#) => {
                        resync = true;
                        sink.send(Message::Binary(b"typed\r".to_vec().into())).await.unwrap();
                    }
                    Message::Binary(_) if resync => return Instant::now(),
                    _ => {}
                }
            }
            panic!("no re-sync and screen (resync seen: {resync})");
        });
        (screen_at, got.join().unwrap())
    });
    eprintln!("screen after {:?}, program had the keys after {:?}", screen_at - t0, got_at - t0);
    assert!(got_at < screen_at, "the keys waited for the screen: {:?} after it", got_at - screen_at);
    d.ok(&["session", "stop", &id]);
}

#[test]
fn a_viewer_whose_token_is_revoked_during_a_re_sync_is_closed_without_its_screen() {
    use futures_util::StreamExt;
    use tokio_tungstenite::tungstenite::Message;
    let d = Drover::up();
    let owner = d.token();
    let (status, issued) = support::http(&d.url, "POST", "/api/v1/tokens", Some(&owner), br#"{"label":"viewer"}"#);
    assert_eq!(status, 201, "{issued}");
    let issued: serde_json::Value = serde_json::from_str(&issued).unwrap();
    let (token, token_id) = (issued["token"].as_str().unwrap(), issued["info"]["id"].as_str().unwrap());
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let (id, (_sink, mut stream)) = held_through_a_slow_screen(&d, &rt, token);
    let seen = rt.block_on(async {
        let until = tokio::time::Instant::now() + Duration::from_secs(60);
        let (mut resync, mut seen) = (false, Vec::new());
        while let Ok(Some(Ok(msg))) = tokio::time::timeout_at(until, stream.next()).await {
            match msg {
                Message::Text(t) if t.contains(r#""type":"resync""#) && !resync => {
                    resync = true;
                    // The screen is seconds away: the token goes now.
                    let (status, body) = support::http(&d.url, "POST", &format!("/api/v1/tokens/{token_id}/revoke"), Some(&owner), b"");
                    assert_eq!(status, 200, "{body}");
                }
                Message::Text(t) if resync => seen.push(t.to_string()),
                Message::Binary(b) if resync => seen.push(format!("{} bytes of screen", b.len())),
                Message::Close(_) => break,
                _ => {}
            }
        }
        seen
    });
    assert!(seen.first().is_some_and(|m| m.contains("auth expired")), "told why, before any screen: {seen:?}");
    assert!(!seen.iter().any(|m| m.ends_with("bytes of screen")), "no screen after the token was revoked: {seen:?}");
    d.ok(&["session", "stop", &id]);
}

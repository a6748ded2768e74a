//! End-to-end: `session tail` shows what the terminal showed (rendered through a screen
//! model), `--raw` the bytes as they came, and `--follow` prints settled lines as they
//! come, each once.

mod support;

use std::io::Read;
use std::process::Stdio;
use std::time::{Duration, Instant};

use support::{secs, Drover};

/// A sign-in screen that places its words with cursor moves, then a full-screen
/// program that is still showing.
const SCRIPT: &str = r"printf 'If the link doesn'\''t open\033[1Cautomatically,\033[1Cpress\033[1Cc\033[1Cto\033[1Ccopy\033[1Cit\n'; printf 'half\rwhole\n'; printf '\033[?1049h\033[2J\033[HTOP ROW\033[5;3HCPU 42%%'; sleep 600";

#[test]
fn tail_shows_the_screen_as_a_person_saw_it() {
    let d = Drover::up();
    let id = d.start(&["sh", "-c", SCRIPT]);
    let text = support::wait_until("the full-screen part", secs(20), || {
        let t = d.ok(&["session", "tail", &id]);
        t.contains("CPU 42%").then_some(t)
    });
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines,
        ["If the link doesn't open automatically, press c to copy it", "whole", "TOP ROW", "", "", "", "  CPU 42%"],
        "{text}"
    );
    let raw = d.raw(&id);
    assert!(raw.windows(4).any(|w| w == b"\x1b[1C"), "--raw keeps the bytes: {:?}", String::from_utf8_lossy(&raw));
    d.ok(&["session", "stop", &id]);
}

#[test]
fn follow_prints_settled_lines_before_the_end_and_each_once() {
    let d = Drover::up();
    let id = d.start(&["sh", "-c", r"echo first; sleep 5; printf 'x\033[1Cy\n'"]);
    let started = Instant::now();
    let mut tail = d.cmd().args(["session", "tail", &id, "--follow"]).stdout(Stdio::piped()).spawn().unwrap();
    let mut stdout = tail.stdout.take().unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 256];
    while !String::from_utf8_lossy(&got).contains("first\n") {
        let n = stdout.read(&mut buf).unwrap();
        assert!(n > 0, "tail ended early: {:?}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
    }
    // A quiet line-by-line program: its line shows once settled, not at the end.
    assert!(started.elapsed() < Duration::from_millis(4500), "the first line waited for the end");
    stdout.read_to_end(&mut got).unwrap();
    assert!(tail.wait().unwrap().success());
    assert_eq!(String::from_utf8_lossy(&got), "first\nx y\n");
}

#[test]
fn follow_renders_each_part_at_the_size_it_was_written_at() {
    let d = Drover::up();
    // At 40 columns, then (once resized to 90) again: `ESC[999C` goes to the last column.
    let script = r#"printf 'A\033[999CB\n'; while [ "$(stty size)" = "10 40" ]; do sleep 0.05; done; printf 'A\033[999CB\n'; sleep 1"#;
    let id =
        d.ok(&["session", "start", "--device", &d.device, "--cols", "40", "--rows", "10", "--", "sh", "-c", script]).trim().to_string();
    d.wait_text(&id, "B", secs(20));
    // Attaching from a 90x25 terminal resizes the session.
    let _attached = support::term::Attached::start(&d, &id, &[], 90, 25);
    d.wait_ended(&id, secs(20));
    // Followed from the start after the resize: the first line still at its 40 columns.
    let out = d.ok(&["session", "tail", &id, "--follow"]);
    let wide: Vec<&str> = out.lines().filter(|l| l.starts_with('A')).collect();
    assert_eq!(wide, [format!("A{}B", " ".repeat(38)), format!("A{}B", " ".repeat(88))], "{out:?}");
}

//! End-to-end: screen checkpoints. A finished session's Final screen, the screen at any
//! time of its recording and its last lines (`session tail`, of a live session too) come
//! from the nearest checkpoint plus the output after it, and equal what a replay of the
//! whole recording shows — through vim's alternate screen and scroll regions, htop, and
//! resizes.

mod support;

use drover_render::checkpoint::ScreenModel;
use serde_json::Value;
use support::term::Attached;
use support::{http, secs, Drover};

/// About 1.4 MB of lines, then vim scrolling a file (scroll regions, the alternate
/// screen) across the first checkpoint, htop for a few seconds (the test resizes the
/// terminal while it runs), and more lines after, so checkpoints fall inside both
/// full-screen programs and their ends come from a checkpoint's restored main screen.
const SCRIPT: &str = r#"seq 1 200000 | sed 's/$/ \x1b[32mok\x1b[0m/'
vim -N -u NONE -i NONE -n -c 'for i in range(1,1200) | call setline(i, "row ".i." ".repeat("=", i % 70)) | if i % 2 == 0 | execute "normal! G" | redraw | endif | endfor' -c 'normal! gg' -c 'for i in range(1,300) | execute "normal! \<C-e>" | redraw | endfor' -c 'qa!'
echo HTOP-NEXT; sleep 1; timeout 5 htop -d 2 </dev/tty
seq 1 150000
echo ALL-DONE; while [ "$(stty size)" != "20 70" ]; do sleep 0.05; done; echo BYE"#;

/// One event of an asciicast: µs since the start, code, data.
type Event = (u64, String, String);

fn events(cast: &str) -> ((u16, u16), Vec<Event>) {
    let mut lines = cast.lines();
    let header: Value = serde_json::from_str(lines.next().unwrap()).unwrap();
    let size = (header["term"]["cols"].as_u64().unwrap() as u16, header["term"]["rows"].as_u64().unwrap() as u16);
    let mut t = 0u64;
    let mut out = Vec::new();
    for line in lines {
        let ev: Value = serde_json::from_str(line).unwrap();
        t += (ev[0].as_f64().unwrap() * 1e6).round() as u64;
        out.push((t, ev[1].as_str().unwrap().to_string(), ev[2].as_str().unwrap_or("").to_string()));
    }
    (size, out)
}

/// The screen a player shows at `t`: every event at or before it, replayed from the start.
fn replayed(size: (u16, u16), events: &[Event], t: u64) -> ScreenModel {
    let mut m = ScreenModel::new(size.0, size.1);
    for (at, code, data) in events.iter().take_while(|e| e.0 <= t) {
        let _ = at;
        match code.as_str() {
            "o" => m.feed(data.as_bytes()),
            "r" => {
                let (c, r) = data.split_once('x').unwrap();
                m.resize(c.parse().unwrap(), r.parse().unwrap());
            }
            _ => {}
        }
    }
    m
}

/// The lines of `GET /api/v1/sessions/{id}/text{query}`.
fn text(d: &Drover, token: &str, id: &str, query: &str) -> Vec<String> {
    let (status, body) = http(&d.url, "GET", &format!("/api/v1/sessions/{id}/text{query}"), Some(token), b"");
    assert_eq!(status, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    v["lines"].as_array().unwrap().iter().map(|l| l.as_str().unwrap().to_string()).collect()
}

fn count_checkpoints(d: &Drover, id: &str) -> (u64, bool) {
    let sql = format!(
        "SELECT (SELECT COUNT(*) FROM screen_checkpoints WHERE session_id = '{id}'), (SELECT screen_final FROM sessions WHERE id = '{id}')"
    );
    let out = support::database_query(d.home.path(), &sql);
    let mut parts = out.split(|c: char| c == '|' || c.is_whitespace()).filter(|s| !s.is_empty());
    (parts.next().unwrap().parse().unwrap(), parts.next().unwrap() == "1")
}

#[test]
fn checkpoint_and_tail_equal_a_whole_replay_through_vim_htop_and_resizes() {
    let d = Drover::up();
    let id = d.start(&["sh", "-c", SCRIPT]);
    let a = Attached::start(&d, &id, &[], 80, 24);
    a.wait_for("HTOP-NEXT", secs(120));
    std::thread::sleep(std::time::Duration::from_millis(2500));
    a.resize(100, 30);
    a.wait_for("ALL-DONE", secs(120));
    a.resize(70, 20);
    d.wait_ended(&id, secs(60));
    let (count, _) = support::wait_until("the final checkpoint", secs(120), || {
        let c = count_checkpoints(&d, &id);
        c.1.then_some(c)
    });
    assert!(count >= 3, "only {count} checkpoints");

    let (size, events) = events(&d.ok(&["session", "export", &id]));
    assert!(events.iter().any(|e| e.1 == "r"), "no resize was recorded");
    let token = d.token();
    let outputs: Vec<u64> = events.iter().filter(|e| e.1 == "o").map(|e| e.0).collect();
    // Times spread over the recording, each frame's own and a µs before the next.
    let mut times: Vec<u64> = (0..40).map(|i| outputs[i * (outputs.len() - 1) / 39]).collect();
    times.extend(times.clone().iter().map(|t| t.saturating_sub(1)));
    for t in times {
        let (status, body) = http(&d.url, "GET", &format!("/api/v1/sessions/{id}/screen?t={t}"), Some(&token), b"");
        assert_eq!(status, 200, "{body}");
        let want = replayed(size, &events, t);
        let got = ScreenModel::restore(want.size().0, want.size().1, &body);
        if got.lines() != want.lines() {
            eprintln!(
                "MARKS {}",
                support::database_query(
                    d.home.path(),
                    &format!("SELECT t_micros, kind, data FROM recording_marks WHERE session_id = '{id}'")
                )
            );
            eprintln!(
                "CPS {}",
                support::database_query(
                    d.home.path(),
                    &format!("SELECT start_offset, t_micros, cols, rows FROM screen_checkpoints WHERE session_id = '{id}'")
                )
            );
            eprintln!("RESIZES {:?}", events.iter().filter(|e| e.1 == "r").collect::<Vec<_>>());
        }
        assert_eq!(got.lines(), want.lines(), "the screen at {t} µs");
        assert_eq!(got.cursor(), want.cursor(), "the cursor at {t} µs");
        assert_eq!(body, want.dump(), "the state at {t} µs");
    }
    // The Final screen: everything, and every resize.
    let (status, body) = http(&d.url, "GET", &format!("/api/v1/sessions/{id}/screen"), Some(&token), b"");
    assert_eq!(status, 200, "{body}");
    let want = replayed(size, &events, u64::MAX);
    assert_eq!(want.size(), (70, 20));
    assert_eq!(body, want.dump());
    assert!(want.lines().iter().any(|l| l == "ALL-DONE"), "{:?}", want.lines());

    // `session tail` of the finished session: from a checkpoint near the end, the same
    // last lines as the whole text.
    let text = |q: &str| text(&d, &token, &id, q);
    let whole = text("");
    for n in [5, 30, 100] {
        assert_eq!(text(&format!("?lines={n}")), whole[whole.len() - n..], "the last {n} lines");
    }
    assert_eq!(d.ok(&["session", "tail", &id]).lines().last(), Some("BYE"));

    // A session recorded before checkpoints existed gets them built in the background.
    support::database_exec(
        d.home.path(),
        &format!("DELETE FROM screen_checkpoints; UPDATE sessions SET screen_final = 0, checkpointed_to = 0 WHERE id = '{id}'"),
    );
    let (rebuilt, _) = support::wait_until("checkpoints built again", secs(120), || {
        let c = count_checkpoints(&d, &id);
        c.1.then_some(c)
    });
    assert!(rebuilt >= 3, "only {rebuilt} checkpoints rebuilt ({count} made while it ran)");
    let (status, again) = http(&d.url, "GET", &format!("/api/v1/sessions/{id}/screen"), Some(&token), b"");
    assert_eq!((status, again), (200, body));
}

#[test]
fn a_live_sessions_tail_starts_from_a_checkpoint_not_the_beginning() {
    let d = Drover::up();
    // About 1.1 MB of lines, then it stays live.
    let id = d.start(&["sh", "-c", "seq -f 'line %g of a live session' 1 40000; echo LIVE-END; exec sleep 600"]);
    let token = d.token();
    let text = |q: &str| text(&d, &token, &id, q);
    support::wait_until("the output stored", secs(60), || text("").contains(&"LIVE-END".to_string()).then_some(()));
    support::wait_until("checkpoints of the live session", secs(60), || (count_checkpoints(&d, &id).0 >= 3).then_some(()));
    let whole = text("");
    // Its first bytes now switch to the line-drawing character set, which would change
    // every letter after them in a replay from the beginning; a tail from a checkpoint
    // near the end does not read them.
    let tamper = match support::test_database(d.home.path()) {
        Some(_) => "'\\x1b2830'::bytea || substring(data from 4)",
        None => "CAST(X'1b2830' || substr(data, 4) AS BLOB)",
    };
    support::database_exec(
        d.home.path(),
        &format!("UPDATE output_chunks SET data = {tamper} WHERE session_id = '{id}' AND start_offset = 0"),
    );
    assert_ne!(text("")[1..], whole[1..], "the whole text, replayed from the beginning, changed");
    for n in [5, 30, 100] {
        assert_eq!(text(&format!("?lines={n}")), whole[whole.len() - n..], "the last {n} lines of the live session");
    }
    assert_eq!(d.ok(&["session", "tail", &id]).lines().last(), Some("LIVE-END"));
    assert!(d.ok(&["--json", "session", "show", &id]).contains("\"outcome\": \"running\""), "still live");
}

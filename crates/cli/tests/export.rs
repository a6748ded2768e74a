//! End-to-end: `drover session export` writes an asciicast v3 file that asciinema reads
//! as the session was: the size it started at in the header and later sizes as `r`
//! events, the exit at the time the program ended, and the command quoted so a shell
//! reads back the same argv.
//!
//! asciinema 3 is a binary-only crate (no library to depend on), so [`parse`] checks
//! the file against the asciicast v3 format as asciinema's own v3 parser reads it: a
//! header object with `version` 3 and `term.cols`/`term.rows` (u16), then one
//! `[interval, code, data]` array per line, the interval a non-negative number of
//! seconds since the previous event, `r` data `COLSxROWS` (u16s), `x` data an i32.

mod support;

use serde_json::Value;
use support::term::Attached;
use support::{secs, Drover};

/// One event of a cast: absolute time in seconds, code, data.
#[derive(Debug)]
struct CastEvent {
    time: f64,
    code: String,
    data: String,
}

/// Reads a cast as asciinema 3 does, failing on anything it would refuse.
fn parse(cast: &str) -> (Value, Vec<CastEvent>) {
    let mut lines = cast.lines();
    let header: Value = serde_json::from_str(lines.next().expect("a header line")).expect("the header is JSON");
    assert_eq!(header["version"], 3, "{header}");
    for dim in ["cols", "rows"] {
        let n = header["term"][dim].as_u64().unwrap_or_else(|| panic!("term.{dim} missing: {header}"));
        assert!(n <= u16::MAX as u64, "{header}");
    }
    for field in ["command", "title"] {
        assert!(header[field].is_null() || header[field].is_string(), "{header}");
    }
    assert!(header["timestamp"].is_null() || header["timestamp"].is_u64(), "{header}");
    let mut time = 0.0;
    let mut events = Vec::new();
    for line in lines.filter(|l| !l.is_empty() && !l.starts_with('#')) {
        let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}"));
        let [interval, code, data] = v.as_array().map(Vec::as_slice).unwrap_or_default() else { panic!("not [time, code, data]: {line}") };
        let interval = interval.as_f64().unwrap_or_else(|| panic!("interval is not a number: {line}"));
        assert!(interval >= 0.0, "{line}");
        let code = code.as_str().filter(|c| c.chars().count() == 1).unwrap_or_else(|| panic!("code is not one character: {line}"));
        let data = data.as_str().unwrap_or_else(|| panic!("data is not a string: {line}"));
        match code {
            "r" => {
                let (c, r) = data.split_once('x').unwrap_or_else(|| panic!("resize without COLSxROWS: {line}"));
                assert!(c.parse::<u16>().is_ok() && r.parse::<u16>().is_ok(), "{line}");
            }
            "x" => assert!(data.parse::<i32>().is_ok(), "{line}"),
            _ => {}
        }
        time += interval;
        events.push(CastEvent { time, code: code.into(), data: data.into() });
    }
    (header, events)
}

/// What `sh` makes of `line`: its words, as arguments to printf.
fn shell_words(line: &str) -> Vec<String> {
    let out = std::process::Command::new("sh").args(["-c", &format!("printf '%s\\0' {line}")]).output().expect("sh");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    text.split_terminator('\0').map(str::to_string).collect()
}

#[test]
fn export_keeps_the_first_size_the_exit_time_and_the_argv() {
    let d = Drover::up();
    // Starts at 120x40, waits to be resized, says so, and exits two seconds later.
    let script = r#"stty size; while [ "$(stty size)" = "40 120" ]; do sleep 0.05; done; echo "resized to $(stty size)"; sleep 2; exit 3"#;
    let argv = ["sh", "-c", script, "it's $HOME", ""];
    let mut args = vec!["session", "start", "--device", &d.device, "--cols", "120", "--rows", "40", "--"];
    args.extend(argv);
    let id = d.ok(&args).trim().to_string();
    d.wait_text(&id, "40 120", secs(20));
    let mut a = Attached::start(&d, &id, &[], 90, 25);
    a.wait_for("resized to 25 90", secs(20));
    a.type_bytes(&[0x1d]);
    assert!(a.wait_exit(secs(20)));
    let ended = d.wait_ended(&id, secs(20));
    assert_eq!(ended["exit_code"], 3, "{ended}");

    let cast = d.ok(&["session", "export", &id]);
    let (header, events) = parse(&cast);
    assert_eq!((header["term"]["cols"].as_u64(), header["term"]["rows"].as_u64()), (Some(120), Some(40)), "{header}");
    assert_eq!(shell_words(header["command"].as_str().unwrap()), argv, "{header}");
    let resizes: Vec<&str> = events.iter().filter(|e| e.code == "r").map(|e| e.data.as_str()).collect();
    assert_eq!(resizes, ["90x25"], "{cast}");
    let exit = events.last().unwrap();
    assert_eq!((exit.code.as_str(), exit.data.as_str()), ("x", "3"), "{cast}");
    let last_output = events.iter().filter(|e| e.code == "o").map(|e| e.time).fold(0.0, f64::max);
    assert!(exit.time - last_output >= 1.8, "the exit came {:.3} s after the last output: {cast}", exit.time - last_output);
    // `show` quotes the command the same way.
    let shown = d.ok(&["session", "show", &id]);
    let command = shown.lines().find_map(|l| l.strip_prefix("Command")).unwrap().trim();
    assert_eq!(shell_words(command), argv, "{shown}");
}

/// Output merged, marks kept apart: `(code, data)` in order, consecutive output joined
/// (windows and the export may cut output at different points).
fn merged(events: impl Iterator<Item = (String, String)>) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for (code, data) in events {
        match out.last_mut() {
            Some((last, text)) if code == "o" && last == "o" => text.push_str(&data),
            _ => out.push((code, data)),
        }
    }
    out
}

#[test]
fn the_recording_a_window_at_a_time_is_the_export() {
    let d = Drover::up();
    // Over a megabyte of characters of two, three and four bytes (so windows end inside
    // some), a resize in the middle, and a last character cut short.
    let script = r#"i=0; while [ $i -lt 9000 ]; do echo "line $i: é€😀 é€😀 é€😀 é€😀 é€😀 é€😀 é€😀 é€😀 é€😀"; i=$((i+1)); done;
        while [ "$(stty size)" = "40 120" ]; do sleep 0.05; done; echo "resized to $(stty size)";
        i=0; while [ $i -lt 9000 ]; do echo "after $i: é€😀 é€😀 é€😀 é€😀 é€😀 é€😀 é€😀 é€😀"; i=$((i+1)); done; printf 'end \342\202'; exit 3"#;
    let id =
        d.ok(&["session", "start", "--device", &d.device, "--cols", "120", "--rows", "40", "--", "sh", "-c", script]).trim().to_string();
    d.wait_text(&id, "line 8999", secs(60));
    let mut a = Attached::start(&d, &id, &[], 90, 25);
    assert!(a.wait_exit(secs(60)));
    assert_eq!(d.wait_ended(&id, secs(30))["exit_code"], 3);

    let (_, cast) = parse(&d.ok(&["session", "export", &id]));
    let token = d.token();
    let (mut from, mut windows, mut events) = (0u64, 0, Vec::new());
    let length = loop {
        let (status, body) = support::http(&d.url, "GET", &format!("/api/v1/sessions/{id}/recording?from={from}"), Some(&token), b"");
        assert_eq!(status, 200, "{body}");
        let w: Value = serde_json::from_str(&body).unwrap();
        assert_eq!((w["cols"].as_u64(), w["rows"].as_u64(), w["from"].as_u64()), (Some(120), Some(40), Some(from)), "{}", &body[..200]);
        windows += 1;
        for e in w["events"].as_array().unwrap() {
            events.push((e["t_us"].as_u64().unwrap(), e["code"].as_str().unwrap().to_string(), e["data"].as_str().unwrap().to_string()));
        }
        match w["next"].as_u64() {
            Some(next) => from = next,
            None => break w["length_us"].as_u64().unwrap(),
        }
    };
    assert!(windows >= 3, "{windows} windows");
    // Times only go forward, and the same marks come at the same times.
    assert!(events.windows(2).all(|p| p[0].0 <= p[1].0));
    let marks =
        |e: &[(u64, String, String)]| e.iter().filter(|e| e.1 != "o").map(|e| (e.0 / 1000, e.1.clone(), e.2.clone())).collect::<Vec<_>>();
    let cast_marks: Vec<_> =
        cast.iter().filter(|e| e.code != "o").map(|e| (((e.time * 1e6).round() as u64) / 1000, e.code.clone(), e.data.clone())).collect();
    assert_eq!(marks(&events), cast_marks);
    assert_eq!(length / 1000, cast_marks.last().unwrap().0, "the length is the exit's time");
    // The same output, every character whole but the one cut short at the end.
    let from_windows = merged(events.into_iter().map(|(_, c, d)| (c, d)));
    assert_eq!(from_windows, merged(cast.into_iter().map(|e| (e.code, e.data))));
    let text: String = from_windows.iter().filter(|(c, _)| c == "o").map(|(_, d)| d.as_str()).collect();
    assert_eq!(text.matches('\u{fffd}').count(), 1, "only the cut character is replaced");
    assert!(text.ends_with("end \u{fffd}"));

    // Past the end: nothing, and no next window.
    let (status, body) = support::http(&d.url, "GET", &format!("/api/v1/sessions/{id}/recording?from=999999999"), Some(&token), b"");
    assert_eq!(status, 200, "{body}");
    let w: Value = serde_json::from_str(&body).unwrap();
    assert!(w["next"].is_null() && w["events"].as_array().unwrap().iter().all(|e| e["code"] != "o"), "{w}");
    let (status, _) = support::http(&d.url, "GET", &format!("/api/v1/sessions/{id}/recording?from=-1"), Some(&token), b"");
    assert_eq!(status, 400);
}

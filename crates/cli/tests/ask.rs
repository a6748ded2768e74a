//! End-to-end: `session ask` settles on the program's own signal. A shell shows its
//! prompt again when the command is done (readline turns bracketed paste off when it
//! accepts a line and on when it reads the next), so a command that is silent for a
//! while is still waited for, its whole reply comes back, and nothing spills into the
//! next ask. A reply that does not settle in time is reported as such, with a non-zero
//! exit.

mod support;

use support::{secs, Drover};

fn shell(d: &Drover) -> String {
    let id = d.start(&["bash", "--norc", "--noprofile", "-i"]);
    d.wait_text(&id, "bash-", secs(20));
    id
}

#[test]
fn ask_waits_for_the_prompt_through_a_quiet_command() {
    let d = Drover::up();
    let id = shell(&d);
    // Quiet for 2 s, far longer than the stillness time: only the prompt says it is done.
    let reply = d.json(&["session", "ask", &id, "sleep 2; echo first-reply", "--still-ms", "300", "--timeout", "30"]);
    assert_eq!(reply["settled"], true, "{reply}");
    assert_eq!(reply["settled_by"], "prompt", "{reply}");
    assert!(reply["reply"].as_str().unwrap().contains("first-reply"), "{reply}");
    // The next ask gets its own reply, nothing of the first.
    let reply = d.json(&["session", "ask", &id, "echo second-reply", "--still-ms", "300", "--timeout", "30"]);
    let text = reply["reply"].as_str().unwrap();
    assert!(text.contains("second-reply") && !text.contains("first-reply"), "{reply}");
    d.ok(&["session", "stop", &id]);
}

#[test]
fn a_reply_that_does_not_settle_in_time_fails_honestly() {
    let d = Drover::up();
    let id = shell(&d);
    let out = d.run(&["--json", "session", "ask", &id, "echo started; sleep 30", "--still-ms", "300", "--timeout", "3"]);
    assert_eq!(out.status.code(), Some(3), "{}", String::from_utf8_lossy(&out.stderr));
    let reply: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(reply["settled"], false, "{reply}");
    assert!(reply["reply"].as_str().unwrap().contains("started"), "{reply}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no complete reply within 3 s") && err.contains("still busy"), "{err}");
    d.ok(&["session", "stop", &id]);
}

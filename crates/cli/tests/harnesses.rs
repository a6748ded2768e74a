//! The harness presets against the real agent CLIs (installed from npm into
//! `harnesses/node_modules` by `scripts/test`): the command line each preset builds, to
//! start with a prompt and to resume, is accepted by the CLI it names and reaches its
//! first screen inside a Drover session, offline. A made-up flag is the control: the
//! CLI rejects it, so the check can fail.

mod support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use drover_core::harness::{Harness, Route};
use support::{secs, Drover};

fn installed() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../harnesses/node_modules");
    assert!(dir.join(".bin/codex").exists(), "the agent CLIs are not installed: run `cd harnesses && npm ci` (scripts/test does it)");
    dir
}

/// The CLI's executable: Claude Code's native binary comes in a per-platform package.
fn executable(modules: &Path, h: Harness) -> PathBuf {
    match h {
        Harness::Claude => std::fs::read_dir(modules.join("@anthropic-ai"))
            .unwrap()
            .flatten()
            .map(|e| e.path().join("claude"))
            .find(|p| p.parent().unwrap().file_name().unwrap().to_string_lossy().starts_with("claude-code-") && p.exists())
            .expect("Claude Code's platform package"),
        other => modules.join(".bin").join(other.as_str()),
    }
}

/// Runs `argv` in a session; returns its plain text once `done` says so (or the time is up).
fn first_screen(d: &Drover, argv: &[String], done: impl Fn(&str) -> bool) -> String {
    let args: Vec<&str> = argv.iter().map(String::as_str).collect();
    let id = d.start(&args);
    let deadline = Instant::now() + secs(60);
    loop {
        let text = d.ok(&["session", "tail", &id, "-n", "400"]);
        if done(&text) || Instant::now() > deadline {
            let _ = d.run(&["session", "stop", &id]);
            return text;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn with_binary(mut argv: Vec<String>, exe: &Path) -> Vec<String> {
    argv[0] = exe.display().to_string();
    argv
}

#[test]
fn every_preset_command_line_is_accepted_by_the_real_cli() {
    let modules = installed();
    // The CLIs keep their settings under HOME: a fresh one per test run.
    let home = tempfile::tempdir().unwrap();
    // Each test runs in its own process (nextest), so setting HOME touches no other test.
    std::env::set_var("HOME", home.path());
    let d = Drover::up();
    let route = Route { model: Some("test-model-name".into()), ..Route::default() };
    let rejected = |t: &str| t.contains("unknown option") || t.contains("unexpected argument") || t.contains("Unknown argument");
    let cases: [(Harness, &[&str]); 3] = [
        (Harness::Claude, &["Claude Code"]),
        (Harness::Codex, &["Codex"]),
        (Harness::Gemini, &["Gemini", "trust the files in this folder"]),
    ];
    for (h, markers) in cases {
        let exe = executable(&modules, h);
        let shown = |t: &str| rejected(t) || markers.iter().any(|m| t.contains(m));
        let start = with_binary(h.start("say hello", &route, &[]).unwrap(), &exe);
        let text = first_screen(&d, &start, shown);
        assert!(!rejected(&text) && markers.iter().any(|m| text.contains(m)), "{h:?} start {start:?}:\n{text}");
        let resume = with_binary(h.resume(&route).unwrap(), &exe);
        let text = first_screen(&d, &resume, shown);
        assert!(!rejected(&text) && markers.iter().any(|m| text.contains(m)), "{h:?} resume {resume:?}:\n{text}");
    }
    // The control: a flag the CLI does not know is refused, and the check sees it.
    let bogus = vec![executable(&modules, Harness::Claude).display().to_string(), "--no-such-flag-for-drover".to_string()];
    let text = first_screen(&d, &bogus, |t| rejected(t) || t.contains("Claude Code"));
    assert!(rejected(&text), "a bogus flag was not refused:\n{text}");
}

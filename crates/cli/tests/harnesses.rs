//! The harness presets against the real agent CLIs — Claude Code, Codex, Gemini CLI and
//! OpenCode (installed from npm into `harnesses/node_modules`) and Aider (from PyPI into
//! `harnesses/.venv`), both by `scripts/test`: the command line each preset builds, to
//! start with a prompt and to resume, is accepted by the CLI it names and reaches its
//! first screen inside a Drover session, offline. A made-up flag is the control: the
//! CLI rejects it, so the check can fail.

mod support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use drover_core::harness::{with_settings, Harness, Route};
use support::{secs, Drover};

fn installed() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../harnesses/node_modules");
    assert!(dir.join(".bin/codex").exists(), "the agent CLIs are not installed: run `cd harnesses && npm ci` (scripts/test does it)");
    dir
}

/// This machine as npm's platform packages name it (`linux-x64`).
fn platform() -> String {
    let arch = match std::env::consts::ARCH {
        "x86_64" => "x64",
        "aarch64" => "arm64",
        other => other,
    };
    format!("{}-{arch}", std::env::consts::OS)
}

/// The CLI's executable: Claude Code's and OpenCode's native binaries come in
/// per-platform packages (their launchers need install scripts, which are not run).
fn executable(modules: &Path, h: Harness) -> PathBuf {
    let exe = match h {
        Harness::Claude => modules.join(format!("@anthropic-ai/claude-code-{}/claude", platform())),
        Harness::Opencode => modules.join(format!("opencode-{}/bin/opencode", platform())),
        Harness::Aider => modules.join("../.venv/bin/aider"),
        other => modules.join(".bin").join(other.as_str()),
    };
    assert!(exe.exists(), "{} is not installed (scripts/test installs it)", exe.display());
    exe
}

/// Runs `argv` in a session; returns its plain text once `done` says so, the program
/// has exited, or the time is up.
fn first_screen(d: &Drover, cwd: &Path, argv: &[String], done: impl Fn(&str) -> bool) -> String {
    let cwd = cwd.to_str().unwrap();
    let mut args = vec!["session", "start", "--device", &d.device, "--cols", "100", "--rows", "30", "--cwd", cwd, "--"];
    args.extend(argv.iter().map(String::as_str));
    let id = d.ok(&args).trim().to_string();
    let deadline = Instant::now() + secs(60);
    loop {
        let ended = !matches!(d.show(&id)["outcome"].as_str(), Some("starting" | "running"));
        let text = d.ok(&["session", "tail", &id, "-n", "400"]);
        if done(&text) || ended || Instant::now() > deadline {
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
    // Gemini CLI turns non-interactive when `CI` is set (as it is in CI): test the
    // interactive first screen a person sees.
    std::env::remove_var("CI");
    let d = Drover::up();
    // The agents run where a task's would: in a git work tree.
    let work = tempfile::tempdir().unwrap();
    let git = |args: &[&str]| assert!(std::process::Command::new("git").arg("-C").arg(work.path()).args(args).status().unwrap().success());
    git(&["init", "-q", "-b", "main"]);
    git(&["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "start"]);
    let route = Route { model: Some("test-model-name".into()), provider: Some("anthropic".into()), ..Route::default() };
    let rejected = |t: &str| {
        t.contains("unknown option")
            || t.contains("unexpected argument")
            || t.contains("Unknown argument")
            || t.contains("Invalid model format")
            || t.contains("unrecognized arguments")
            || t.contains("Settings file not found")
            || t.contains("Invalid settings")
    };
    let cases: [(Harness, &[&str]); 5] = [
        (Harness::Claude, &["Claude Code"]),
        (Harness::Codex, &["Codex"]),
        // With nothing to resume, Gemini may say so once it has parsed its flags.
        (Harness::Gemini, &["Gemini", "trust the files in this folder", "No previous sessions found"]),
        (Harness::Opencode, &["opencode", "Ask anything", "ctrl+p"]),
        // Aider runs in a git repository (the stand-in for a task's worktree below).
        (Harness::Aider, &["Aider v0.86", "Open documentation url"]),
    ];
    for (h, markers) in cases {
        let exe = executable(&modules, h);
        let shown = |t: &str| rejected(t) || markers.iter().any(|m| t.contains(m));
        let start = with_binary(h.start("say hello", &route, &[]).unwrap(), &exe);
        let text = first_screen(&d, work.path(), &start, shown);
        assert!(!rejected(&text) && markers.iter().any(|m| text.contains(m)), "{h:?} start {start:?}:\n{text}");
        let resume = with_binary(h.resume(&route).unwrap(), &exe);
        let text = first_screen(&d, work.path(), &resume, shown);
        assert!(!rejected(&text) && markers.iter().any(|m| text.contains(m)), "{h:?} resume {resume:?}:\n{text}");
    }
    // A task run's command line also carries what reports its waiting: Claude Code's
    // settings with Drover's hooks and kept rules, Codex's notify program.
    for (h, marker) in [(Harness::Claude, "Claude Code"), (Harness::Codex, "Codex")] {
        let exe = executable(&modules, h);
        let shown = |t: &str| rejected(t) || t.contains(marker);
        for argv in [h.start("say hello", &route, &[]).unwrap(), h.resume(&route).unwrap()] {
            let argv = with_binary(with_settings(h, argv, &["Bash(npm test)".into()]), &exe);
            let text = first_screen(&d, work.path(), &argv, shown);
            assert!(!rejected(&text) && text.contains(marker), "{h:?} with settings {argv:?}:\n{text}");
        }
    }
    // The control: settings that are not JSON are refused, and the check sees it.
    let bogus = vec![executable(&modules, Harness::Claude).display().to_string(), "--settings".into(), "{not json".into()];
    let text = first_screen(&d, work.path(), &bogus, rejected);
    assert!(rejected(&text), "bad settings were not refused:\n{text}");
    // The control: a flag the CLI does not know is refused, and the check sees it.
    for h in [Harness::Claude, Harness::Aider] {
        let bogus = vec![executable(&modules, h).display().to_string(), "--no-such-flag-for-drover".to_string()];
        let text = first_screen(&d, work.path(), &bogus, rejected);
        assert!(rejected(&text), "{h:?}: a bogus flag was not refused:\n{text}");
    }
}

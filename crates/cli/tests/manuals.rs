//! Shell completions and manual pages: `drover completions SHELL` gives a script each
//! shell parses (and bash completes from), and `drover man` gives pages groff reads
//! without a warning, one per visible command; the hidden ones (shim, hook) have none.

mod support;

use std::path::Path;
use std::process::Command;

use support::*;

/// `drover ARGS` run to success; its stdout.
fn drover(args: &[&str]) -> String {
    let out = Command::new(bin()).args(args).output().expect("run drover");
    assert!(out.status.success(), "drover {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("utf-8")
}

/// Runs `shell ARGS FILE`, which must exist and succeed quietly.
fn parses(shell: &str, args: &[&str], file: &Path, package: &str) {
    let out = match Command::new(shell).args(args).arg(file).output() {
        Ok(out) => out,
        Err(e) => panic!("{shell} could not run ({e}): install Debian's `{package}` package (apt-get install {package})"),
    };
    assert!(out.status.success() && out.stderr.is_empty(), "{shell} {args:?} {}: {}", file.display(), String::from_utf8_lossy(&out.stderr));
}

#[test]
fn completion_scripts_parse_in_their_shells() {
    let dir = tempfile::tempdir().unwrap();
    for (shell, check) in [
        ("bash", Some(("bash", &["-n"][..], "bash"))),
        ("zsh", Some(("zsh", &["-n"][..], "zsh"))),
        ("fish", Some(("fish", &["--no-execute"][..], "fish"))),
        ("elvish", None),
        ("powershell", None),
    ] {
        let script = drover(&["completions", shell]);
        assert!(script.contains("session") && script.contains("completions"), "{shell}: no commands in\n{script}");
        let file = dir.path().join(format!("drover.{shell}"));
        std::fs::write(&file, &script).unwrap();
        if let Some((program, args, package)) = check {
            parses(program, args, &file, package);
        }
    }
    let out = Command::new(bin()).args(["completions", "tcsh"]).output().unwrap();
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("possible values"));
}

/// What bash's completion offers after `words` (the last one being completed).
fn bash_offers(script: &Path, words: &[&str]) -> Vec<String> {
    let line = words.join(" ");
    let program = format!(
        "source '{}'; COMP_WORDS=({line}); COMP_CWORD={}; COMP_LINE='{line}'; COMP_POINT=${{#COMP_LINE}}; _drover drover '{}' '{}'; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        script.display(),
        words.len() - 1,
        words[words.len() - 1],
        words[words.len() - 2],
    );
    let out = Command::new("bash").args(["--norc", "--noprofile", "-c", &program]).output().expect("bash");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).lines().filter(|l| !l.is_empty()).map(str::to_string).collect()
}

#[test]
fn bash_completes_commands_but_not_the_hidden_ones() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("drover.bash");
    std::fs::write(&file, drover(&["completions", "bash"])).unwrap();
    assert_eq!(bash_offers(&file, &["drover", "sess"]), ["session"]);
    assert!(bash_offers(&file, &["drover", "session", "st"]).contains(&"start".to_string()));
    assert!(bash_offers(&file, &["drover", "device", "install", "--"]).contains(&"--no-enable".to_string()));
    assert!(bash_offers(&file, &["drover", "sh"]).is_empty(), "the hidden shim is offered");
    assert!(bash_offers(&file, &["drover", "ho"]).is_empty(), "the hidden hook is offered");
    let fish = drover(&["completions", "fish"]);
    assert!(!fish.contains("-a \"shim-launcher\"") && !fish.contains("-a \"hook\""), "fish offers a hidden command");
}

#[test]
fn manual_pages_render_without_warnings_one_per_visible_command() {
    let top = drover(&["man"]);
    assert!(top.starts_with(".ie") || top.starts_with(".TH"), "not roff:\n{top}");
    assert!(top.contains(".TH drover 1"), "{top}");

    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("man1");
    drover(&["man", "--out", out.to_str().unwrap()]);
    let mut pages: Vec<String> = std::fs::read_dir(&out).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    pages.sort();
    for expected in ["drover.1", "drover-session-start.1", "drover-device-install.1", "drover-completions.1", "drover-server.1"] {
        assert!(pages.iter().any(|p| p == expected), "no {expected} in {pages:?}");
    }
    assert!(
        !pages.iter().any(|p| p.starts_with("drover-shim-launcher") || p.starts_with("drover-hook")),
        "a hidden command's page: {pages:?}"
    );
    assert!(!pages.iter().any(|p| p.starts_with("drover-help")), "a page for `help`: {pages:?}");
    let groff = Command::new("groff").arg("--version").output().is_ok_and(|o| o.status.success());
    for page in &pages {
        let path = out.join(page);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains(".TH "), "{page} has no title");
        if groff {
            // -k: through preconv, as man does (the pages are UTF-8).
            let rendered = Command::new("groff").args(["-k", "-man", "-z", "-ww"]).arg(&path).output().unwrap();
            assert!(rendered.status.success() && rendered.stderr.is_empty(), "{page}: {}", String::from_utf8_lossy(&rendered.stderr));
        }
    }
    let session_start = std::fs::read_to_string(out.join("drover-session-start.1")).unwrap();
    assert!(session_start.contains("drover\\-session\\-start") || session_start.contains("drover-session-start"), "{session_start}");
}

#[test]
fn help_never_shows_a_secret_from_the_environment() {
    for (var, args) in [("DROVER_DEVICE_TOKEN", &["device", "--help"][..]), ("DROVER_DATABASE", &["server", "--help"][..])] {
        let out = Command::new(bin()).args(args).env(var, "postgres://u:hunter2secret@db/x").output().unwrap();
        let help = String::from_utf8_lossy(&out.stdout);
        assert!(help.contains(var) && !help.contains("hunter2secret"), "{var}'s value in `drover {args:?}`:\n{help}");
    }
}

//! `drover doctor` end to end, the real binary on this machine: against a running
//! `drover up` every required check is ok and it exits 0; then each failure injected —
//! no git on PATH, a server whose CA the client is not told about, a home it cannot
//! write — exits non-zero, naming the failing check and its fix. `--json` parses.
//!
//! A home that cannot be written, when the tests run as root (who passes every mode
//! check): `DROVER_HOME` is a path beneath a regular file, so nothing can be made there
//! whoever asks. Run as another user, a home of mode 0500 is tried as well.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};

use serde_json::Value;
use support::*;

/// The checks a healthy machine with a running server passes outright.
const REQUIRED: &[&str] = &["server", "tls", "clock", "slots", "pty", "git", "disk", "permissions", "home-writable"];

/// `drover --json doctor ARGS` in `home`, with `env` set: whether it succeeded, and the
/// findings.
fn doctor(home: &Path, args: &[&str], env: &[(&str, &str)]) -> (bool, Vec<Value>) {
    let out = run(home, &[&["--json", "doctor"], args].concat(), env);
    let findings: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("doctor --json printed no JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)));
    let findings = findings.as_array().expect("an array of findings").clone();
    for f in &findings {
        assert!(f["check"].is_string() && f["status"].is_string() && f["detail"].is_string(), "{f}");
        assert!(f.get("fix").is_some(), "{f}");
    }
    (out.status.success(), findings)
}

fn run(home: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(bin());
    c.args(args).env("DROVER_HOME", home).env_remove("DROVER_URL").env_remove("DROVER_TOKEN").env_remove("DROVER_CA_CERT");
    c.envs(env.iter().copied()).output().expect("run drover")
}

/// The bytes free to this user in the file system of `path`.
fn free_bytes(path: &Path) -> u64 {
    let fs = nix::sys::statvfs::statvfs(path).expect("statvfs the home");
    fs.blocks_available().saturating_mul(fs.fragment_size())
}

/// The finding of `check`.
fn finding<'a>(findings: &'a [Value], check: &str) -> &'a Value {
    findings.iter().find(|f| f["check"] == check).unwrap_or_else(|| panic!("no `{check}` check in {findings:#?}"))
}

/// Asserts `check` failed with a fix that says `fix_says`.
fn failed_with(findings: &[Value], check: &str, fix_says: &str) {
    let f = finding(findings, check);
    assert_eq!(f["status"], "fail", "{f}");
    assert!(f["fix"].as_str().is_some_and(|fix| fix.contains(fix_says)), "{f}");
}

#[test]
fn a_healthy_machine_passes_every_required_check() {
    let d = Drover::up();
    let (ok, findings) = doctor(d.home.path(), &[], &[]);
    for check in REQUIRED {
        let f = finding(&findings, check);
        if *check == "disk" && f["status"] == "warn" {
            // A machine short of space is warned, truthfully: CI's has had 1.1 GiB.
            assert!(free_bytes(d.home.path()) < drover_core::doctor::DISK_WARN_BYTES, "{f}");
            continue;
        }
        assert_eq!(f["status"], "ok", "{f}");
        assert!(f["fix"].is_null(), "{f}");
    }
    assert!(ok, "{findings:#?}");
    assert!(finding(&findings, "server")["detail"].as_str().unwrap().contains(env!("CARGO_PKG_VERSION")));
    assert!(finding(&findings, "slots")["detail"].as_str().unwrap().contains("testdev"));
    assert_ne!(finding(&findings, "sandbox")["status"], "fail");
    // Each harness is looked for; a missing one is only a warning.
    for h in ["claude", "codex", "gemini", "aider", "opencode", "goose"] {
        assert_ne!(finding(&findings, &format!("harness:{h}"))["status"], "fail");
    }

    // For people: one line per check, and the count.
    let out = run(d.home.path(), &["doctor"], &[]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.lines().any(|l| l.starts_with("ok") && l.contains("git")), "{text}");
    assert!(text.contains("checks:") && text.contains("0 failed"), "{text}");
}

#[test]
fn a_harness_on_path_is_asked_its_version() {
    let d = Drover::up();
    let bin_dir = tempfile::tempdir().unwrap();
    executable(&bin_dir.path().join("claude"), "#!/bin/sh\necho '9.9.9 (Claude Code)'\n");
    let path = format!("{}:{}", bin_dir.path().display(), std::env::var("PATH").unwrap());
    let (_, findings) = doctor(d.home.path(), &[], &[("PATH", &path)]);
    let f = finding(&findings, "harness:claude");
    assert_eq!(f["status"], "ok", "{f}");
    assert!(f["detail"].as_str().unwrap().contains("9.9.9 (Claude Code)"), "{f}");
}

/// PATH with every directory that holds a `git` left out.
fn path_without_git() -> String {
    let path = std::env::var("PATH").unwrap();
    let kept: Vec<&str> = path.split(':').filter(|dir| !Path::new(dir).join("git").exists()).collect();
    kept.join(":")
}

#[test]
fn no_git_on_path_fails_with_how_to_install_it() {
    let d = Drover::up();
    let (ok, findings) = doctor(d.home.path(), &[], &[("PATH", &path_without_git())]);
    assert!(!ok);
    failed_with(&findings, "git", "install git");
    assert_eq!(finding(&findings, "server")["status"], "ok");

    let out = run(d.home.path(), &["doctor"], &[("PATH", &path_without_git())]);
    assert!(!out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.lines().any(|l| l.starts_with("fail") && l.contains("git")), "{text}");
    assert!(text.contains("fix: install git"), "{text}");
}

/// A `drover server --tls-cert` whose certificate a CA made here signed; killed on drop.
struct TlsServer {
    url: String,
    ca: PathBuf,
    child: Child,
    _dir: tempfile::TempDir,
    _home: tempfile::TempDir,
}

impl TlsServer {
    fn start() -> TlsServer {
        let dir = tempfile::tempdir().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(rcgen::DnType::CommonName, "Doctor test CA");
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let ca = params.self_signed(&ca_key).unwrap();
        let server_key = rcgen::KeyPair::generate().unwrap();
        let leaf = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap().signed_by(&server_key, &ca, &ca_key).unwrap();
        let (ca_path, cert, key) = (dir.path().join("ca.pem"), dir.path().join("server.pem"), dir.path().join("server.key"));
        std::fs::write(&ca_path, ca.pem()).unwrap();
        std::fs::write(&cert, leaf.pem()).unwrap();
        std::fs::write(&key, server_key.serialize_pem()).unwrap();
        let home = tempfile::tempdir().unwrap();
        let args = ["server", "--listen", "127.0.0.1:0", "--tls-cert", cert.to_str().unwrap(), "--tls-key", key.to_str().unwrap()];
        let mut child = spawn_drover_on(home.path(), None, &args);
        let url = read_url(&mut child, "Drover server is running at ");
        TlsServer { url, ca: ca_path, child, _dir: dir, _home: home }
    }
}

impl Drop for TlsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_server_signed_by_a_ca_this_machine_does_not_trust_fails_tls_with_the_fix() {
    let server = TlsServer::start();
    assert!(server.url.starts_with("https://"), "{}", server.url);
    let home = tempfile::tempdir().unwrap();
    let (ok, findings) = doctor(home.path(), &["--server", &server.url], &[]);
    assert!(!ok);
    failed_with(&findings, "tls", "--ca-cert");
    let detail = finding(&findings, "tls")["detail"].as_str().unwrap().to_string();
    assert!(detail.contains("certificate"), "{detail}");
    assert_eq!(finding(&findings, "server")["status"], "fail");

    // Told about the CA, the same server passes.
    let ca = server.ca.to_str().unwrap();
    let (_, findings) = doctor(home.path(), &["--server", &server.url, "--ca-cert", ca], &[]);
    for check in ["server", "tls", "clock"] {
        assert_eq!(finding(&findings, check)["status"], "ok", "{findings:#?}");
    }
    assert!(finding(&findings, "tls")["detail"].as_str().unwrap().contains("ca.pem"));
}

#[test]
fn a_home_that_cannot_be_written_fails_with_the_fix() {
    let d = Drover::up();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, b"not a directory").unwrap();
    let home = file.join("home");
    let (ok, findings) = doctor(&home, &["--server", &d.url], &[]);
    assert!(!ok);
    failed_with(&findings, "home-writable", "DROVER_HOME");
    assert!(finding(&findings, "home-writable")["detail"].as_str().unwrap().contains("is a file"));
    assert_eq!(finding(&findings, "server")["status"], "ok");

    // Where modes bind (not root), a home of mode 0500 is refused the same way.
    if !nix::unistd::geteuid().is_root() {
        use std::os::unix::fs::PermissionsExt;
        let home = dir.path().join("home");
        std::fs::create_dir(&home).unwrap();
        std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o500)).unwrap();
        let (ok, findings) = doctor(&home, &["--server", &d.url], &[]);
        std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o700)).unwrap();
        assert!(!ok);
        failed_with(&findings, "home-writable", "writable");
    }
}

#[test]
fn credentials_open_to_others_fail_with_the_chmod_that_fixes_them() {
    use std::os::unix::fs::PermissionsExt;
    let d = Drover::up();
    let client = d.home.path().join("client.json");
    std::fs::set_permissions(&client, std::fs::Permissions::from_mode(0o644)).unwrap();
    let (ok, findings) = doctor(d.home.path(), &[], &[]);
    std::fs::set_permissions(&client, std::fs::Permissions::from_mode(0o600)).unwrap();
    assert!(!ok);
    failed_with(&findings, "permissions", &format!("chmod 600 {}", client.display()));
}

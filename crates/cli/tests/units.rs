//! Running Drover under systemd: the shipped units (`deploy/systemd/`) pass
//! `systemd-analyze verify`, and `drover device install` writes a unit for an enrolled
//! device whose command starts that daemon from its saved credential, enables it through
//! `systemctl`, and refuses a device that has not enrolled.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use support::*;

/// The repository's `deploy/systemd` folder.
fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/systemd")
}

/// `systemd-analyze verify` on `unit` (without checking its man pages, which are not
/// installed here): panics with its complaints about the unit, warnings included.
fn verify(unit: &Path) {
    let out = match Command::new("systemd-analyze").args(["--man=no", "verify"]).arg(unit).output() {
        Ok(out) => out,
        Err(e) => panic!("systemd-analyze could not run ({e}): install Debian's `systemd` package (apt-get install systemd)"),
    };
    let stderr = String::from_utf8_lossy(&out.stderr);
    let name = unit.file_name().unwrap().to_string_lossy();
    let about_it: Vec<&str> = stderr.lines().filter(|l| l.contains(&*name)).collect();
    assert!(out.status.success() && about_it.is_empty(), "systemd-analyze verify {}: {stderr}", unit.display());
}

/// The shipped unit `name`, its ExecStart pointed at the binary under test (verify checks
/// that the program exists), written into `dir`.
fn shipped(dir: &Path, name: &str) -> (PathBuf, String) {
    let text = std::fs::read_to_string(deploy_dir().join(name)).expect("the shipped unit");
    assert!(text.contains("ExecStart=/usr/local/bin/drover "), "{name} starts /usr/local/bin/drover");
    let path = dir.join(name);
    std::fs::write(&path, text.replace("/usr/local/bin/drover", &bin().display().to_string())).unwrap();
    (path, text)
}

#[test]
fn the_shipped_units_pass_systemd_analyze_verify() {
    let dir = tempfile::tempdir().unwrap();
    for (name, command) in [("drover-server.service", "server"), ("drover-device.service", "device")] {
        let (path, text) = shipped(dir.path(), name);
        verify(&path);
        for line in [
            &format!("ExecStart=/usr/local/bin/drover {command}\n"),
            "User=drover\n",
            "Environment=DROVER_HOME=/var/lib/drover\n",
            "StateDirectory=drover",
            "Restart=on-failure\n",
            "NoNewPrivileges=yes\n",
            "ProtectSystem=strict\n",
            "PrivateTmp=yes\n",
        ] {
            assert!(text.contains(line), "{name} lacks {line:?}");
        }
    }
    // The check is real: a unit whose program is missing fails it.
    let broken = dir.path().join("drover-broken.service");
    let text = std::fs::read_to_string(deploy_dir().join("drover-server.service")).unwrap();
    std::fs::write(&broken, text.replace("/usr/local/bin/drover", "/nonexistent/drover")).unwrap();
    let out = Command::new("systemd-analyze").args(["--man=no", "verify"]).arg(&broken).output().unwrap();
    assert!(!out.status.success(), "verify passed a unit whose program is missing");
}

#[test]
fn the_device_unit_leaves_the_runs_sandbox_room() {
    let text = std::fs::read_to_string(deploy_dir().join("drover-device.service")).unwrap();
    let settings: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
    // Each run enters a user and PID namespace and mounts its own /proc there; harnesses
    // JIT-compile; a PTY needs /dev/ptmx (ProtectClock= and PrivateDevices= close the
    // device list); sessions outlive a restarted daemon.
    for refused in [
        "RestrictNamespaces=",
        "SystemCallFilter=",
        "ProtectKernelTunables=",
        "ProtectKernelLogs=",
        "ProtectProc=",
        "ProcSubset=",
        "MemoryDenyWriteExecute=",
        "ProtectClock=",
        "PrivateDevices=",
        "PrivateUsers=",
        "DevicePolicy=",
    ] {
        assert!(!settings.iter().any(|l| l.starts_with(refused)), "the device unit sets {refused}, which breaks its runs");
    }
    assert!(settings.contains(&"KillMode=process"), "a restarted device daemon must leave its sessions running");
    // The runs' home is outside Drover's, which no run may reach.
    assert!(settings.contains(&"Environment=HOME=/var/lib/drover-agent"));
    assert!(settings.iter().any(|l| l.starts_with("StateDirectory=") && l.contains("drover-agent")));
}

/// `drover device install ARGS` for the device home `home`, units under `config`.
fn install(home: &Path, config: &Path, path: Option<&str>, args: &[&str]) -> std::process::Output {
    let mut c = Command::new(bin());
    c.arg("device").arg("install").args(args).env("DROVER_HOME", home).env("XDG_CONFIG_HOME", config).env_remove("DROVER_CA_CERT");
    if let Some(path) = path {
        c.env("PATH", path);
    }
    c.output().expect("run drover device install")
}

/// The `ExecStart=` words of a unit written by `device install` (its arguments here are
/// all plain words, unquoted).
fn exec_start(unit: &str) -> Vec<String> {
    let line = unit.lines().find_map(|l| l.strip_prefix("ExecStart=")).expect("an ExecStart line");
    assert!(!line.contains('"'), "expected plain words: {line}");
    line.split_whitespace().map(str::to_string).collect()
}

#[test]
fn device_install_writes_a_unit_that_starts_the_enrolled_daemon() {
    let mut split = Split::start("unitbox");
    let credential = split.device_credential();
    let config = tempfile::tempdir().unwrap();
    let home = split.device_home.path().to_path_buf();

    // While the daemon runs, the unit is written but not started next to it.
    let out = install(&home, config.path(), None, &["--user", "--", "--sandbox-write", "/tmp"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("a device daemon runs with DROVER_HOME"), "{stderr}");
    assert!(stderr.contains("systemctl --user daemon-reload && systemctl --user enable --now drover-device.service"), "{stderr}");

    split.kill_device();
    let out = install(&home, config.path(), None, &["--user", "--no-enable", "--", "--sandbox-write", "/tmp"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let path = config.path().join("systemd/user/drover-device.service");
    let unit = std::fs::read_to_string(&path).expect("the unit is written under XDG_CONFIG_HOME");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o644);
    assert!(!unit.contains(&credential) && !unit.contains(&split.token) && !unit.contains("--token"), "a secret in the unit:\n{unit}");
    assert!(unit.contains(&format!("Environment=\"DROVER_HOME={}\"\n", home.display())), "{unit}");
    assert!(unit.contains("WantedBy=default.target"), "{unit}");
    let exe = bin().canonicalize().unwrap().display().to_string();
    let words = exec_start(&unit);
    assert_eq!(words, [exe.as_str(), "device", "--server", &split.url, "--name", "unitbox", "--sandbox-write", "/tmp"]);
    verify(&path);

    // Its command, as systemd would run it, starts the daemon from the saved credential.
    let daemon = Command::new(&words[0])
        .args(&words[1..])
        .env("DROVER_HOME", &home)
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("start the unit's command");
    split.cli.adopt(daemon);
    split.cli.wait_device("unitbox", true);
}

#[test]
fn device_install_refuses_a_device_that_has_not_enrolled() {
    let home = tempfile::tempdir().unwrap();
    let config = tempfile::tempdir().unwrap();
    let out = install(home.path(), config.path(), None, &["--user", "--no-enable"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "installed a device that never enrolled");
    assert!(
        stderr.contains("has not enrolled yet") && stderr.contains("run `drover device --server URL --token T` once first"),
        "{stderr}"
    );
    assert!(!config.path().join("systemd").exists(), "a unit was written");

    // --user or --system, one of them.
    let out = install(home.path(), config.path(), None, &[]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--user"), "{}", String::from_utf8_lossy(&out.stderr));
}

/// A saved credential as an enrolled daemon leaves it (the token is never read here).
fn fake_enrolment(home: &Path) {
    std::fs::create_dir_all(home.join("device-daemon")).unwrap();
    let saved =
        serde_json::json!({ "server": "http://127.0.0.1:9", "name": "box", "enrollment": "x", "token": "drd_secret_never_in_the_unit" });
    std::fs::write(home.join("device-daemon/credential.json"), saved.to_string()).unwrap();
}

#[test]
fn device_install_refuses_a_token_and_arguments_the_daemon_would_refuse() {
    let home = tempfile::tempdir().unwrap();
    fake_enrolment(home.path());
    let config = tempfile::tempdir().unwrap();
    for (args, said) in [
        (&["--user", "--no-enable", "--", "--token", "dre_x"][..], "never holds a token"),
        (&["--user", "--no-enable", "--", "--token=dre_x"][..], "never holds a token"),
        (&["--user", "--no-enable", "--", "--no-such-flag"][..], "would not start with these arguments"),
    ] {
        let out = install(home.path(), config.path(), None, args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && stderr.contains(said), "{args:?}: {stderr}");
    }
    assert!(!config.path().join("systemd").exists(), "a unit was written");
}

#[test]
fn device_install_enables_the_unit_through_systemctl_or_says_what_to_run() {
    let home = tempfile::tempdir().unwrap();
    fake_enrolment(home.path());
    let config = tempfile::tempdir().unwrap();
    let tools = tempfile::tempdir().unwrap();
    let unit = config.path().join("systemd/user/drover-device.service");
    // A recording stand-in for `systemctl` (an external program this test does not
    // claim to cover: there is no systemd manager here), first on PATH.
    let log = tools.path().join("calls");
    executable(&tools.path().join("systemctl"), &format!("#!/bin/sh\necho \"$@\" >>'{}'\n", log.display()));
    let path = format!("{}:/usr/bin:/bin", tools.path().display());
    let out = install(home.path(), config.path(), Some(&path), &["--user"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "--user daemon-reload\n--user enable --now drover-device.service\n");
    assert!(std::fs::read_to_string(&unit).unwrap().contains("ExecStart="));
    assert!(!std::fs::read_to_string(&unit).unwrap().contains("drd_secret_never_in_the_unit"));

    // systemctl failing: the unit stays, and the error says what to run.
    std::fs::remove_file(&unit).unwrap();
    executable(&tools.path().join("systemctl"), "#!/bin/sh\necho 'Failed to connect to bus: No medium found' >&2\nexit 1\n");
    let out = install(home.path(), config.path(), Some(&path), &["--user"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && unit.exists(), "{stderr}");
    assert!(stderr.contains("`systemctl --user daemon-reload` failed") && stderr.contains("No medium found"), "{stderr}");
    assert!(stderr.contains("run: systemctl --user daemon-reload && systemctl --user enable --now drover-device.service"), "{stderr}");

    // No systemctl at all.
    let empty = tempfile::tempdir().unwrap();
    let out = install(home.path(), config.path(), Some(&empty.path().display().to_string()), &["--user"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("cannot run `systemctl --user daemon-reload`"), "{stderr}");
    assert!(stderr.contains("run: systemctl --user daemon-reload"), "{stderr}");
}

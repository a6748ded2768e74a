//! `drover device install --user|--system`: a systemd unit that runs this enrolled
//! device's daemon from its saved credential (never written into the unit), then
//! `systemctl daemon-reload` and `enable --now`.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use clap::Parser;

use crate::args::{Cli, DeviceInstallArgs};
use crate::home;

/// The unit's file name.
const UNIT: &str = "drover-device.service";

/// What `credential.json` says of the device, without its secret.
#[derive(serde::Deserialize)]
struct Enrolled {
    server: String,
    name: String,
}

/// Whether the unit is the user's or the system's.
#[derive(Clone, Copy, PartialEq)]
enum Scope {
    User,
    System,
}

impl Scope {
    /// `systemctl`'s arguments before the verb.
    fn systemctl(self) -> &'static [&'static str] {
        match self {
            Scope::User => &["--user"],
            Scope::System => &[],
        }
    }
}

/// Writes the unit and, unless `--no-enable`, enables and starts it.
pub fn install(args: DeviceInstallArgs, ca_cert: Option<PathBuf>, json: bool) -> Result<()> {
    let scope = if args.system { Scope::System } else { Scope::User };
    let home = absolute(&home::home()?)?;
    let enrolled = enrolled(&home)?;
    check_daemon_args(&enrolled, &args.daemon_args)?;
    let exe = std::env::current_exe().and_then(|e| e.canonicalize()).context("finding the drover binary")?;
    let mut exec = vec![exe.display().to_string(), "device".into(), "--server".into(), enrolled.server.clone()];
    exec.extend(["--name".into(), enrolled.name.clone()]);
    if let Some(ca) = ca_cert {
        exec.extend(["--ca-cert".into(), absolute(&ca)?.display().to_string()]);
    }
    exec.extend(args.daemon_args.iter().cloned());
    let path = unit_path(scope)?;
    let text = unit(scope, &home, &enrolled, &exec)?;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    write_readable(&path, &text)?;
    let enabled = !args.no_enable;
    if enabled {
        enable(scope, &home, &path)?;
    }
    if json {
        return super::print_json(&serde_json::json!({ "unit": path, "enabled": enabled }));
    }
    print_done(scope, &path, &enrolled, enabled);
    Ok(())
}

/// `path` made absolute against the current directory (the unit runs elsewhere).
fn absolute(path: &Path) -> Result<PathBuf> {
    if path.is_absolute() {
        return Ok(path.to_path_buf());
    }
    Ok(std::env::current_dir().context("finding the current directory")?.join(path))
}

/// The server and name this home's device enrolled with, or why it cannot be installed.
fn enrolled(home: &Path) -> Result<Enrolled> {
    let file = home.join("device-daemon").join("credential.json");
    match std::fs::read(&file) {
        Ok(bytes) => serde_json::from_slice(&bytes).with_context(|| format!("{} is not a saved device credential", file.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => bail!(
            "this device has not enrolled yet (no {}): run `drover device --server URL --token T` once first (the token from `drover device add NAME`), then install it",
            file.display()
        ),
        Err(e) => bail!("cannot read {}: {e}", file.display()),
    }
}

/// Refuses daemon arguments that would put a secret in the unit, or that the daemon
/// would refuse when it starts.
fn check_daemon_args(enrolled: &Enrolled, extra: &[String]) -> Result<()> {
    if extra.iter().any(|a| a == "--token" || a.starts_with("--token=")) {
        bail!("the unit never holds a token: the daemon starts from the credential it saved when it enrolled; leave --token out");
    }
    if extra.iter().any(|a| a.chars().any(char::is_control)) {
        bail!("a daemon argument holds a control character (a line break?); give each argument on one line");
    }
    let mut argv = vec!["drover".to_string(), "device".into(), "--server".into(), enrolled.server.clone()];
    argv.extend(["--name".into(), enrolled.name.clone()]);
    argv.extend(extra.iter().cloned());
    match Cli::try_parse_from(&argv) {
        Ok(_) => Ok(()),
        Err(e) => {
            let text = e.to_string();
            let first = text.lines().next().unwrap_or("").trim_start_matches("error: ");
            bail!("the daemon would not start with these arguments: {first}")
        }
    }
}

/// Where the unit goes.
fn unit_path(scope: Scope) -> Result<PathBuf> {
    match scope {
        Scope::User => {
            let config = dirs::config_dir().context("cannot find your configuration directory: set XDG_CONFIG_HOME or HOME")?;
            Ok(config.join("systemd/user").join(UNIT))
        }
        Scope::System => {
            if !nix::unistd::geteuid().is_root() {
                bail!("--system writes /etc/systemd/system/{UNIT}, which needs root: run `sudo --preserve-env=DROVER_HOME drover device install --system`, or install a user service with --user");
            }
            Ok(PathBuf::from("/etc/systemd/system").join(UNIT))
        }
    }
}

/// The unit's text.
fn unit(scope: Scope, home: &Path, enrolled: &Enrolled, exec: &[String]) -> Result<String> {
    let flag = if scope == Scope::User { "--user" } else { "--system" };
    let mut t = format!("# Written by `drover device install {flag}`; run it again to rewrite this file.\n");
    t.push_str("# Settings and secrets (API keys) for the runs: `systemctl");
    t.push_str(if scope == Scope::User { " --user" } else { "" });
    t.push_str(" edit drover-device`, with Environment= or EnvironmentFile= lines.\n");
    t.push_str(&format!("\n[Unit]\nDescription=Drover device daemon ({} on {})\n", enrolled.name, enrolled.server));
    if scope == Scope::System {
        t.push_str("After=network-online.target\nWants=network-online.target\n");
    }
    t.push_str("\n[Service]\nType=simple\n");
    if scope == Scope::System {
        t.push_str(&owner_lines(home)?);
    }
    t.push_str(&format!("Environment={}\n", quote_env("DROVER_HOME", &home.display().to_string())?));
    // The harness CLIs the runs start are found on this PATH, as when run by hand.
    for key in ["PATH", "LANG"] {
        if let Some(v) = std::env::var_os(key).and_then(|v| v.into_string().ok()).filter(|v| !v.is_empty()) {
            t.push_str(&format!("Environment={}\n", quote_env(key, &v)?));
        }
    }
    let exec: Vec<String> = exec.iter().map(|a| quote_arg(a)).collect::<Result<_>>()?;
    t.push_str(&format!("ExecStart={}\n", exec.join(" ")));
    t.push_str("Restart=on-failure\nRestartSec=5s\n");
    t.push_str("# Sessions outlive the daemon (their shims hold them); a restarted daemon picks them up.\nKillMode=process\n");
    t.push_str("NoNewPrivileges=yes\n");
    if scope == Scope::System {
        t.push_str("ProtectSystem=full\n");
        // A private /tmp would hide a home kept there.
        if ![Path::new("/tmp"), Path::new("/var/tmp")].iter().any(|t| home.starts_with(t)) {
            t.push_str("PrivateTmp=yes\n");
        }
    }
    let target = if scope == Scope::User { "default.target" } else { "multi-user.target" };
    t.push_str(&format!("\n[Install]\nWantedBy={target}\n"));
    Ok(t)
}

/// `User=` and `Group=`: the owner of the home, whose files the daemon reads and writes.
fn owner_lines(home: &Path) -> Result<String> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(home).with_context(|| format!("reading {}", home.display()))?;
    if meta.uid() == 0 {
        return Ok(String::new());
    }
    let user = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(meta.uid()))
        .ok()
        .flatten()
        .with_context(|| format!("{} belongs to uid {}, which has no user name", home.display(), meta.uid()))?;
    let group = nix::unistd::Group::from_gid(nix::unistd::Gid::from_raw(meta.gid()))
        .ok()
        .flatten()
        .map(|g| g.name)
        .unwrap_or_else(|| meta.gid().to_string());
    Ok(format!("User={}\nGroup={}\n", quote_arg(&user.name)?, quote_arg(&group)?))
}

/// One `ExecStart=` word: bare when plain, else double-quoted, with systemd's
/// specifiers (`%`) and variables (`$`) escaped so it reaches the daemon as given.
fn quote_arg(arg: &str) -> Result<String> {
    if arg.chars().any(char::is_control) {
        bail!("`{}` holds a control character and cannot go in a unit", arg.escape_debug());
    }
    let plain = !arg.is_empty() && arg.chars().all(|c| c.is_ascii_alphanumeric() || "/._:=@+,-".contains(c));
    if plain {
        return Ok(arg.to_string());
    }
    Ok(format!("\"{}\"", arg.replace('\\', "\\\\").replace('"', "\\\"").replace('%', "%%").replace('$', "$$")))
}

/// One `Environment=` assignment, quoted (systemd expands `%` there, not `$`).
fn quote_env(key: &str, value: &str) -> Result<String> {
    if value.chars().any(char::is_control) {
        bail!("${key} holds a control character and cannot go in a unit");
    }
    Ok(format!("\"{key}={}\"", value.replace('\\', "\\\\").replace('"', "\\\"").replace('%', "%%")))
}

/// Writes `text` to `path`, readable by all (it holds no secret; systemd reads it).
fn write_readable(path: &Path, text: &str) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644)).with_context(|| format!("making {} readable", path.display()))
}

/// `systemctl daemon-reload` and `enable --now`, once no daemon holds this home.
fn enable(scope: Scope, home: &Path, path: &Path) -> Result<()> {
    let commands: Vec<Vec<&str>> = vec![
        scope.systemctl().iter().copied().chain(["daemon-reload"]).collect(),
        scope.systemctl().iter().copied().chain(["enable", "--now", UNIT]).collect(),
    ];
    let to_run = commands.iter().map(|c| format!("systemctl {}", c.join(" "))).collect::<Vec<_>>().join(" && ");
    let daemon_home = home.join("device-daemon");
    if home::lock(&daemon_home).is_err() {
        bail!(
            "wrote {}, but did not start it: a device daemon runs with DROVER_HOME={} now; stop it, then run: {to_run}",
            path.display(),
            home.display()
        );
    }
    for c in &commands {
        let shown = format!("systemctl {}", c.join(" "));
        let why = match Command::new("systemctl").args(c).output() {
            Ok(out) if out.status.success() => continue,
            Ok(out) => format!("`{shown}` failed ({}): {}", out.status, String::from_utf8_lossy(&out.stderr).trim()),
            Err(e) => format!("cannot run `{shown}` ({e}); is this a systemd machine?"),
        };
        bail!("wrote {}, but {why}; once that is fixed, run: {to_run}", path.display());
    }
    Ok(())
}

/// Says what was done and what to run next.
fn print_done(scope: Scope, path: &Path, enrolled: &Enrolled, enabled: bool) {
    let user = if scope == Scope::User { " --user" } else { "" };
    println!("wrote {} (device `{}` on {})", path.display(), enrolled.name, enrolled.server);
    if enabled {
        println!("  enabled and started: systemctl{user} status drover-device; journalctl{user} -u drover-device -f");
    } else {
        println!("  to start it: systemctl{user} daemon-reload && systemctl{user} enable --now {UNIT}");
    }
    if scope == Scope::User {
        println!("  to keep it running while you are logged out (and start it at boot): loginctl enable-linger");
    }
}

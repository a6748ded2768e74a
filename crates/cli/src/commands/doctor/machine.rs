//! The checks of what a device's runs need of this machine: the sandbox (the same probe
//! the device daemon makes), a pseudo-terminal, git, and each harness's CLI. Programs are
//! found on this process's PATH (the daemon's, when run the same way) and asked
//! `--version` directly, with no shell and a time limit.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use drover_core::doctor::{judge_git, Finding};
use drover_core::harness::Harness;

/// How long a program has to say its version.
const VERSION_TIMEOUT: Duration = Duration::from_secs(15);

/// Every machine check: `sandbox`, `pty`, `git`, `harness:NAME`.
pub async fn checks() -> Vec<Finding> {
    let mut out = vec![sandbox(), pty(), git().await];
    let asks = Harness::ALL.into_iter().filter_map(|h| h.program().map(|p| harness(h, p)));
    out.extend(futures_util::future::join_all(asks).await);
    out
}

/// What the kernel lets the device's sandbox use: Landlock is needed; a PID namespace
/// and a pids cgroup make it stronger where the machine allows them.
fn sandbox() -> Finding {
    let abi = match drover_term::confine::kernel_abi() {
        Ok(abi) => abi,
        Err(why) => {
            return Finding::fail(
                "sandbox",
                format!("runs cannot be sandboxed: {why}"),
                "run a kernel with Landlock (Linux 5.13+, landlock in lsm=), or start the device --unsandboxed (runs then reach everything this user can)",
            )
        }
    };
    let probe = drover_term::contain::probe();
    let mechanism = drover_term::confine::mechanism(abi, &probe.containment);
    if probe.missing.is_empty() {
        return Finding::ok("sandbox", mechanism);
    }
    Finding::warn(
        "sandbox",
        format!("{mechanism}; missing: {}", probe.missing.join("; ")),
        "runs are still sandboxed; for the rest allow unprivileged user namespaces and delegate a pids cgroup to the device's user (systemd: Delegate=pids)",
    )
}

/// Opens and closes a real pseudo-terminal, as the shim does for every run.
fn pty() -> Finding {
    match nix::pty::openpty(None, None) {
        Ok(pair) => {
            let name = nix::unistd::ttyname(&pair.slave).map(|p| p.display().to_string()).unwrap_or_else(|_| "a terminal".into());
            Finding::ok("pty", format!("opened and closed {name}"))
        }
        Err(e) => Finding::fail(
            "pty",
            format!("cannot open a pseudo-terminal: {e}"),
            "mount devpts on /dev/pts with /dev/ptmx (in a container, give it a /dev/pts of its own)",
        ),
    }
}

/// The git on PATH and whether it is new enough.
async fn git() -> Finding {
    let Some(path) = on_path("git") else {
        return judge_git(None);
    };
    match version_of(&path).await {
        Ok(answer) => judge_git(Some(&answer)),
        Err(e) => {
            Finding::fail("git", format!("{} --version failed: {e}", path.display()), "reinstall git, or put a working one first on PATH")
        }
    }
}

/// Whether `harness`'s `program` is on PATH and answers. A missing one is a warning:
/// only agents that use it need it.
async fn harness(harness: Harness, program: &'static str) -> Finding {
    let check = format!("harness:{}", harness.as_str());
    let Some(path) = on_path(program) else {
        return Finding::warn(
            &check,
            format!("`{program}` is not on PATH: agents with the {} harness cannot run on this device", harness.as_str()),
            format!("{} (not needed if no agent uses it)", install_hint(harness)),
        );
    };
    match version_of(&path).await {
        Ok(version) => Finding::ok(&check, format!("{}: {version}", path.display())),
        Err(e) => Finding::warn(
            &check,
            format!("{} --version failed: {e}", path.display()),
            format!("check that `{} --version` works for this user, or reinstall it", path.display()),
        ),
    }
}

/// How each harness's CLI is installed.
fn install_hint(harness: Harness) -> &'static str {
    match harness {
        Harness::Claude => "npm install -g @anthropic-ai/claude-code",
        Harness::Codex => "npm install -g @openai/codex",
        Harness::Gemini => "npm install -g @google/gemini-cli",
        Harness::Aider => "pipx install aider-chat",
        Harness::Opencode => "npm install -g opencode-ai",
        Harness::Goose => "install Goose's CLI (see its install guide) and put it on PATH",
        Harness::Custom => "put the command on PATH",
    }
}

/// Where `program` is on this process's PATH, as the shim resolves it.
fn on_path(program: &str) -> Option<PathBuf> {
    let path = std::env::var("PATH").ok();
    drover_term::pty::resolve(program, path.as_deref(), Path::new("/")).ok()
}

/// The first line `program --version` prints; its whole process group is killed if it
/// takes longer than [`VERSION_TIMEOUT`].
async fn version_of(program: &Path) -> Result<String, String> {
    let child = tokio::process::Command::new(program)
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| e.to_string())?;
    let group = child.id();
    let out = match tokio::time::timeout(VERSION_TIMEOUT, child.wait_with_output()).await {
        Ok(out) => out.map_err(|e| e.to_string())?,
        Err(_) => {
            if let Some(pid) = group.and_then(|p| i32::try_from(p).ok()) {
                let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
            }
            return Err(format!("no answer within {} s", VERSION_TIMEOUT.as_secs()));
        }
    };
    let first = |b: &[u8]| String::from_utf8_lossy(b).lines().map(str::trim).find(|l| !l.is_empty()).map(|l| l.chars().take(120).collect());
    match (out.status.success(), first(&out.stdout).or_else(|| first(&out.stderr))) {
        (true, Some(line)) => Ok(line),
        (true, None) => Ok("(it printed no version)".into()),
        (false, line) => Err(format!("{}{}", out.status, line.map(|l| format!(": {l}")).unwrap_or_default())),
    }
}

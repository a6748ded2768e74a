//! What the device puts a run in: the sandbox this machine offers, the environment a run
//! is given, and the filesystem grants of its policy, gathered here (directory listings,
//! PATH, git's common directory) and judged by the rules in `drover_core::confinement`.
//! The shim enforces the result.

use std::path::{Path, PathBuf};

use drover_core::confinement::{self, Access, Decision, Fit, Grant, Offer, Policy};
use drover_protocol::shim::SessionSpec;

use crate::config::DeviceConfig;
use crate::worktree::GitDirs;

/// What this machine lets a run's processes be held in, found once by trying it.
pub fn containment() -> &'static drover_term::contain::Probe {
    static PROBE: std::sync::OnceLock<drover_term::contain::Probe> = std::sync::OnceLock::new();
    PROBE.get_or_init(|| {
        let probe = drover_term::contain::probe();
        for missing in &probe.missing {
            tracing::warn!("runs on this device get {missing}");
        }
        probe
    })
}

/// What this device does with its runs, from its kernel and its owner's word.
pub fn offer(config: &DeviceConfig) -> Offer {
    let kernel = drover_term::confine::kernel_abi();
    let contain = &containment().containment;
    match (config.sandbox.unsandboxed, kernel) {
        (true, Ok(abi)) => Offer::Unsandboxed { kernel: drover_term::confine::mechanism(abi, contain) },
        (true, Err(why)) => Offer::Unsandboxed { kernel: why },
        (false, Ok(abi)) => {
            let mechanism = drover_term::confine::mechanism(abi, contain);
            let mechanism = match config.sandbox.unix_sockets {
                true => mechanism.replace("no Unix sockets of its own", "Unix sockets allowed (--sandbox-unix-sockets)"),
                false => mechanism,
            };
            Offer::Sandboxed { mechanism }
        }
        (false, Err(reason)) => Offer::Unavailable { reason },
    }
}

/// Prepares `spec` to be started: the environment it is given and, unless it runs
/// unconfined, its sandbox. Err is why the run is refused (the session's reason).
pub fn prepare(config: &DeviceConfig, offer: &Offer, spec: &mut SessionSpec, tmp: &Path, git: Option<&GitDirs>) -> Result<(), String> {
    spec.env = environment(&spec.env, &config.sandbox.pass_env, tmp);
    let can_confine = matches!(offer, Offer::Sandboxed { .. });
    let decision = confinement::decide(can_confine, config.sandbox.unsandboxed, spec.unconfined);
    // A session started without --cwd works in a fresh private directory when sandboxed
    // (the home directory's dotfiles run outside the sandbox), in $HOME when not.
    if spec.cwd.is_empty() {
        spec.cwd = match decision {
            Decision::Confined => tmp.display().to_string(),
            Decision::Unconfined | Decision::Refuse => config.default_cwd.display().to_string(),
        };
    }
    spec.policy = match decision {
        Decision::Confined => Some(policy(config, spec, tmp, git)?),
        Decision::Unconfined => None,
        Decision::Refuse => {
            return Err(format!(
                "this device cannot sandbox runs ({}): its owner can start it with --unsandboxed to run them anyway",
                match offer {
                    Offer::Unavailable { reason } => reason.clone(),
                    other => other.describe(),
                }
            ))
        }
    };
    Ok(())
}

/// The run's whole environment: the daemon's variables that runs may inherit (and those
/// the device's owner passes on), then what the server gave it (only Drover's own run
/// variables of the `DROVER_` family), and its private temp directory.
pub fn environment(given: &[(String, String)], pass_env: &[String], tmp: &Path) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = std::env::vars().filter(|(k, _)| confinement::env_inherited(k, pass_env)).collect();
    for (k, v) in given {
        if k.starts_with("DROVER_") && !confinement::RUN_VARIABLES.contains(&k.as_str()) {
            continue;
        }
        env.retain(|(e, _)| e != k);
        env.push((k.clone(), v.clone()));
    }
    for k in ["TMPDIR", "TMP", "TEMP"] {
        env.retain(|(e, _)| e != k);
        env.push((k.to_string(), tmp.display().to_string()));
    }
    env
}

/// The grants of a run of `spec`: its working directory, its private temp, its
/// harness's state, what git needs of a task worktree's clone (`git`), the owner's
/// additions, and the system to read. Nothing inside Drover's home but the run's own
/// islands.
pub fn policy(config: &DeviceConfig, spec: &SessionSpec, tmp: &Path, git: Option<&GitDirs>) -> Result<Policy, String> {
    let protected: Vec<PathBuf> = config.protected.iter().map(|p| canonical(p).unwrap_or_else(|| p.clone())).collect();
    let islands: Vec<PathBuf> = [config.worktrees_dir(), tmp.to_path_buf()].iter().filter_map(|p| canonical(p)).collect();
    let mut g = Grants { protected, islands, out: Vec::new() };
    let cwd = canonical(Path::new(&spec.cwd)).ok_or_else(|| format!("working directory {} does not exist", spec.cwd))?;
    let home = std::env::var_os("HOME").map(PathBuf::from).or_else(dirs::home_dir);
    check_cwd(&g, &cwd, home.as_deref())?;
    g.add(&cwd, Access::Write);
    g.add(tmp, Access::Write);
    if let Some(dirs) = git {
        g.add_git(dirs);
    }
    g.add_harness_state(spec, home.as_deref());
    g.add_owner_and_system(config);
    g.add_tools(spec, &cwd);
    Ok(Policy {
        grants: g.out,
        limits: config.sandbox.limits,
        unix_sockets: config.sandbox.unix_sockets,
        contain: containment().containment.clone(),
    })
}

/// Refuses a working directory that is inside Drover's home, holds it, or holds the
/// user's home.
fn check_cwd(g: &Grants, cwd: &Path, home: Option<&Path>) -> Result<(), String> {
    let holds_home = home.and_then(canonical).is_some_and(|h| h.starts_with(cwd));
    match confinement::fit(cwd, &g.protected, &g.islands) {
        Fit::Refuse => {
            Err(format!("working directory {} is inside Drover's home, which no run may reach: choose another --cwd", cwd.display()))
        }
        Fit::Split => Err(format!("working directory {} holds Drover's home, which no run may reach: choose a project folder with --cwd", cwd.display())),
        Fit::Grant if holds_home => Err(format!(
            "working directory {} holds your home directory, whose dotfiles run outside the sandbox: choose a project folder with --cwd (an owner or admin can start it --unconfined)",
            cwd.display()
        )),
        Fit::Grant => Ok(()),
    }
}

impl Grants {
    /// What git needs of a task worktree's clone. A commit writes objects, refs and their
    /// logs into the clone, and the worktree's own index and HEAD; the clone's config and
    /// hooks, which the device's git reads, stay read-only.
    fn add_git(&mut self, dirs: &GitDirs) {
        self.add(&dirs.common, Access::Read);
        for d in ["objects", "refs", "logs"] {
            self.add(&dirs.common.join(d), Access::Write);
        }
        self.add(&dirs.git_dir, Access::Write);
    }

    /// The run's harness's state directories (made if missing, so it can keep its state
    /// there), those its own variables move elsewhere, and the dotfiles read from home.
    fn add_harness_state(&mut self, spec: &SessionSpec, home: Option<&Path>) {
        if let Some(home) = home {
            for d in spec.harness.map(confinement::state_dirs).unwrap_or_default() {
                let dir = home.join(d);
                if !dir.exists() && confinement::fit(&dir, &self.protected, &self.islands) == Fit::Grant {
                    if let Err(e) = std::fs::create_dir_all(&dir) {
                        tracing::warn!(dir = %dir.display(), "could not create the harness's state directory: {e}");
                    }
                }
            }
            for d in confinement::state_dirs_for(spec.harness) {
                self.add(&home.join(d), Access::Write);
            }
        }
        // State moved elsewhere by the harness's own variables, as the run is given them.
        for v in confinement::state_variables_for(spec.harness) {
            if let Some((_, dir)) = spec.env.iter().find(|(k, _)| k == v).filter(|(_, d)| d.starts_with('/')) {
                self.add(Path::new(dir), Access::Write);
            }
        }
        if let Some(home) = home {
            for d in confinement::HOME_READ {
                self.add(&home.join(d), Access::Read);
            }
        }
    }

    /// The owner's additions, then the system to read and its devices.
    fn add_owner_and_system(&mut self, config: &DeviceConfig) {
        for d in &config.sandbox.write {
            self.add(d, Access::Write);
        }
        for d in &config.sandbox.read {
            self.add(d, Access::Read);
        }
        for d in confinement::SYSTEM_READ {
            self.add(Path::new(d), Access::Read);
        }
        for d in confinement::SYSTEM_DEVICES {
            self.add(Path::new(d), Access::Devices);
        }
        self.add(Path::new(confinement::SYSTEM_SHARED_MEMORY), Access::Write);
    }

    /// Tools on PATH and the program, with their installs. What a run can write (its own
    /// directory, a previous run's leftovers) is given as it is: links and settings found
    /// there choose nothing more.
    fn add_tools(&mut self, spec: &SessionSpec, cwd: &Path) {
        let path = spec.env.iter().find(|(k, _)| k == "PATH").map(|(_, v)| v.clone()).unwrap_or_default();
        for dir in path.split(':').filter(|d| d.starts_with('/')).filter_map(|d| canonical(Path::new(d))) {
            let derived = if self.writable(&dir) { vec![dir.clone()] } else { tool_dirs(&dir) };
            for p in derived {
                self.add_exact(&p, Access::Read);
            }
        }
        if let Some(program) = spec.command.first().filter(|p| p.contains('/')).and_then(|p| canonical(&cwd.join(p))) {
            let derived = if self.writable(&program) { vec![program.clone()] } else { install(&program) };
            for p in derived {
                self.add_exact(&p, Access::Read);
            }
        }
    }
}

/// Grants being gathered, each judged against what must stay out of reach.
struct Grants {
    protected: Vec<PathBuf>,
    islands: Vec<PathBuf>,
    out: Vec<Grant>,
}

impl Grants {
    /// Whether the run may write `path` (so what lies there is the run's to choose).
    fn writable(&self, path: &Path) -> bool {
        self.out.iter().any(|g| g.access == Access::Write && path.starts_with(&g.path))
    }

    /// Grants `path` only if it holds nothing protected (a path found in links or
    /// settings is never split around Drover's home).
    fn add_exact(&mut self, path: &Path, access: Access) {
        let Some(path) = canonical(path) else { return };
        if confinement::fit(&path, &self.protected, &self.islands) == Fit::Grant {
            self.out.push(Grant { path: path.display().to_string(), access });
        }
    }

    fn add(&mut self, path: &Path, access: Access) {
        let Some(path) = canonical(path) else { return };
        self.add_canonical(&path, access, 0);
    }

    fn add_canonical(&mut self, path: &Path, access: Access, depth: usize) {
        match confinement::fit(path, &self.protected, &self.islands) {
            Fit::Grant => self.out.push(Grant { path: path.display().to_string(), access }),
            Fit::Refuse => tracing::debug!(path = %path.display(), "not granted: inside Drover's home"),
            // Each entry instead, so the protected one is left out (paths are canonical:
            // a symlink's target is judged, not its name).
            Fit::Split if depth < 32 => {
                self.out.push(Grant { path: path.display().to_string(), access: Access::List });
                let Ok(entries) = std::fs::read_dir(path) else { return };
                for e in entries.flatten() {
                    if let Some(p) = canonical(&e.path()) {
                        self.add_canonical(&p, access, depth + 1);
                    }
                }
            }
            Fit::Split => {}
        }
    }
}

/// The directories a tool on PATH needs to read besides `dir` itself: a `bin` folder's
/// parent (a virtualenv's or a Node install's libraries), and the installs of what the
/// folder's links point to (npm's `.bin` links into packages).
fn tool_dirs(dir: &Path) -> Vec<PathBuf> {
    let mut out = vec![dir.to_path_buf()];
    let system = confinement::SYSTEM_READ.iter().any(|s| dir.starts_with(s));
    if system {
        return out;
    }
    if matches!(dir.file_name().and_then(|n| n.to_str()), Some("bin" | ".bin")) {
        if let Some(parent) = dir.parent() {
            out.push(parent.to_path_buf());
        }
    }
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten().take(4096) {
            if e.file_type().is_ok_and(|t| t.is_symlink()) {
                for p in canonical(&e.path()).map(|t| install(&t)).unwrap_or_default() {
                    if !out.contains(&p) {
                        out.push(p);
                    }
                }
            }
        }
    }
    out
}

/// What a program at `program` (canonical) needs to read to run: the whole
/// `node_modules` it lives in (its dependencies sit beside it), or the install a `bin`
/// folder belongs to (and, for a Python virtualenv, the Python it was made from); a
/// program anywhere else is given alone.
fn install(program: &Path) -> Vec<PathBuf> {
    if let Some(modules) = program.ancestors().filter(|a| a.file_name().is_some_and(|n| n == "node_modules")).last() {
        return vec![modules.to_path_buf()];
    }
    let Some(parent) = program.parent() else { return vec![program.to_path_buf()] };
    if parent.file_name().is_some_and(|n| n == "bin") {
        let root = parent.parent().unwrap_or(parent).to_path_buf();
        let mut out = vec![root.clone()];
        // A virtualenv's interpreter is a link to the Python it was made from.
        if let Ok(cfg) = std::fs::read_to_string(root.join("pyvenv.cfg")) {
            let home =
                cfg.lines().filter_map(|l| l.split_once('=')).find(|(k, _)| k.trim() == "home").map(|(_, v)| PathBuf::from(v.trim()));
            if let Some(python) = home.and_then(|h| canonical(&h)).and_then(|h| h.parent().map(Path::to_path_buf)) {
                out.push(python);
            }
        }
        return out;
    }
    vec![program.to_path_buf()]
}

fn canonical(p: &Path) -> Option<PathBuf> {
    std::fs::canonicalize(p).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_keeps_the_allow_list_and_the_runs_own_variables() {
        std::env::set_var("DROVER_HOME", "/secret/home");
        std::env::set_var("ANTHROPIC_API_KEY", "sk-test");
        std::env::set_var("SOME_DAEMON_SECRET", "x");
        let given = vec![("DROVER_TOKEN".to_string(), "drs_x".to_string()), ("DROVER_HOME".to_string(), "/nope".to_string())];
        let env = environment(&given, &[], Path::new("/tmp/run"));
        let get = |k: &str| env.iter().find(|(e, _)| e == k).map(|(_, v)| v.as_str());
        assert_eq!(get("DROVER_HOME"), None);
        assert_eq!(get("SOME_DAEMON_SECRET"), None);
        assert_eq!(get("ANTHROPIC_API_KEY"), Some("sk-test"));
        assert_eq!(get("DROVER_TOKEN"), Some("drs_x"));
        assert_eq!(get("TMPDIR"), Some("/tmp/run"));
        let passed = environment(&[], &["SOME_DAEMON_SECRET".into()], Path::new("/t"));
        assert!(passed.iter().any(|(k, _)| k == "SOME_DAEMON_SECRET"));
    }

    #[test]
    fn a_programs_install_is_what_it_needs_to_read() {
        let p = |s: &str| PathBuf::from(s);
        assert_eq!(install(&p("/opt/h/node_modules/@openai/codex/bin/codex.js")), vec![p("/opt/h/node_modules")]);
        assert_eq!(install(&p("/opt/h/node_modules/a/node_modules/b/cli.js")), vec![p("/opt/h/node_modules")]);
        assert_eq!(install(&p("/srv/tool/bin/tool")), vec![p("/srv/tool")]);
        assert_eq!(install(&p("/home/a/agent.sh")), vec![p("/home/a/agent.sh")]);
        let venv = tempfile::tempdir().unwrap();
        let python = tempfile::tempdir().unwrap();
        std::fs::create_dir(python.path().join("bin")).unwrap();
        std::fs::write(venv.path().join("pyvenv.cfg"), format!("home = {}\n", python.path().join("bin").display())).unwrap();
        let got = install(&venv.path().join("bin/aider"));
        assert_eq!(got, vec![venv.path().to_path_buf(), std::fs::canonicalize(python.path()).unwrap()]);
    }
}

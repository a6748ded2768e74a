//! What a run may reach (DESIGN.md, "Trust model"): the environment it is given, the
//! directories each harness keeps its state in, the parts of the system it may read, how a
//! requested directory relates to what must stay out of reach, the limits it runs under,
//! and whether a device runs it confined at all. Pure rules: the device gathers the facts
//! (directory listings, PATH) and the shim enforces the result before exec.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::harness::Harness;

/// What a run may do beneath one path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Access {
    /// Read files, list directories, execute programs.
    Read,
    /// Everything `Read` allows, and create, write, rename and remove.
    Write,
    /// Open existing files for reading and writing, and use their ioctls (terminals,
    /// `/dev/null`), but create nothing: for `/dev`.
    Devices,
    /// List directories only (names, never contents): a directory given entry by entry
    /// because it holds Drover's home, so `ls` still works there.
    List,
}

/// One path a run is given, with what it may do beneath it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grant {
    /// An absolute path; a directory covers everything beneath it.
    pub path: String,
    /// What the run may do there.
    pub access: Access,
}

/// Limits a run's processes run under (`RLIMIT_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// Data a process may allocate (`RLIMIT_DATA`), in bytes; None: no limit.
    pub memory_bytes: Option<u64>,
    /// Processes the run may have at once: counted per run by its own pids cgroup where
    /// the device has one ([`Containment::cgroup`]), else per user (`RLIMIT_NPROC`, which
    /// the kernel does not apply to root); None: no limit.
    pub processes: Option<u64>,
}

/// A process may allocate this much data by default: more than any agent CLI uses, less
/// than a runaway loop would take the machine down with.
pub const DEFAULT_MEMORY_BYTES: u64 = 16 << 30;

/// Processes of the device's user by default: far above what an agent and its builds start.
pub const DEFAULT_PROCESSES: u64 = 16_384;

impl Default for Limits {
    fn default() -> Self {
        Limits { memory_bytes: Some(DEFAULT_MEMORY_BYTES), processes: Some(DEFAULT_PROCESSES) }
    }
}

/// How a run is confined: what the shim applies in the program's process before exec.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Policy {
    /// Everything the run may reach; anything else on the filesystem it cannot open.
    pub grants: Vec<Grant>,
    /// Its resource limits.
    pub limits: Limits,
    /// Whether it may make Unix-domain sockets of its own (`socket(AF_UNIX)`): connected
    /// pairs (`socketpair`) always work, but a socket it makes could reach any named
    /// socket on the machine (the user's D-Bus session bus, a tmux server, Docker), which
    /// Landlock does not govern before ABI 9, so by default it may not.
    #[serde(default)]
    pub unix_sockets: bool,
    /// How its processes are held together and counted.
    #[serde(default)]
    pub contain: Containment,
}

/// How a run's processes are held together, so that every one of them ends with it and
/// the process limit counts them alone. The device probes what its machine allows.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Containment {
    /// The run gets a PID namespace of its own, whose init ends (and with it every
    /// process left in the namespace, detached or not) when the run's program does, or
    /// when the shim does. Without one, the shim as child subreaper finds and ends them.
    #[serde(default)]
    pub pid_namespace: bool,
    /// It needs a user namespace to have its own PID namespace (a device that is not root).
    #[serde(default)]
    pub user_namespace: bool,
    /// It sees a /proc of its own namespace: no other process of the machine.
    #[serde(default)]
    pub own_proc: bool,
    /// The directory of a pids cgroup hierarchy in which each run gets a group of its own,
    /// limited to [`Limits::processes`]; None: the limit is `RLIMIT_NPROC`, per user.
    #[serde(default)]
    pub cgroup: Option<String>,
}

impl Containment {
    /// How people read it, after the sandbox's other parts.
    pub fn describe(&self) -> String {
        let tree = match (self.pid_namespace, self.own_proc) {
            (true, true) => "own PID namespace and /proc",
            (true, false) => "own PID namespace",
            (false, _) => "process tree held by the shim (child subreaper)",
        };
        let limit = match self.cgroup {
            Some(_) => "process limit per run (pids cgroup)",
            None => "process limit per user (RLIMIT_NPROC)",
        };
        format!("{tree}, {limit}")
    }
}

/// The parts of the system every run reads (and executes from): never written.
pub const SYSTEM_READ: &[&str] = &[
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc",
    "/opt",
    "/sys",
    "/proc",
    "/nix/store",
    "/snap",
    // Where `/etc/resolv.conf` points on systemd-resolved and resolvconf machines; the rest
    // of /run (the user's runtime directory, secrets) is not the run's.
    "/run/systemd/resolve",
    "/run/resolvconf",
];

/// Device files a run opens: no disks, and no terminal but its own (the shim adds it),
/// so it can neither read raw storage nor type into another terminal of the user.
pub const SYSTEM_DEVICES: &[&str] = &["/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty", "/dev/ptmx"];

/// Shared memory a run may create files in (`/dev/shm`).
pub const SYSTEM_SHARED_MEMORY: &str = "/dev/shm";

/// Files in the home directory every run reads: git's identity and settings.
pub const HOME_READ: &[&str] = &[".gitconfig", ".config/git", ".rustup"];

/// The directories, relative to the home directory, where `harness` keeps its logins,
/// settings and transcripts: a run of it reads and writes them (the device creates them
/// when missing, so the harness can).
pub fn state_dirs(harness: Harness) -> &'static [&'static str] {
    match harness {
        Harness::Claude => &[".claude", ".config/claude"],
        Harness::Codex => &[".codex"],
        Harness::Gemini => &[".gemini"],
        Harness::Aider => &[".aider", ".cache/aider"],
        Harness::Opencode => &[".config/opencode", ".local/share/opencode", ".local/state/opencode", ".cache/opencode"],
        Harness::Goose => &[".config/goose", ".local/share/goose", ".local/state/goose"],
        Harness::Custom => &[],
    }
}

/// Single files in the home directory a harness keeps state in (read and written when
/// they exist; a harness that must create one beside them is out of luck, as the home
/// directory itself is not the run's).
pub fn state_files(harness: Harness) -> &'static [&'static str] {
    match harness {
        Harness::Claude => &[".claude.json", ".claude.json.backup"],
        Harness::Aider => &[".aider.conf.yml"],
        Harness::Codex | Harness::Gemini | Harness::Opencode | Harness::Goose | Harness::Custom => &[],
    }
}

/// Variables that move a harness's state elsewhere (`CLAUDE_CONFIG_DIR`, `CODEX_HOME`):
/// where they point is the run's to write, like the default directories.
pub fn state_variables(harness: Harness) -> &'static [&'static str] {
    match harness {
        Harness::Claude => &["CLAUDE_CONFIG_DIR"],
        Harness::Codex => &["CODEX_HOME"],
        Harness::Gemini | Harness::Aider | Harness::Opencode | Harness::Goose | Harness::Custom => &[],
    }
}

/// [`state_variables`] of `harness`, or of every preset when it is not known.
pub fn state_variables_for(harness: Option<Harness>) -> Vec<&'static str> {
    match harness {
        Some(h) => state_variables(h).to_vec(),
        None => Harness::ALL.iter().flat_map(|h| state_variables(*h).iter().copied()).collect(),
    }
}

/// The state directories and files of `harness`, or of every preset when the run's
/// harness is not known (a session someone started by hand may run any of them).
pub fn state_dirs_for(harness: Option<Harness>) -> Vec<&'static str> {
    let of = |h: Harness| state_dirs(h).iter().chain(state_files(h)).copied().collect::<Vec<_>>();
    match harness {
        Some(h) => of(h),
        None => Harness::ALL.iter().flat_map(|h| of(*h)).collect(),
    }
}

/// Variables a run inherits from the device daemon's environment when set there; anything
/// else the daemon was started with (above all `DROVER_*`) stays out. `TERM` is not among
/// them: a session's terminal is the viewer's (`xterm-256color`), not the daemon's.
const ENV_NAMES: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "TZ",
    "EDITOR",
    "VISUAL",
    "PAGER",
    "NO_COLOR",
    "FORCE_COLOR",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "NODE_EXTRA_CA_CERTS",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "all_proxy",
    "GOOGLE_API_KEY",
    "GOOGLE_CLOUD_PROJECT",
    "GOOGLE_CLOUD_LOCATION",
    "GOOGLE_GENAI_USE_VERTEXAI",
];

/// Prefixes of the harnesses' documented variables (API keys, endpoints, settings) and
/// of the locale.
const ENV_PREFIXES: &[&str] = &[
    "LC_",
    "ANTHROPIC_",
    "CLAUDE_CODE_",
    "CLAUDE_CONFIG_DIR",
    "OPENAI_",
    "AZURE_OPENAI_",
    "CODEX_",
    "GEMINI_",
    "OPENROUTER_",
    "DEEPSEEK_",
    "GROQ_",
    "MISTRAL_",
    "XAI_",
    "AIDER_",
    "OPENCODE_",
    "GOOSE_",
];

/// Whether a run inherits the daemon's variable `name` (`extra` are names the device's
/// owner added). `DROVER_*` never: a run gets only the variables Drover gives it.
pub fn env_inherited(name: &str, extra: &[String]) -> bool {
    if name.starts_with("DROVER_") {
        return false;
    }
    ENV_NAMES.contains(&name) || ENV_PREFIXES.iter().any(|p| name.starts_with(p)) || extra.iter().any(|e| e == name)
}

/// The variables Drover itself gives a run (from the server or the shim); no others of
/// the `DROVER_` family reach it.
pub const RUN_VARIABLES: &[&str] = &["DROVER_URL", "DROVER_TOKEN", "DROVER_TASK", "DROVER_STAGE", "DROVER_SESSION"];

/// How a path a run would be given lies against one that must stay out of its reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Relation {
    /// Neither holds the other.
    Apart,
    /// The path holds the protected one (an ancestor of it).
    Contains,
    /// The path is the protected one, or lies beneath it.
    Inside,
}

/// How `path` lies against `protected` (both absolute and normalised: no `..`).
pub fn relation(path: &Path, protected: &Path) -> Relation {
    if path.starts_with(protected) {
        Relation::Inside
    } else if protected.starts_with(path) {
        Relation::Contains
    } else {
        Relation::Apart
    }
}

/// What to do with a path a run would be given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fit {
    /// Give it as asked.
    Grant,
    /// It holds something protected: give each of its entries instead (each judged the
    /// same way), so the protected one is left out; the directory itself may be listed.
    Split,
    /// It is protected, or inside something protected: never give it.
    Refuse,
}

/// Judges `path` against the `protected` directories (Drover's home, the device's) and
/// the `islands` inside them a run may still be given (its worktree, its private temp).
pub fn fit(path: &Path, protected: &[PathBuf], islands: &[PathBuf]) -> Fit {
    if islands.iter().any(|i| path.starts_with(i)) {
        return Fit::Grant;
    }
    let mut split = false;
    for p in protected {
        match relation(path, p) {
            Relation::Inside => return Fit::Refuse,
            Relation::Contains => split = true,
            Relation::Apart => {}
        }
    }
    if split {
        Fit::Split
    } else {
        Fit::Grant
    }
}

/// How a device runs what it is asked to start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Inside the sandbox.
    Confined,
    /// Without it: an owner or admin asked for this run, or the device's owner started
    /// the device `--unsandboxed`.
    Unconfined,
    /// Not at all: the device cannot sandbox and was not told it may run unconfined.
    Refuse,
}

/// Decides how a run starts: `can_confine` is whether this device's kernel offers the
/// sandbox, `unsandboxed` whether its owner started it `--unsandboxed`, `unconfined_asked`
/// whether an owner or admin started this one run `--unconfined`.
pub fn decide(can_confine: bool, unsandboxed: bool, unconfined_asked: bool) -> Decision {
    match (unconfined_asked || unsandboxed, can_confine) {
        (true, _) => Decision::Unconfined,
        (false, true) => Decision::Confined,
        (false, false) => Decision::Refuse,
    }
}

/// What a device does with the runs it is given, as it says in its hello and as lists show.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum Offer {
    /// Every run is sandboxed by `mechanism` (unless an owner or admin starts one
    /// `--unconfined`).
    Sandboxed {
        /// How, as people read it (e.g. "Landlock ABI 7, child subreaper, rlimits").
        mechanism: String,
    },
    /// Its owner started it `--unsandboxed`: runs reach everything the device's user can.
    Unsandboxed {
        /// What the kernel would have offered (or why it offers nothing).
        kernel: String,
    },
    /// The kernel cannot sandbox and the owner did not allow unsandboxed runs: it refuses
    /// every run.
    Unavailable {
        /// Why.
        reason: String,
    },
}

impl Offer {
    /// One line for lists: what a person needs to know about this device's runs.
    pub fn describe(&self) -> String {
        match self {
            Offer::Sandboxed { mechanism } => format!("sandboxed ({mechanism})"),
            Offer::Unsandboxed { .. } => "UNSANDBOXED: runs reach everything the device's user can (--unsandboxed)".into(),
            Offer::Unavailable { reason } => {
                format!("refuses runs: cannot sandbox ({reason}); start it with --unsandboxed to run them anyway")
            }
        }
    }

    /// Whether lists mark the device with a warning.
    pub fn is_warning(&self) -> bool {
        match self {
            Offer::Sandboxed { .. } => false,
            Offer::Unsandboxed { .. } | Offer::Unavailable { .. } => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> PathBuf {
        PathBuf::from(s)
    }

    #[test]
    fn the_daemons_drover_variables_never_reach_a_run() {
        for name in ["DROVER_HOME", "DROVER_TOKEN", "DROVER_URL", "DROVER_DATABASE", "DROVER_ANYTHING"] {
            assert!(!env_inherited(name, &[name.to_string()]), "{name}");
        }
    }

    #[test]
    fn the_environment_is_an_allow_list() {
        for name in ["PATH", "HOME", "LANG", "LC_ALL", "ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "CLAUDE_CODE_USE_BEDROCK"] {
            assert!(env_inherited(name, &[]), "{name}");
        }
        for name in ["AWS_SECRET_ACCESS_KEY", "GITHUB_TOKEN", "SSH_AUTH_SOCK", "LD_PRELOAD", "PGPASSWORD", "RUST_LOG", "TERM"] {
            assert!(!env_inherited(name, &[]), "{name}");
        }
        assert!(env_inherited("GITHUB_TOKEN", &["GITHUB_TOKEN".into()]));
    }

    #[test]
    fn each_preset_has_its_own_state_and_an_unknown_harness_gets_all_of_them() {
        assert_eq!(state_dirs(Harness::Codex), &[".codex"]);
        assert!(state_dirs(Harness::Claude).contains(&".claude"));
        assert!(state_files(Harness::Claude).contains(&".claude.json"));
        assert!(state_dirs(Harness::Custom).is_empty() && state_files(Harness::Custom).is_empty());
        let all = state_dirs_for(None);
        for h in Harness::ALL {
            for d in state_dirs(h).iter().chain(state_files(h)) {
                assert!(all.contains(d), "{d}");
            }
        }
        assert_eq!(state_dirs_for(Some(Harness::Gemini)), vec![".gemini"]);
        assert_eq!(state_variables_for(Some(Harness::Claude)), vec!["CLAUDE_CONFIG_DIR"]);
        assert!(state_variables_for(None).contains(&"CODEX_HOME"));
        for v in state_variables_for(None) {
            assert!(env_inherited(v, &[]), "{v} reaches the run, so its directory must too");
        }
        assert!(state_dirs_for(Some(Harness::Claude)).contains(&".claude.json"));
    }

    #[test]
    fn relations_are_by_whole_components() {
        assert_eq!(relation(&p("/home/a"), &p("/home/a/.local/share/drover")), Relation::Contains);
        assert_eq!(relation(&p("/home/a/.local/share/drover/sessions"), &p("/home/a/.local/share/drover")), Relation::Inside);
        assert_eq!(relation(&p("/home/a/.local/share/drover"), &p("/home/a/.local/share/drover")), Relation::Inside);
        assert_eq!(relation(&p("/home/a/.local/share/drover2"), &p("/home/a/.local/share/drover")), Relation::Apart);
        assert_eq!(relation(&p("/srv/app"), &p("/home/a/.local/share/drover")), Relation::Apart);
        assert_eq!(relation(&p("/"), &p("/home/a")), Relation::Contains);
    }

    #[test]
    fn a_path_holding_drovers_home_is_split_and_one_inside_it_refused_unless_an_island() {
        let protected = [p("/home/a/.local/share/drover")];
        let islands = [p("/home/a/.local/share/drover/device/worktrees"), p("/home/a/.local/share/drover/device/sessions/s1/tmp")];
        assert_eq!(fit(&p("/home/a"), &protected, &islands), Fit::Split);
        assert_eq!(fit(&p("/"), &protected, &islands), Fit::Split);
        assert_eq!(fit(&p("/home/a/src/app"), &protected, &islands), Fit::Grant);
        assert_eq!(fit(&p("/home/a/.local/share/drover"), &protected, &islands), Fit::Refuse);
        assert_eq!(fit(&p("/home/a/.local/share/drover/drover.db"), &protected, &islands), Fit::Refuse);
        assert_eq!(fit(&p("/home/a/.local/share/drover/device"), &protected, &islands), Fit::Refuse);
        assert_eq!(fit(&p("/home/a/.local/share/drover/device/sessions/s2"), &protected, &islands), Fit::Refuse);
        assert_eq!(fit(&p("/home/a/.local/share/drover/device/worktrees/t1"), &protected, &islands), Fit::Grant);
        assert_eq!(fit(&p("/home/a/.local/share/drover/device/sessions/s1/tmp"), &protected, &islands), Fit::Grant);
    }

    #[test]
    fn a_device_that_cannot_sandbox_refuses_unless_told_it_may_run_unconfined() {
        assert_eq!(decide(true, false, false), Decision::Confined);
        assert_eq!(decide(true, false, true), Decision::Unconfined);
        assert_eq!(decide(true, true, false), Decision::Unconfined);
        assert_eq!(decide(false, false, false), Decision::Refuse);
        assert_eq!(decide(false, true, false), Decision::Unconfined);
        assert_eq!(decide(false, false, true), Decision::Unconfined);
    }

    #[test]
    fn only_a_sandboxed_device_goes_without_a_warning() {
        let ok = Offer::Sandboxed { mechanism: "Landlock ABI 7".into() };
        assert!(!ok.is_warning() && ok.describe().starts_with("sandboxed"));
        let off = Offer::Unsandboxed { kernel: "Landlock ABI 7".into() };
        assert!(off.is_warning() && off.describe().contains("UNSANDBOXED"));
        let none = Offer::Unavailable { reason: "Landlock is not enabled".into() };
        assert!(none.is_warning() && none.describe().contains("--unsandboxed"));
        let json = serde_json::to_string(&ok).unwrap();
        assert_eq!(serde_json::from_str::<Offer>(&json).unwrap(), ok);
    }

    #[test]
    fn default_limits_are_set_and_generous() {
        let l = Limits::default();
        assert!(l.memory_bytes.unwrap() >= 8 << 30);
        assert!(l.processes.unwrap() >= 4096);
    }
}

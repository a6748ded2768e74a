//! The sandbox a run's program enters between fork and exec: Landlock rules built from a
//! [`Policy`] (filesystem grants; signals and abstract sockets scoped to the run; reading
//! other processes' memory and environment is refused by Landlock's ptrace rules), no
//! capabilities and no new privileges, and the policy's resource limits. Needs no privilege and no service: it
//! works for a plain user on a laptop (kernel 5.13+).
//!
//! The ruleset is built in the shim before the fork (opening the granted paths); the
//! child only makes the system calls that enter it, which are async-signal-safe.

use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use drover_core::confinement::{Access, Containment, Limits, Policy};
use landlock::{
    Access as _, AccessFs, BitFlags, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset, RulesetAttr, RulesetCreatedAttr, Scope, ABI,
};

/// The Landlock ABI the rules are written for: filesystem rights through device ioctls
/// (v5) and scoping of signals and abstract sockets (v6). Older kernels enforce what
/// they know (best effort); [`kernel_abi`] says which.
const TARGET: ABI = ABI::V6;

/// Why a run could not be put in its sandbox.
#[derive(Debug, thiserror::Error)]
pub enum ConfineError {
    /// The kernel has no Landlock.
    #[error("this kernel cannot sandbox runs: {0}")]
    Unavailable(String),
    /// The ruleset could not be built.
    #[error("the sandbox could not be built: {0}")]
    Rules(String),
}

/// The Landlock ABI this kernel offers (0: none), and why there is none.
pub fn kernel_abi() -> Result<u32, String> {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: the version query takes no ruleset attributes (null, size 0).
    let v = unsafe {
        libc::syscall(libc::SYS_landlock_create_ruleset, std::ptr::null::<libc::c_void>(), 0usize, LANDLOCK_CREATE_RULESET_VERSION)
    };
    if v >= 1 {
        return Ok(v as u32);
    }
    let e = std::io::Error::last_os_error();
    Err(match e.raw_os_error() {
        Some(libc::ENOSYS) => "the kernel was built without Landlock (Linux 5.13+ with CONFIG_SECURITY_LANDLOCK)".into(),
        Some(libc::EOPNOTSUPP) => "Landlock is not enabled at boot (add landlock to the lsm= kernel parameter)".into(),
        _ => format!("Landlock is not available: {e}"),
    })
}

/// How the sandbox is described to people, for this kernel and what holds the run's
/// processes together here.
pub fn mechanism(abi: u32, contain: &Containment) -> String {
    let scoped = if abi >= 6 { ", signals and abstract sockets scoped" } else { "" };
    format!("Landlock ABI {abi}{scoped}, no Unix sockets of its own, no capabilities, {}, memory rlimit", contain.describe())
}

/// A policy made ready to enter: the ruleset (close-on-exec), the limits and the
/// seccomp filter.
pub struct Prepared {
    ruleset: OwnedFd,
    limits: Limits,
    filter: Option<Vec<libc::sock_filter>>,
    proc_rights: u64,
}

/// What the child needs after the fork: plain values, no allocation.
#[derive(Clone, Copy)]
pub struct ChildConfine {
    ruleset: RawFd,
    limits: Limits,
    filter: Option<(*const libc::sock_filter, u16)>,
    proc_rights: u64,
}

/// `struct landlock_path_beneath_attr`, as the kernel reads it (packed).
#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

// SAFETY: the filter pointer refers to the `Prepared` it came from, which outlives the
// fork it is used in; nothing writes through it.
unsafe impl Send for ChildConfine {}
// SAFETY: as above: read only.
unsafe impl Sync for ChildConfine {}

/// The audit architecture of this build, as seccomp reports it.
#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xC000_00B7;

/// A seccomp filter that refuses `socket(AF_UNIX, …)` with EACCES (and every system call
/// of another architecture, or x32, with EPERM: those would go around it); everything
/// else is allowed.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn no_unix_sockets() -> Vec<libc::sock_filter> {
    use libc::{BPF_ABS, BPF_JEQ, BPF_JMP, BPF_K, BPF_LD, BPF_RET, BPF_W};
    const BPF_JGE: u32 = 0x30;
    let stmt = |code: u32, k: u32| libc::sock_filter { code: code as u16, jt: 0, jf: 0, k };
    let jump = |code: u32, k: u32, jt: u8, jf: u8| libc::sock_filter { code: code as u16, jt, jf, k };
    vec![
        stmt(BPF_LD | BPF_W | BPF_ABS, 4),                                    // 0: arch
        jump(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH, 0, 7),                    // 1: foreign → 9
        stmt(BPF_LD | BPF_W | BPF_ABS, 0),                                    // 2: nr
        jump(BPF_JMP | BPF_JGE | BPF_K, 0x4000_0000, 4, 0),                   // 3: x32 → 8
        jump(BPF_JMP | BPF_JEQ | BPF_K, libc::SYS_socket as u32, 0, 2),       // 4: not socket → 7
        stmt(BPF_LD | BPF_W | BPF_ABS, 16),                                   // 5: args[0], low half
        jump(BPF_JMP | BPF_JEQ | BPF_K, libc::AF_UNIX as u32, 1, 0),          // 6: AF_UNIX → 8
        stmt(BPF_RET | BPF_K, libc::SECCOMP_RET_ALLOW),                       // 7
        stmt(BPF_RET | BPF_K, libc::SECCOMP_RET_ERRNO | libc::EACCES as u32), // 8
        stmt(BPF_RET | BPF_K, libc::SECCOMP_RET_ERRNO | libc::EPERM as u32),  // 9
    ]
}

fn rights(access: Access, abi: ABI, is_dir: bool) -> BitFlags<AccessFs> {
    let rights = match access {
        Access::Read => AccessFs::from_read(abi),
        Access::Write => AccessFs::from_all(abi),
        Access::Devices => AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::ReadDir | AccessFs::Truncate | AccessFs::IoctlDev,
        Access::List => BitFlags::from(AccessFs::ReadDir),
    };
    if is_dir {
        rights
    } else {
        rights & AccessFs::from_file(abi)
    }
}

/// Builds the ruleset for `policy`. Paths that do not exist are skipped (a harness not
/// installed here has no state directory).
pub fn prepare(policy: &Policy) -> Result<Prepared, ConfineError> {
    kernel_abi().map_err(ConfineError::Unavailable)?;
    let rules = |e: landlock::RulesetError| ConfineError::Rules(e.to_string());
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(TARGET))
        .map_err(rules)?
        .scope(Scope::from_all(TARGET))
        .map_err(rules)?
        .create()
        .map_err(rules)?;
    for grant in &policy.grants {
        let Ok(meta) = std::fs::metadata(&grant.path) else { continue };
        let fd = match PathFd::new(&grant.path) {
            Ok(fd) => fd,
            Err(e) => {
                tracing::debug!(path = %grant.path, "not granted: {e}");
                continue;
            }
        };
        ruleset = ruleset.add_rule(PathBeneath::new(fd, rights(grant.access, TARGET, meta.is_dir()))).map_err(rules)?;
    }
    let ruleset: Option<OwnedFd> = ruleset.into();
    let ruleset = ruleset.ok_or_else(|| ConfineError::Unavailable("Landlock refused the ruleset".into()))?;
    let filter = (!policy.unix_sockets).then(no_unix_sockets);
    // A /proc of the run's own, mounted after the fork, is granted as /proc is: to read.
    let abi = ABI::from(kernel_abi().unwrap_or(0) as i32);
    let proc_rights = (rights(Access::Read, TARGET, true) & AccessFs::from_all(abi)).bits();
    Ok(Prepared { ruleset, limits: policy.limits, filter, proc_rights })
}

impl Prepared {
    /// The values the child enters the sandbox with (the ruleset stays open in the parent
    /// until the child has exec'd).
    pub fn for_child(&self) -> ChildConfine {
        let filter = self.filter.as_ref().map(|f| (f.as_ptr(), f.len() as u16));
        ChildConfine { ruleset: self.ruleset.as_raw_fd(), limits: self.limits, filter, proc_rights: self.proc_rights }
    }
}

impl ChildConfine {
    /// Lets the run read the /proc now mounted (its own namespace's, mounted after the
    /// ruleset was built, so not the one its rule names). Raw system calls only.
    pub fn allow_proc(&self) -> std::io::Result<()> {
        const LANDLOCK_RULE_PATH_BENEATH: libc::c_int = 1;
        // SAFETY: open, the rule (reads one attribute struct from a valid pointer) and close.
        unsafe {
            let fd = libc::open(c"/proc".as_ptr(), libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC);
            if fd == -1 {
                return Err(std::io::Error::last_os_error());
            }
            let attr = PathBeneathAttr { allowed_access: self.proc_rights, parent_fd: fd };
            let r =
                libc::syscall(libc::SYS_landlock_add_rule, self.ruleset, LANDLOCK_RULE_PATH_BENEATH, &attr as *const PathBeneathAttr, 0u32);
            let e = std::io::Error::last_os_error();
            libc::close(fd);
            if r == -1 {
                return Err(e);
            }
        }
        Ok(())
    }

    /// Enters the sandbox: limits, no new privileges, the Landlock ruleset. Called in the
    /// child between fork and exec; only async-signal-safe system calls.
    pub fn enter(&self) -> std::io::Result<()> {
        let set = |resource, value: Option<u64>| -> std::io::Result<()> {
            let Some(v) = value else { return Ok(()) };
            let lim = libc::rlimit { rlim_cur: v as libc::rlim_t, rlim_max: v as libc::rlim_t };
            // SAFETY: setrlimit reads one rlimit from a valid pointer.
            if unsafe { libc::setrlimit(resource, &lim) } == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        };
        set(libc::RLIMIT_DATA, self.limits.memory_bytes)?;
        set(libc::RLIMIT_NPROC, self.limits.processes)?;
        // SAFETY: plain prctl and syscall with integer arguments.
        unsafe {
            // No capabilities, ever: a run of a root device would otherwise keep ones
            // that step around the sandbox (CAP_PERFMON reads any process's memory and
            // environment, CAP_SYS_MODULE loads kernel code). With the bounding set
            // empty, exec gives even root none. Without CAP_SETPCAP (a plain user, who
            // has none to drop) the calls fail and change nothing.
            for cap in 0..64 {
                libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0);
            }
            libc::prctl(libc::PR_CAP_AMBIENT, libc::PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::syscall(libc::SYS_landlock_restrict_self, self.ruleset, 0u32) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            if let Some((filter, len)) = self.filter {
                let prog = libc::sock_fprog { len, filter: filter as *mut libc::sock_filter };
                if libc::prctl(libc::PR_SET_SECCOMP, libc::SECCOMP_MODE_FILTER, &prog as *const libc::sock_fprog) == -1 {
                    return Err(std::io::Error::last_os_error());
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::path::Path;

    use drover_core::confinement::Grant;

    use super::*;
    use crate::pty::tests::printed;
    use crate::pty::Launch;

    pub(crate) fn grant(path: &Path, access: Access) -> Grant {
        Grant { path: path.display().to_string(), access }
    }

    fn run_confined(policy: &Policy, cwd: &Path, script: &str) -> String {
        let command = vec!["sh".to_string(), "-c".to_string(), script.to_string()];
        let env = vec![("PATH".to_string(), "/usr/bin:/bin".to_string())];
        printed(&Launch { command: &command, cwd, env: &env, cols: 80, rows: 24, confine: Some(policy) })
    }

    pub(crate) fn system(grants: &mut Vec<Grant>) {
        for p in drover_core::confinement::SYSTEM_READ {
            grants.push(grant(Path::new(p), Access::Read));
        }
        for d in drover_core::confinement::SYSTEM_DEVICES {
            grants.push(grant(Path::new(d), Access::Devices));
        }
    }

    #[test]
    fn a_confined_program_opens_its_own_terminal_and_no_other() {
        let work = tempfile::tempdir().unwrap();
        let mut grants = vec![grant(work.path(), Access::Write)];
        system(&mut grants);
        let policy = Policy { grants, limits: Limits::default(), unix_sockets: false, contain: Containment::default() };
        // Another terminal of the same user, open in this process.
        let other = nix::pty::openpty(None, None).unwrap();
        let other_name = nix::unistd::ttyname(&other.slave).unwrap();
        let script = format!(
            "echo to-own > /dev/stdout && echo OWN-OK; echo typed > {} && echo ESCAPED || echo DENIED-OTHER; head -c 1 /dev/sda >/dev/null 2>&1 && echo ESCAPED-DISK || echo no-disk",
            other_name.display()
        );
        let out = run_confined(&policy, work.path(), &script);
        assert!(out.contains("OWN-OK") && out.contains("DENIED-OTHER") && !out.contains("ESCAPED"), "{out}");
    }

    #[test]
    fn the_kernel_reports_its_abi() {
        let abi = kernel_abi().expect("Landlock on the test machine");
        assert!(abi >= 1);
        let m = mechanism(abi, &Containment { pid_namespace: true, own_proc: true, ..Containment::default() });
        assert!(m.starts_with("Landlock ABI") && m.contains("own PID namespace and /proc"), "{m}");
    }

    #[test]
    fn a_confined_program_writes_its_grants_and_reads_nothing_else() {
        let root = tempfile::tempdir().unwrap();
        let work = root.path().join("work");
        let secret = root.path().join("secret");
        std::fs::create_dir_all(&work).unwrap();
        std::fs::create_dir_all(&secret).unwrap();
        std::fs::write(secret.join("token"), "s3cret").unwrap();
        std::os::unix::fs::symlink(secret.join("token"), work.join("link")).unwrap();
        let mut grants = vec![grant(&work, Access::Write)];
        system(&mut grants);
        let policy = Policy { grants, limits: Limits::default(), unix_sockets: false, contain: Containment::default() };
        let script = format!(
            "echo made > made.txt && cat made.txt; cat {} || echo DENIED-DIRECT; cat link || echo DENIED-LINK; cat ../secret/token || echo DENIED-DOTDOT; ls {} || echo DENIED-LIST",
            secret.join("token").display(),
            root.path().display()
        );
        let out = run_confined(&policy, &work, &script);
        assert!(out.contains("made"), "{out}");
        for denied in ["DENIED-DIRECT", "DENIED-LINK", "DENIED-DOTDOT", "DENIED-LIST"] {
            assert!(out.contains(denied), "{denied}: {out}");
        }
        assert!(!out.contains("s3cret"), "{out}");
    }

    #[test]
    fn a_confined_program_cannot_read_another_processs_environment_or_signal_it() {
        let work = tempfile::tempdir().unwrap();
        let mut grants = vec![grant(work.path(), Access::Write)];
        system(&mut grants);
        let policy = Policy { grants, limits: Limits::default(), unix_sockets: false, contain: Containment::default() };
        let me = std::process::id();
        let script = format!(
            "cat /proc/{me}/environ >/dev/null && echo READ || echo DENIED-ENV; kill -0 {me} && echo SIGNALLED || echo DENIED-KILL"
        );
        let out = run_confined(&policy, work.path(), &script);
        assert!(out.contains("DENIED-ENV") && !out.contains("READ\r"), "{out}");
        if kernel_abi().unwrap() >= 6 {
            assert!(out.contains("DENIED-KILL"), "{out}");
        }
    }

    #[test]
    fn a_confined_program_makes_no_unix_socket_but_keeps_socket_pairs_and_the_network() {
        let work = tempfile::tempdir().unwrap();
        // A named socket of the user, outside the sandbox, that would answer.
        let listener = std::os::unix::net::UnixListener::bind(work.path().join("outside.sock")).unwrap();
        listener.set_nonblocking(true).unwrap();
        let mut grants = vec![grant(work.path(), Access::Write)];
        system(&mut grants);
        let policy = Policy { grants: grants.clone(), limits: Limits::default(), unix_sockets: false, contain: Containment::default() };
        let py = "import socket,sys\ntry:\n s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); print('ESCAPED')\nexcept OSError as e: print('DENIED', e.errno)\na,b=socket.socketpair(); a.send(b'x'); print('PAIR', b.recv(1))\nt=socket.socket(); print('TCP-OK')";
        if !Path::new("/usr/bin/python3").exists() {
            return;
        }
        let script = format!("/usr/bin/python3 -c \"{py}\" outside.sock");
        let out = run_confined(&policy, work.path(), &script);
        assert!(out.contains("DENIED 13") && out.contains("PAIR b'x'") && out.contains("TCP-OK") && !out.contains("ESCAPED"), "{out}");
        let allowed = Policy { grants, limits: Limits::default(), unix_sockets: true, contain: Containment::default() };
        let out = run_confined(&allowed, work.path(), &script);
        assert!(out.contains("ESCAPED"), "with --sandbox-unix-sockets it may: {out}");
    }

    #[test]
    fn limits_apply_inside() {
        let work = tempfile::tempdir().unwrap();
        let mut grants = vec![grant(work.path(), Access::Write)];
        system(&mut grants);
        let policy = Policy {
            grants,
            limits: Limits { memory_bytes: Some(1 << 30), processes: None },
            unix_sockets: false,
            contain: Containment::default(),
        };
        let out = run_confined(&policy, work.path(), "ulimit -d");
        assert!(out.contains(&((1u64 << 30) / 1024).to_string()), "{out}");
    }
}

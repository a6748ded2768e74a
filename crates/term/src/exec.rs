//! A run's process, from the clone to the exec. Everything is prepared before the clone,
//! so the child — a copy of a threaded process in which glibc's fork handlers have not
//! run — makes only raw system calls. With a PID namespace the child is the namespace's
//! init: it starts the program beneath it, reaps whatever is re-parented to it, hands the
//! program's wait status to the shim and ends when the program does, and the kernel then
//! kills everything left in the namespace. It also dies with the shim (parent-death
//! signal), taking the run with it.

use std::ffi::{c_char, CString};
use std::fs::File;
use std::os::fd::{AsRawFd, RawFd};

use crate::confine::ChildConfine;

/// Clones this process with `flags` the way fork does (the child gets 0). Unlike
/// `fork()`, no atfork handlers run.
///
/// # Safety
/// The child shares nothing with the parent's other threads: it may only make raw system
/// calls (no allocation, no locks) until it execs or exits.
pub unsafe fn clone_process(flags: libc::c_int) -> libc::pid_t {
    libc::syscall(libc::SYS_clone, (flags | libc::SIGCHLD) as libc::c_ulong, 0usize, 0usize, 0usize, 0usize) as libc::pid_t
}

/// The clone flags of a run's own PID namespace (and user namespace, for a device that
/// is not root).
pub fn namespace_flags(user: bool) -> libc::c_int {
    libc::CLONE_NEWPID | if user { libc::CLONE_NEWUSER } else { 0 }
}

/// Gives the calling process (a namespace's init) a mount namespace whose /proc shows
/// only its PID namespace. Changes nothing outside: mounts no longer propagate out.
///
/// # Safety
/// Raw system calls only; meant for the child of [`clone_process`].
pub unsafe fn own_proc() -> Result<(), i32> {
    let ok = |r: libc::c_int| if r == -1 { Err(errno()) } else { Ok(()) };
    ok(libc::unshare(libc::CLONE_NEWNS))?;
    ok(libc::mount(std::ptr::null(), c"/".as_ptr(), std::ptr::null(), libc::MS_REC | libc::MS_SLAVE, std::ptr::null()))?;
    let flags = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
    ok(libc::mount(c"proc".as_ptr(), c"/proc".as_ptr(), c"proc".as_ptr(), flags, std::ptr::null()))
}

/// Moves the calling process into the cgroup whose `cgroup.procs` is `procs`.
///
/// # Safety
/// Raw system calls only; meant for the child of [`clone_process`].
pub unsafe fn join_group(procs: &CString) -> Result<(), i32> {
    let fd = libc::open(procs.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
    if fd == -1 {
        return Err(errno());
    }
    let r = libc::write(fd, c"0".as_ptr().cast(), 1);
    let e = errno();
    libc::close(fd);
    if r == 1 {
        Ok(())
    } else {
        Err(e)
    }
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// Where the start of a program failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Cloning the process (or into its namespaces).
    Clone,
    /// Mapping the user into the run's user namespace.
    Namespace,
    /// Making the terminal its controlling terminal.
    Terminal,
    /// Joining the run's pids cgroup.
    Group,
    /// Mounting its own /proc.
    Proc,
    /// Starting the program beneath the namespace's init.
    Fork,
    /// Entering the working directory.
    Cwd,
    /// Entering the sandbox.
    Sandbox,
    /// The exec itself.
    Exec,
}

const STAGES: [Stage; 9] =
    [Stage::Clone, Stage::Namespace, Stage::Terminal, Stage::Group, Stage::Proc, Stage::Fork, Stage::Cwd, Stage::Sandbox, Stage::Exec];

impl Stage {
    /// What was being done, as the session's reason says it.
    pub fn doing(self) -> &'static str {
        match self {
            Stage::Clone => "could not create its process",
            Stage::Namespace => "could not map the device's user into the run's namespace",
            Stage::Terminal => "could not give it its terminal",
            Stage::Group => "could not put it in its own pids cgroup",
            Stage::Proc => "could not mount its own /proc",
            Stage::Fork => "could not start it beneath its namespace's init",
            Stage::Cwd => "could not enter its working directory",
            Stage::Sandbox => "could not enter the sandbox",
            Stage::Exec => "could not execute it",
        }
    }
}

/// A start that failed: where, and the system's error.
#[derive(Debug, Clone, Copy)]
pub struct Failure {
    /// Which step of the start failed.
    pub stage: Stage,
    /// The system's error number for it.
    pub errno: i32,
}

impl Failure {
    /// The system's error.
    pub fn error(&self) -> std::io::Error {
        std::io::Error::from_raw_os_error(self.errno)
    }
}

/// The run's own PID namespace, as the plan asks for it.
#[derive(Debug, Clone, Copy)]
pub struct Namespace {
    /// With a user namespace (a device that is not root).
    pub user: bool,
    /// With its own /proc.
    pub own_proc: bool,
}

/// Everything the child needs, made before the clone.
pub struct Plan {
    program: CString,
    _argv: Vec<CString>,
    argv: Vec<*const c_char>,
    _envp: Vec<CString>,
    envp: Vec<*const c_char>,
    cwd: CString,
    tty: RawFd,
    confine: Option<ChildConfine>,
    namespace: Option<Namespace>,
    group: Option<CString>,
    /// With a namespace: the heap the init lets go of once the program is started.
    heap: Option<crate::regions::HeapRegions>,
}

/// A started program.
pub struct Started {
    /// The process the shim waits for: the program, or its namespace's init.
    pub pid: u32,
    /// With a namespace: where the init writes the program's own wait status.
    pub status: Option<File>,
}

fn cstring(s: impl Into<Vec<u8>>) -> std::io::Result<CString> {
    CString::new(s).map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "a NUL byte in the command, environment or path"))
}

fn null_terminated(v: &[CString]) -> Vec<*const c_char> {
    v.iter().map(|s| s.as_ptr()).chain(std::iter::once(std::ptr::null())).collect()
}

/// What goes into a [`Plan`].
pub struct PlanParts<'a> {
    /// The resolved program.
    pub program: &'a std::path::Path,
    /// Its arguments, `argv[0]` first.
    pub argv: &'a [String],
    /// Its whole environment.
    pub env: &'a [(String, String)],
    /// Its working directory.
    pub cwd: &'a std::path::Path,
    /// The terminal's slave side, which becomes its stdin, stdout and stderr.
    pub tty: RawFd,
    /// The sandbox, if any.
    pub confine: Option<ChildConfine>,
    /// Its own PID namespace, if any.
    pub namespace: Option<Namespace>,
    /// The `cgroup.procs` of its own pids cgroup, if any.
    pub group: Option<&'a std::path::Path>,
}

impl Plan {
    /// Prepares every string and pointer the child uses.
    pub fn new(parts: PlanParts<'_>) -> std::io::Result<Plan> {
        use std::os::unix::ffi::OsStrExt;
        let argv: Vec<CString> = parts.argv.iter().map(|a| cstring(a.as_bytes())).collect::<Result<_, _>>()?;
        let envp: Vec<CString> = parts.env.iter().map(|(k, v)| cstring(format!("{k}={v}"))).collect::<Result<_, _>>()?;
        Ok(Plan {
            program: cstring(parts.program.as_os_str().as_bytes())?,
            argv: null_terminated(&argv),
            _argv: argv,
            envp: null_terminated(&envp),
            _envp: envp,
            cwd: cstring(parts.cwd.as_os_str().as_bytes())?,
            tty: parts.tty,
            confine: parts.confine,
            namespace: parts.namespace,
            group: parts.group.map(|g| cstring(g.as_os_str().as_bytes())).transpose()?,
            heap: parts.namespace.map(|_| crate::regions::HeapRegions::now()),
        })
    }

    /// Starts the program: returns once it has exec'd, or with where and why it could not.
    pub fn start(&self) -> Result<Started, Failure> {
        let io = |stage| move |e: std::io::Error| Failure { stage, errno: e.raw_os_error().unwrap_or(0) };
        let (err_r, err_w) = crate::contain::pipe().map_err(io(Stage::Clone))?;
        let user = self.namespace.is_some_and(|n| n.user);
        let sync = if user { Some(crate::contain::pipe().map_err(io(Stage::Clone))?) } else { None };
        let status = match self.namespace {
            Some(_) => Some(crate::contain::pipe().map_err(io(Stage::Clone))?),
            None => None,
        };
        let flags = if self.namespace.is_some() { namespace_flags(user) } else { 0 };
        // SAFETY: the child runs `child`, which makes only raw system calls and never returns.
        let pid = unsafe { clone_process(flags) };
        if pid == -1 {
            return Err(Failure { stage: Stage::Clone, errno: errno() });
        }
        if pid == 0 {
            let raw = |p: &Option<(std::os::fd::OwnedFd, std::os::fd::OwnedFd)>, read: bool| {
                p.as_ref().map_or(-1, |(r, w)| if read { r.as_raw_fd() } else { w.as_raw_fd() })
            };
            // SAFETY: this is the child of the clone above.
            unsafe { self.child(err_w.as_raw_fd(), raw(&sync, true), raw(&status, false)) }
        }
        drop(err_w);
        let status = status.map(|(r, _w)| File::from(r));
        if let Some((_r, w)) = sync {
            if let Err(e) = crate::contain::map_user(pid) {
                let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
                let _ = nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(pid), None);
                return Err(io(Stage::Namespace)(e));
            }
            // SAFETY: one byte from a valid buffer to an open pipe.
            unsafe { libc::write(w.as_raw_fd(), c"1".as_ptr().cast(), 1) };
        }
        match read_failure(&err_r) {
            None => Ok(Started { pid: pid as u32, status }),
            Some(failure) => {
                let _ = nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(pid), None);
                Err(failure)
            }
        }
    }

    /// The child: terminal, group, namespace, then the program (beneath an init, with a
    /// namespace).
    unsafe fn child(&self, err: RawFd, sync: RawFd, status: RawFd) -> ! {
        if sync >= 0 {
            let mut b = [0u8; 1];
            if libc::read(sync, b.as_mut_ptr().cast(), 1) != 1 {
                fail(err, Stage::Namespace, errno());
            }
        }
        // The shim's signal handling is not the run's: nothing blocked, nothing ignored.
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
        for sig in 1..65 {
            if sig != libc::SIGKILL && sig != libc::SIGSTOP {
                libc::signal(sig, libc::SIG_DFL);
            }
        }
        // Drover's own files are private (umask 077); a run creates files as usual.
        libc::umask(0o022);
        for fd in 0..3 {
            if libc::dup2(self.tty, fd) == -1 {
                fail(err, Stage::Terminal, errno());
            }
        }
        if libc::setsid() == -1 || libc::ioctl(0, libc::TIOCSCTTY as _, 0) == -1 {
            fail(err, Stage::Terminal, errno());
        }
        if let Some(procs) = &self.group {
            if let Err(e) = join_group(procs) {
                fail(err, Stage::Group, e);
            }
        }
        let Some(ns) = self.namespace else { self.program(err) };
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
        if ns.own_proc {
            if let Err(e) = own_proc() {
                fail(err, Stage::Proc, e);
            }
            if let Some(c) = &self.confine {
                if let Err(e) = c.allow_proc() {
                    fail(err, Stage::Sandbox, e.raw_os_error().unwrap_or(0));
                }
            }
        }
        let program = clone_process(0);
        if program == -1 {
            fail(err, Stage::Fork, errno());
        }
        if program == 0 {
            self.program(err);
        }
        // The init keeps only the status pipe; the terminal, the shim's files and the
        // error pipe (which tells the shim the program has exec'd) are the program's.
        libc::close_range(0, (status - 1) as libc::c_uint, 0);
        libc::close_range((status + 1) as libc::c_uint, libc::c_uint::MAX, 0);
        // Nor does it need the shim's heap (the plan included): read onto the stack, then
        // let go.
        let heap = std::ptr::read_volatile(&self.heap);
        if let Some(heap) = heap {
            heap.let_go();
        }
        init(program, status)
    }

    /// Working directory, sandbox, exec.
    unsafe fn program(&self, err: RawFd) -> ! {
        if libc::chdir(self.cwd.as_ptr()) == -1 {
            fail(err, Stage::Cwd, errno());
        }
        if let Some(c) = &self.confine {
            if let Err(e) = c.enter() {
                fail(err, Stage::Sandbox, e.raw_os_error().unwrap_or(0));
            }
        }
        libc::execve(self.program.as_ptr(), self.argv.as_ptr(), self.envp.as_ptr());
        fail(err, Stage::Exec, errno())
    }
}

/// The namespace's init: reaps every process re-parented to it; when the program ends,
/// writes its wait status and exits (the kernel then kills the rest of the namespace).
unsafe fn init(program: libc::pid_t, status: RawFd) -> ! {
    loop {
        let mut st: libc::c_int = 0;
        let r = libc::waitpid(-1, &mut st, 0);
        if r == program {
            libc::write(status, (&st as *const libc::c_int).cast(), std::mem::size_of::<libc::c_int>());
            libc::_exit(0);
        }
        if r == -1 && errno() != libc::EINTR {
            libc::_exit(1);
        }
    }
}

/// Reports a failed start to the shim and exits.
unsafe fn fail(err: RawFd, stage: Stage, errno: i32) -> ! {
    let index = STAGES.iter().position(|s| *s == stage).unwrap_or(0) as u32;
    let mut buf = [0u8; 8];
    buf[..4].copy_from_slice(&index.to_ne_bytes());
    buf[4..].copy_from_slice(&errno.to_ne_bytes());
    libc::write(err, buf.as_ptr().cast(), buf.len());
    libc::_exit(127)
}

/// What a failed child wrote to the error pipe; None once it has exec'd (end of file).
fn read_failure(pipe: &std::os::fd::OwnedFd) -> Option<Failure> {
    let mut buf = [0u8; 8];
    let mut got = 0;
    while got < buf.len() {
        // SAFETY: reads into the rest of a valid buffer from an open pipe.
        let n = unsafe { libc::read(pipe.as_raw_fd(), buf[got..].as_mut_ptr().cast(), buf.len() - got) };
        match n {
            0 => break,
            n if n > 0 => got += n as usize,
            _ if errno() == libc::EINTR => continue,
            _ => break,
        }
    }
    if got < buf.len() {
        return None;
    }
    let stage = STAGES.get(u32::from_ne_bytes(buf[..4].try_into().ok()?) as usize).copied()?;
    Some(Failure { stage, errno: i32::from_ne_bytes(buf[4..].try_into().ok()?) })
}

//! What holds a run's processes together on this machine: a PID namespace of its own
//! (with a user namespace when the device is not root) and its own /proc, and a pids
//! cgroup per run for the process limit. [`probe`] finds out once what the machine
//! allows, by trying it; what it does not allow is reported, never silently skipped.
//! The child side of entering them is in [`crate::exec`].

use std::fs;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use drover_core::confinement::Containment;

/// What [`probe`] found: what runs get, and why they do not get the rest.
#[derive(Debug, Clone, Default)]
pub struct Probe {
    /// What runs are put in.
    pub containment: Containment,
    /// Why a part is missing, as people read it.
    pub missing: Vec<String>,
}

/// The directory, in each writable pids hierarchy, beneath which runs get their groups.
const RUNS_DIR: &str = "drover-runs";

/// Tries, in throwaway processes, what this machine lets a run be put in.
pub fn probe() -> Probe {
    let mut out = Probe::default();
    let user = nix::unistd::geteuid().as_raw() != 0;
    match try_namespaces(user) {
        Ok(own_proc) => {
            out.containment.pid_namespace = true;
            out.containment.user_namespace = user;
            match own_proc {
                Ok(()) => out.containment.own_proc = true,
                Err(e) => out.missing.push(format!("no /proc of its own ({e})")),
            }
        }
        Err(e) => out.missing.push(format!("no PID namespace ({e}): the shim holds the process tree as subreaper")),
    }
    match runs_cgroup().and_then(|dir| try_cgroup(&dir).map(|()| dir)) {
        Ok(dir) => {
            sweep(&dir);
            out.containment.cgroup = Some(dir.display().to_string());
        }
        Err(e) => out.missing.push(format!("no pids cgroup ({e}): the process limit is per user")),
    }
    out
}

/// Starts a process in a new PID namespace (and user namespace) that mounts its own
/// /proc, and says how far it got: Err if no namespace, Ok(Err) if no /proc.
fn try_namespaces(user: bool) -> Result<Result<(), String>, String> {
    let (sync_r, sync_w) = pipe().map_err(|e| e.to_string())?;
    // SAFETY: the child makes only raw system calls and exits.
    let pid = unsafe { crate::exec::clone_process(crate::exec::namespace_flags(user)) };
    if pid == -1 {
        return Err(std::io::Error::last_os_error().to_string());
    }
    if pid == 0 {
        // SAFETY: in the child: raw system calls, then _exit.
        unsafe {
            let mut b = [0u8; 1];
            if libc::read(sync_r.as_raw_fd(), b.as_mut_ptr().cast(), 1) != 1 {
                libc::_exit(3);
            }
            libc::_exit(if crate::exec::own_proc().is_ok() { 0 } else { 2 });
        }
    }
    drop(sync_r);
    let mapped = if user { map_user(pid) } else { Ok(()) };
    let _ = fs::File::from(sync_w).write_all(b"1");
    let status = nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(pid), None).map_err(|e| e.to_string())?;
    mapped.map_err(|e| format!("could not map the user into its namespace: {e}"))?;
    match status {
        nix::sys::wait::WaitStatus::Exited(_, 0) => Ok(Ok(())),
        nix::sys::wait::WaitStatus::Exited(_, 2) => Ok(Err("mounting proc was refused".into())),
        other => Err(format!("the probe ended {other:?}")),
    }
}

/// Maps the device's user (and group) into the user namespace of `pid` as themselves,
/// so files the run makes are the user's. Called by the parent, before the child goes on.
pub fn map_user(pid: libc::pid_t) -> std::io::Result<()> {
    let uid = nix::unistd::geteuid().as_raw();
    let gid = nix::unistd::getegid().as_raw();
    fs::write(format!("/proc/{pid}/setgroups"), "deny")?;
    fs::write(format!("/proc/{pid}/uid_map"), format!("{uid} {uid} 1\n"))?;
    fs::write(format!("/proc/{pid}/gid_map"), format!("{gid} {gid} 1\n"))?;
    Ok(())
}

/// A close-on-exec pipe: (read end, write end).
pub fn pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into a valid array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } == -1 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: both descriptors are fresh and owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Makes a group in `dir` and moves a throwaway process into it.
fn try_cgroup(dir: &Path) -> Result<(), String> {
    let group = RunGroup::create(dir, &format!("run-{}-probe", std::process::id()), Some(64)).map_err(|e| e.to_string())?;
    let procs = std::ffi::CString::new(group.procs().as_os_str().as_encoded_bytes()).map_err(|e| e.to_string())?;
    // SAFETY: the child makes only raw system calls and exits.
    let pid = unsafe { crate::exec::clone_process(0) };
    if pid == -1 {
        return Err(std::io::Error::last_os_error().to_string());
    }
    if pid == 0 {
        // SAFETY: in the child: raw system calls, then _exit.
        unsafe { libc::_exit(if crate::exec::join_group(&procs).is_ok() { 0 } else { 1 }) }
    }
    match nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(pid), None) {
        Ok(nix::sys::wait::WaitStatus::Exited(_, 0)) => Ok(()),
        _ => Err(format!("a process cannot be moved into {}", dir.display())),
    }
}

/// Removes the groups of runs whose shim is gone (killed before it could remove them);
/// a group still holding processes stays (the kernel refuses to remove it).
fn sweep(dir: &Path) {
    let Ok(entries) = fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(shim) = name.to_str().and_then(shim_of) else { continue };
        if !Path::new(&format!("/proc/{shim}")).exists() {
            let _ = fs::remove_dir(e.path());
        }
    }
}

/// The shim a group name (`run-<shim pid>-<n>`) belongs to.
fn shim_of(name: &str) -> Option<u32> {
    name.strip_prefix("run-")?.split('-').next()?.parse().ok()
}

/// One run's pids cgroup, removed when dropped (once its processes are gone).
#[derive(Debug)]
pub struct RunGroup {
    dir: PathBuf,
}

impl RunGroup {
    /// Makes the group `name` in the runs directory `parent`, with at most `max`
    /// processes (its init included).
    pub fn create(parent: &Path, name: &str, max: Option<u64>) -> std::io::Result<RunGroup> {
        let dir = parent.join(name);
        match fs::create_dir(&dir) {
            Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => return Err(e),
            _ => {}
        }
        let group = RunGroup { dir };
        if let Some(max) = max {
            fs::write(group.dir.join("pids.max"), max.saturating_add(1).to_string())?;
        }
        Ok(group)
    }

    /// The file a process writes `0` to in order to join the group.
    pub fn procs(&self) -> PathBuf {
        self.dir.join("cgroup.procs")
    }

    /// How many processes are in the group now.
    #[cfg(test)]
    fn current(&self) -> Option<u64> {
        fs::read_to_string(self.dir.join("pids.current")).ok()?.trim().parse().ok()
    }
}

impl Drop for RunGroup {
    fn drop(&mut self) {
        if let Err(e) = fs::remove_dir(&self.dir) {
            tracing::debug!(dir = %self.dir.display(), "run group not removed: {e}");
        }
    }
}

/// The runs directory in a pids cgroup hierarchy this process may make groups in (made
/// if missing), or why there is none.
pub fn runs_cgroup() -> Result<PathBuf, String> {
    let mountinfo = fs::read_to_string("/proc/self/mountinfo").map_err(|e| e.to_string())?;
    let own = fs::read_to_string("/proc/self/cgroup").map_err(|e| e.to_string())?;
    let mut tried = Vec::new();
    if let Some(dir) = v1_pids_dir(&mountinfo, &own) {
        match make_runs_dir(&dir, false) {
            Ok(d) => return Ok(d),
            Err(e) => tried.push(format!("{}: {e}", dir.display())),
        }
    }
    if let Some((point, own_dir)) = v2_own_dir(&mountinfo, &own) {
        for parent in v2_parents(&own_dir, &point) {
            let controls = fs::read_to_string(parent.join("cgroup.subtree_control")).unwrap_or_default();
            if !controls.split_whitespace().any(|c| c == "pids") {
                continue;
            }
            match make_runs_dir(&parent, true) {
                Ok(d) => return Ok(d),
                Err(e) => tried.push(format!("{}: {e}", parent.display())),
            }
        }
    }
    match tried.is_empty() {
        true => Err("no pids controller is mounted where this user may make groups".into()),
        false => Err(tried.join("; ")),
    }
}

fn make_runs_dir(parent: &Path, v2: bool) -> std::io::Result<PathBuf> {
    let dir = parent.join(RUNS_DIR);
    match fs::create_dir(&dir) {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => return Err(e),
        _ => {}
    }
    if v2 {
        let mut f = fs::OpenOptions::new().write(true).open(dir.join("cgroup.subtree_control"))?;
        f.write_all(b"+pids")?;
    }
    Ok(dir)
}

/// Mount point, root within the hierarchy, filesystem type and super options of each
/// line of `/proc/self/mountinfo`.
fn mounts(mountinfo: &str) -> impl Iterator<Item = (&str, &str, &str, &str)> {
    mountinfo.lines().filter_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        let mut l = left.split(' ');
        let root = l.nth(3)?;
        let point = l.next()?;
        let mut r = right.split(' ');
        let fstype = r.next()?;
        let options = r.nth(1).unwrap_or("");
        Some((point, root, fstype, options))
    })
}

/// The process's own directory in the v1 pids hierarchy.
fn v1_pids_dir(mountinfo: &str, own: &str) -> Option<PathBuf> {
    let (point, root, _, _) = mounts(mountinfo).find(|(_, _, t, o)| *t == "cgroup" && o.split(',').any(|x| x == "pids"))?;
    let path = own.lines().find_map(|l| {
        let mut parts = l.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        controllers.split(',').any(|c| c == "pids").then_some(path)
    })?;
    Some(beneath(point, root, path))
}

/// The v2 (unified) hierarchy's mount point and the process's own directory in it.
fn v2_own_dir(mountinfo: &str, own: &str) -> Option<(PathBuf, PathBuf)> {
    let (point, root, _, _) = mounts(mountinfo).find(|(_, _, t, _)| *t == "cgroup2")?;
    let path = own.lines().find_map(|l| l.strip_prefix("0::"))?;
    Some((PathBuf::from(point), beneath(point, root, path)))
}

/// Where a cgroup `path` is, in a hierarchy whose `root` is mounted at `point`.
fn beneath(point: &str, root: &str, path: &str) -> PathBuf {
    let rel = path.strip_prefix(root).unwrap_or(path).trim_start_matches('/');
    let dir = Path::new(point).join(rel);
    if rel.is_empty() {
        PathBuf::from(point)
    } else {
        dir
    }
}

/// The v2 groups a runs directory may go in, nearest first: the ancestors of the
/// process's own group (a group with processes cannot hand controllers to children, so
/// never its own, unless it is the root, which may).
fn v2_parents(own: &Path, point: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = own.ancestors().skip(1).take_while(|p| p.starts_with(point)).map(Path::to_path_buf).collect();
    if own == point {
        out.insert(0, own.to_path_buf());
    }
    out
}

/// Reads what the run's init wrote: the program's own wait status.
pub fn read_status(mut pipe: fs::File) -> Option<i32> {
    let mut b = [0u8; 4];
    pipe.read_exact(&mut b).ok()?;
    Some(i32::from_ne_bytes(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTINFO: &str = "\
24 30 0:22 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
35 24 0:30 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:10 - cgroup2 cgroup2 rw,nsdelegate
40 24 0:35 / /sys/fs/cgroup/pids rw,nosuid,nodev,noexec,relatime shared:18 - cgroup cgroup rw,pids
41 24 0:36 /docker/abc /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory
";

    #[test]
    fn the_v1_pids_directory_is_the_own_group_beneath_the_mount() {
        let own = "8:pids:/user.slice/drover\n4:memory:/docker/abc/x\n0::/\n";
        assert_eq!(v1_pids_dir(MOUNTINFO, own), Some(PathBuf::from("/sys/fs/cgroup/pids/user.slice/drover")));
        assert_eq!(v1_pids_dir(MOUNTINFO, "8:pids:/\n"), Some(PathBuf::from("/sys/fs/cgroup/pids")));
        assert_eq!(v1_pids_dir("", "8:pids:/\n"), None);
        assert_eq!(v1_pids_dir(MOUNTINFO, "0::/\n"), None);
    }

    #[test]
    fn a_group_names_its_shim() {
        assert_eq!(shim_of("run-4242-0"), Some(4242));
        assert_eq!(shim_of("run-x-0"), None);
        assert_eq!(shim_of("probe-1"), None);
    }

    #[test]
    fn a_mount_of_a_sub_hierarchy_is_followed() {
        assert_eq!(beneath("/sys/fs/cgroup/memory", "/docker/abc", "/docker/abc/x"), PathBuf::from("/sys/fs/cgroup/memory/x"));
        assert_eq!(beneath("/sys/fs/cgroup", "/", "/"), PathBuf::from("/sys/fs/cgroup"));
    }

    #[test]
    fn v2_parents_are_the_ancestors_and_the_root_itself() {
        let own = "0::/user.slice/user-1000.slice/user@1000.service/app.slice/drover.service\n";
        let mi = "30 24 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";
        let (point, dir) = v2_own_dir(mi, own).unwrap();
        let parents = v2_parents(&dir, &point);
        assert_eq!(parents[0], PathBuf::from("/sys/fs/cgroup/user.slice/user-1000.slice/user@1000.service/app.slice"));
        assert_eq!(parents.last().unwrap(), &PathBuf::from("/sys/fs/cgroup"));
        let root = Path::new("/sys/fs/cgroup");
        assert_eq!(v2_parents(root, root), vec![PathBuf::from("/sys/fs/cgroup")]);
    }

    /// A sandbox policy with `contain`, writing `work`.
    fn policy(work: &Path, contain: Containment, processes: Option<u64>) -> drover_core::confinement::Policy {
        use drover_core::confinement::{Access, Limits, Policy};
        let mut grants = vec![crate::confine::tests::grant(work, Access::Write)];
        crate::confine::tests::system(&mut grants);
        Policy { grants, limits: Limits { memory_bytes: None, processes }, unix_sockets: false, contain }
    }

    /// Runs `script` under `policy` until its terminal closes; returns what it printed
    /// and its wait status as the shim reports it, with the spawned run's cgroup.
    fn run(policy: &drover_core::confinement::Policy, cwd: &Path, script: &str) -> (String, Option<i32>, Option<RunGroup>) {
        let command = vec!["sh".to_string(), "-c".to_string(), script.to_string()];
        let env = vec![("PATH".to_string(), "/usr/bin:/bin".to_string())];
        let launch = crate::pty::Launch { command: &command, cwd, env: &env, cols: 80, rows: 24, confine: Some(policy) };
        let mut s = crate::pty::spawn(&launch).unwrap();
        let out = crate::pty::tests::read_all(&mut s);
        let _ = nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(s.pid as i32), None);
        (out, s.program_status.take().and_then(read_status), s.group.take())
    }

    fn alive_with(marker: &str) -> bool {
        fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .any(|e| fs::read(e.path().join("cmdline")).is_ok_and(|c| String::from_utf8_lossy(&c).contains(marker)))
    }

    #[test]
    fn a_run_in_its_own_namespace_sees_only_itself_and_leaves_nothing_behind() {
        let p = probe();
        assert!(p.containment.pid_namespace && p.containment.own_proc, "the test machine offers PID namespaces: {p:?}");
        let work = tempfile::tempdir().unwrap();
        let contain = Containment { cgroup: None, ..p.containment };
        let marker = format!("{}.{}", 3000 + std::process::id() % 1000, std::process::id());
        // A detached grandchild (its own session, double-forked) outlives the program.
        let script = format!("setsid sh -c 'sleep {marker}' & echo pid=$$ procs=$(ls /proc | grep -c '^[0-9]'); echo hi > out; exit 7");
        let (out, status, _) = run(&policy(work.path(), contain, None), work.path(), &script);
        assert!(out.contains("pid=2 "), "the program is beneath its namespace's init: {out}");
        let procs: u32 = out.split("procs=").nth(1).and_then(|r| r.split_whitespace().next()).and_then(|n| n.parse().ok()).unwrap();
        assert!(procs <= 8, "only the run's own processes are visible: {out}");
        assert_eq!(status.map(|s| libc::WIFEXITED(s) && libc::WEXITSTATUS(s) == 7), Some(true), "{status:?}");
        assert_eq!(fs::read_to_string(work.path().join("out")).unwrap(), "hi\n");
        assert!(!alive_with(&format!("sleep {marker}")), "the detached grandchild ended with the run");
    }

    #[test]
    fn a_run_has_at_most_its_limit_of_processes_and_its_group_goes_with_it() {
        let dir = runs_cgroup().expect("the test machine has a writable pids cgroup");
        let work = tempfile::tempdir().unwrap();
        let contain = Containment { cgroup: Some(dir.display().to_string()), ..Containment::default() };
        let script = "for i in 1 2 3 4 5 6 7 8 9 10; do sleep 1 & done; echo started-all";
        let (out, _, none) = run(&policy(work.path(), Containment::default(), Some(4)), work.path(), script);
        assert!(out.contains("started-all") && none.is_none(), "as root, RLIMIT_NPROC does not hold: {out}");
        let (out, _, group) = run(&policy(work.path(), contain, Some(4)), work.path(), script);
        assert!(out.contains("Cannot fork") && !out.contains("started-all"), "{out}");
        let group = group.expect("a group of its own");
        let path = group.dir.clone();
        assert!(path.exists());
        // What the loop did start ends within a second (the shim ends them at once).
        for _ in 0..300 {
            if group.current() == Some(0) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        drop(group);
        assert!(!path.exists(), "the run's group is removed after it");
    }

    #[test]
    fn the_probe_says_what_is_missing_for_every_part_it_does_not_offer() {
        let p = probe();
        let c = &p.containment;
        let parts = [!c.pid_namespace, c.pid_namespace && !c.own_proc, c.cgroup.is_none()];
        assert_eq!(parts.iter().filter(|m| **m).count(), p.missing.len(), "{p:?}");
    }
}

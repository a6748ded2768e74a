//! The program's life: the input writer, the output reader, the waiter, and Stop.

use std::io::Write;
use std::os::fd::OwnedFd;
use std::sync::atomic::Ordering;
use std::sync::mpsc::RecvTimeoutError;
use std::sync::Arc;
use std::time::Duration;

use drover_core::ExitStatus;
use drover_protocol::shim::ShimExit;
use nix::sys::signal::{killpg, Signal};
use nix::sys::wait::{waitpid, WaitStatus};
use nix::unistd::Pid;
use tokio::io::unix::AsyncFd;
use tokio::sync::mpsc;

use super::state::InputItem;
use super::{output, Shared};
use crate::pty::Spawned;
use crate::quiet::room_watch;
use crate::recording::RecordingWriter;

/// How long after the program exits the reader may keep draining the terminal.
const DRAIN: Duration = Duration::from_secs(2);

/// How long, once nothing of the run is left, the reader has to read the rest.
const LAST_READ: Duration = Duration::from_secs(30);

/// How often input is retried on a terminal once hung up and opened again while full.
const HUNG_UP_RETRY: Duration = Duration::from_millis(50);

/// How long the shim keeps killing what a run left behind before it gives up.
const TREE_END: Duration = Duration::from_secs(30);

/// Starts what serves a spawned program: its input and output on the shim's runtime,
/// its waiter on a thread of its own.
pub fn start(shared: Arc<Shared>, spawned: Spawned, recording: RecordingWriter) {
    let readable = spawned.readable();
    let Spawned { pid, reader, writer, master, program_status, group } = spawned;
    *shared.pid.lock().expect("pid lock") = Some(pid);
    *shared.master.lock().expect("master lock") = Some(master);
    let (tx, rx) = mpsc::unbounded_channel::<InputItem>();
    *shared.input.lock().expect("input lock") = Some(tx);
    start_writer(writer, rx);
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let out = output::Output::new(shared.clone(), recording);
    tokio::spawn(async move {
        output::pump(out, reader, readable).await;
        let _ = done_tx.send(());
    });
    let run = Run { pid, program_status, group };
    std::thread::Builder::new().name("waiter".into()).spawn(move || wait(shared, run, done_rx)).expect("spawn waiter");
}

/// Writes input to the PTY in order. On the shim's runtime, the terminal made
/// non-blocking, so a keystroke from the device is written by the thread that received
/// it, with no other thread to wake; a thread that may block is the fallback should the
/// terminal not be made non-blocking.
fn start_writer(writer: std::fs::File, rx: mpsc::UnboundedReceiver<InputItem>) {
    match crate::pty::set_nonblocking(&writer) {
        Ok(()) => {
            tokio::spawn(write_loop(writer, rx));
        }
        Err(e) => {
            tracing::warn!("writing to the terminal from a thread of its own: {e}");
            let spawned = std::thread::Builder::new().name("pty-writer".into()).spawn(move || write_loop_blocking(writer, rx));
            spawned.expect("spawn writer");
        }
    }
}

async fn write_loop(writer: std::fs::File, mut rx: mpsc::UnboundedReceiver<InputItem>) {
    while let Some(item) = rx.recv().await {
        let result = write_all(&writer, &item.bytes).await;
        if let Some(done) = item.done {
            let _ = done.send(result);
        }
    }
}

/// Writes all of `bytes`, waiting while the program's input is full (a closed terminal
/// is an error, as is any other). The terminal is watched for room only once it is full:
/// watched always, each keystroke the program takes in would wake the shim once more.
async fn write_all(writer: &std::fs::File, mut bytes: &[u8]) -> std::io::Result<()> {
    let mut room: Option<AsyncFd<OwnedFd>> = None;
    while !bytes.is_empty() {
        match (&*writer).write(bytes) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => bytes = &bytes[n..],
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                let watch = match room {
                    Some(ref watch) => watch,
                    None => room.insert(room_watch(writer)?),
                };
                let mut ready = watch.writable().await?;
                // A hang-up, once seen, stays in the readiness for good: should the
                // terminal be open again and full, waiting for room would return at once.
                if ready.ready().is_write_closed() {
                    tokio::time::sleep(HUNG_UP_RETRY).await;
                }
                ready.clear_ready();
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn write_loop_blocking(mut writer: std::fs::File, mut rx: mpsc::UnboundedReceiver<InputItem>) {
    while let Some(item) = rx.blocking_recv() {
        let result = writer.write_all(&item.bytes);
        if let Some(done) = item.done {
            let _ = done.send(result);
        }
    }
}

/// What the waiter waits for and cleans up after.
struct Run {
    pid: u32,
    program_status: Option<std::fs::File>,
    group: Option<crate::contain::RunGroup>,
}

fn wait(shared: Arc<Shared>, run: Run, reader_done: std::sync::mpsc::Receiver<()>) {
    let Run { pid, program_status, group } = run;
    let waited = wait_for(pid);
    // In its own namespace the shim waited for the init; the program's own status is what
    // the init wrote (nothing if the init was killed: then the run was, too).
    let status = program_status.and_then(crate::contain::read_status).map(decode).unwrap_or(waited);
    if reader_done.recv_timeout(DRAIN).is_err() {
        // Something still holds the terminal open: end the rest of the group.
        let _ = killpg(Pid::from_raw(pid as i32), Signal::SIGHUP);
        if reader_done.recv_timeout(Duration::from_millis(500)).is_err() {
            let _ = killpg(Pid::from_raw(pid as i32), Signal::SIGKILL);
        }
    }
    // Nothing of a run outlives it: whatever it left behind, detached or not, ends now.
    if !crate::tree::end_all(std::process::id(), TREE_END) {
        tracing::warn!("some processes of the run could not be ended");
    }
    drop(group);
    // Nothing holds the terminal now: the reader reaches its end once it has read what
    // is left. The end's offset is taken after that, so no output follows the end (the
    // reader shares a thread with everything else here, which may be slow to get to it).
    if let Err(RecvTimeoutError::Timeout) = reader_done.recv_timeout(LAST_READ) {
        tracing::warn!(
            "the terminal was still being read {} s after the run ended: its end is told without what is left",
            LAST_READ.as_secs()
        );
    }
    *shared.input.lock().expect("input lock") = None;
    let final_offset = shared.out.lock().expect("out lock").written;
    let exit = ShimExit {
        status: Some(status),
        start_error: None,
        stop_requested: shared.stop_requested.load(Ordering::Acquire),
        ended_at: chrono::Utc::now().to_rfc3339(),
        final_offset,
    };
    if let Err(e) = shared.dir.write_exit(&exit) {
        tracing::warn!("writing exit.json: {e}");
    }
    shared.set_exit(exit);
    // Anything that still ends beneath the shim is reaped (there should be nothing).
    loop {
        match waitpid(Pid::from_raw(-1), None) {
            Err(nix::errno::Errno::EINTR) | Ok(_) => continue,
            Err(_) => return,
        }
    }
}

/// Waits for the program, reaping on the way the run's processes that detached and were
/// re-parented to the shim (it is their subreaper). This thread is the shim's only reaper.
fn wait_for(pid: u32) -> ExitStatus {
    loop {
        match waitpid(Pid::from_raw(-1), None) {
            Ok(WaitStatus::Exited(p, code)) if p.as_raw() == pid as i32 => return ExitStatus::code(code),
            Ok(WaitStatus::Signaled(p, sig, _)) if p.as_raw() == pid as i32 => return ExitStatus::signal(sig as i32),
            Ok(_) => continue,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => {
                tracing::warn!("waitpid failed: {e}");
                return ExitStatus { code: None, signal: None };
            }
        }
    }
}

/// A raw wait status as the session reports it.
fn decode(raw: i32) -> ExitStatus {
    if libc::WIFSIGNALED(raw) {
        ExitStatus::signal(libc::WTERMSIG(raw))
    } else {
        ExitStatus::code(libc::WEXITSTATUS(raw))
    }
}

/// Stop: SIGTERM to the whole process group and to every other process of the run (one
/// that left the group is still beneath the shim) now, SIGKILL after `grace` to all of
/// them if the program is still there.
pub fn stop(shared: Arc<Shared>, grace: Duration) {
    shared.stop_requested.store(true, Ordering::Release);
    let Some(pid) = *shared.pid.lock().expect("pid lock") else { return };
    if shared.exit().is_some() {
        return;
    }
    let pgid = Pid::from_raw(pid as i32);
    let _ = killpg(pgid, Signal::SIGTERM);
    let _ = killpg(pgid, Signal::SIGCONT);
    crate::tree::signal_all(std::process::id(), Signal::SIGTERM);
    tokio::spawn(async move {
        tokio::time::sleep(grace).await;
        if shared.exit().is_none() {
            let _ = killpg(pgid, Signal::SIGKILL);
            crate::tree::signal_all(std::process::id(), Signal::SIGKILL);
        }
    });
}

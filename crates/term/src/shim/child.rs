//! The program's life: the input writer, the reader, the waiter, and Stop.

use std::io::Write;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use drover_core::ExitStatus;
use drover_protocol::shim::ShimExit;
use nix::sys::signal::{killpg, Signal};
use nix::sys::wait::{waitpid, WaitStatus};
use nix::unistd::Pid;
use tokio::sync::mpsc;

use super::state::InputItem;
use super::{output, Shared};
use crate::pty::Spawned;
use crate::recording::RecordingWriter;

/// How long after the program exits the reader may keep draining the terminal.
const DRAIN: Duration = Duration::from_secs(2);

/// Starts the threads that serve a spawned program.
pub fn start(shared: Arc<Shared>, spawned: Spawned, recording: RecordingWriter) {
    let readable = spawned.readable();
    let Spawned { pid, reader, writer, master } = spawned;
    *shared.pid.lock().expect("pid lock") = Some(pid);
    *shared.master.lock().expect("master lock") = Some(master);
    let (tx, rx) = mpsc::channel::<InputItem>(256);
    *shared.input.lock().expect("input lock") = Some(tx);
    std::thread::Builder::new().name("pty-writer".into()).spawn(move || write_loop(writer, rx)).expect("spawn writer");
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let s = shared.clone();
    std::thread::Builder::new()
        .name("pty-reader".into())
        .spawn(move || {
            output::pump(s, reader, readable, recording);
            let _ = done_tx.send(());
        })
        .expect("spawn reader");
    std::thread::Builder::new().name("waiter".into()).spawn(move || wait(shared, pid, done_rx)).expect("spawn waiter");
}

fn write_loop(mut writer: Box<dyn Write + Send>, mut rx: mpsc::Receiver<InputItem>) {
    while let Some(item) = rx.blocking_recv() {
        let result = writer.write_all(&item.bytes).and_then(|_| writer.flush());
        if let Some(done) = item.done {
            let _ = done.send(result);
        }
    }
}

fn wait(shared: Arc<Shared>, pid: u32, reader_done: std::sync::mpsc::Receiver<()>) {
    let status = loop {
        match waitpid(Pid::from_raw(pid as i32), None) {
            Ok(WaitStatus::Exited(_, code)) => break ExitStatus::code(code),
            Ok(WaitStatus::Signaled(_, sig, _)) => break ExitStatus::signal(sig as i32),
            Ok(_) => continue,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => {
                tracing::warn!("waitpid failed: {e}");
                break ExitStatus { code: None, signal: None };
            }
        }
    };
    if reader_done.recv_timeout(DRAIN).is_err() {
        // Something still holds the terminal open: end the rest of the group.
        let _ = killpg(Pid::from_raw(pid as i32), Signal::SIGHUP);
        if reader_done.recv_timeout(Duration::from_millis(500)).is_err() {
            let _ = killpg(Pid::from_raw(pid as i32), Signal::SIGKILL);
            let _ = reader_done.recv_timeout(Duration::from_millis(500));
        }
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
}

/// Stop: SIGTERM to the whole process group now, SIGKILL after `grace` if it is still there.
pub fn stop(shared: Arc<Shared>, grace: Duration) {
    shared.stop_requested.store(true, Ordering::Release);
    let Some(pid) = *shared.pid.lock().expect("pid lock") else { return };
    if shared.exit().is_some() {
        return;
    }
    let pgid = Pid::from_raw(pid as i32);
    let _ = killpg(pgid, Signal::SIGTERM);
    let _ = killpg(pgid, Signal::SIGCONT);
    tokio::spawn(async move {
        tokio::time::sleep(grace).await;
        if shared.exit().is_none() {
            let _ = killpg(pgid, Signal::SIGKILL);
        }
    });
}

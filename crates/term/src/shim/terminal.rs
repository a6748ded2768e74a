//! A local viewer's terminal, taken over as `tmux attach` hands its terminal to the tmux
//! server: the shim writes the output straight to it and reads the keys typed there, so
//! a keystroke and its echo wake this one process, not the viewer's as well.
//!
//! The viewer's descriptor is opened again as the shim's own (non-blocking there only:
//! the viewer's shell shares the first). What the shim writes is what the viewer would
//! have written (the program's output, as it came); what it reads goes to the program
//! as the viewer would have sent it. It never reaches the run: the run was started
//! before, and the shim's descriptors are closed on exec.

use std::io::Read;
use std::os::fd::{AsRawFd, OwnedFd};

use drover_protocol::shim::ShimExit;
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;
use tokio::sync::oneshot;

use super::state::Next;
use super::Shared;
use crate::quiet::write_all_to;

/// Largest piece of output written at a time.
const MAX_WRITE: usize = 256 * 1024;

/// What the viewer asked for with the terminal.
pub struct Take {
    /// First offset to write.
    pub from_offset: u64,
    /// Keys are not sent to the program.
    pub read_only: bool,
    /// The key that hands the terminal back.
    pub detach_key: u8,
}

/// Why the shim stopped touching the terminal.
pub enum Ended {
    /// The output ended and all of it was written.
    Exited(ShimExit),
    /// The detach key was typed.
    Detached,
    /// The viewer asked for it back.
    Released,
    /// It could not be used: why.
    Failed(String),
}

/// Serves the terminal `tty` until the output ends, the detach key, or `release`.
pub async fn serve(shared: &Shared, tty: OwnedFd, take: Take, release: oneshot::Receiver<()>) -> Ended {
    let file = match reopen(tty) {
        Ok(f) => f,
        Err(e) => return Ended::Failed(format!("the terminal could not be opened: {e}")),
    };
    // SAFETY: the file owns its descriptor, open until the `AsyncFd` drops it.
    let fd = match unsafe { AsyncFd::register_with_interest(file, Interest::READABLE) } {
        Ok(fd) => fd,
        Err(e) => return Ended::Failed(format!("the terminal could not be watched: {}", e.into_parts().1)),
    };
    let mut release = release;
    let mut changed = shared.changed.subscribe();
    let mut next = take.from_offset;
    let mut keys = vec![0u8; 4096];
    loop {
        changed.borrow_and_update();
        if let Err(e) = write_output(shared, fd.get_ref(), &mut next).await {
            return Ended::Failed(format!("writing to the terminal: {e}"));
        }
        if let Some(exit) = shared.exit().filter(|exit| next >= exit.final_offset) {
            return Ended::Exited(exit);
        }
        tokio::select! {
            _ = changed.changed() => {}
            _ = &mut release => return Ended::Released,
            ready = fd.readable() => {
                let Ok(mut ready) = ready else { return Ended::Failed("the terminal cannot be read".into()) };
                match ready.try_io(|f| f.get_ref().read(&mut keys)) {
                    Ok(Ok(0)) => return Ended::Failed("the terminal hung up".into()),
                    Ok(Ok(n)) => if typed(shared, &keys[..n], &take) { return Ended::Detached },
                    Ok(Err(e)) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Ok(Err(e)) => return Ended::Failed(format!("reading the terminal: {e}")),
                    Err(_would_block) => {}
                }
            }
        }
    }
}

/// Opens the terminal behind `tty` again, as this process's own open file: made
/// non-blocking, it leaves the viewer's (shared with its shell) as it was.
fn reopen(tty: OwnedFd) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    if !nix::unistd::isatty(tty.as_raw_fd()).unwrap_or(false) {
        return Err(std::io::Error::other("not a terminal"));
    }
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOCTTY | libc::O_NONBLOCK)
        .open(format!("/proc/self/fd/{}", tty.as_raw_fd()))
}

/// Writes what the program has printed from `next` on.
async fn write_output(shared: &Shared, tty: &std::fs::File, next: &mut u64) -> std::io::Result<()> {
    loop {
        match shared.next_output(*next, MAX_WRITE) {
            Next::Data(piece) => {
                write_all_to(tty, &piece.data).await?;
                *next = piece.offset + piece.data.len() as u64;
            }
            Next::Gap(to) => {
                tracing::warn!("output {}..{to} is no longer available", *next);
                *next = to;
            }
            Next::Wait => return Ok(()),
        }
    }
}

/// Hands what was typed to the program, up to the detach key; true if it was typed.
fn typed(shared: &Shared, keys: &[u8], take: &Take) -> bool {
    let detach = keys.iter().position(|k| *k == take.detach_key);
    let keys = &keys[..detach.unwrap_or(keys.len())];
    if !take.read_only && !keys.is_empty() {
        if let Err(e) = shared.queue_input(keys.to_vec(), false) {
            tracing::debug!("input dropped: {e}");
        }
    }
    detach.is_some()
}

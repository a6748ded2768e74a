//! A local viewer's terminal, taken over as `tmux attach` hands its terminal to the tmux
//! server: the shim writes the output straight to it and reads the keys typed there, so
//! a keystroke and its echo wake this one process, not the viewer's as well.
//!
//! Attach opens its terminal again for the shim, so the shim's open file is its own
//! (non-blocking there only: the shell shares attach's). What the shim writes is what the viewer would
//! have written (the program's output, as it came); what it reads goes to the program
//! as the viewer would have sent it. It never reaches the run: the run was started
//! before, and the shim's descriptors are closed on exec.

use std::io::{Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};

use bytes::{Buf, Bytes};
use drover_protocol::shim::ShimExit;
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;
use tokio::sync::oneshot;

use super::state::Next;
use super::Shared;
use crate::quiet::room_watch;

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

/// Serves the terminal `tty` until the output ends, the detach key, or `release`. One
/// write at a time, with a look at the keys and `release` between writes, so a flood to
/// a terminal that drains slowly holds up neither Ctrl-C nor the detach key.
pub async fn serve(shared: &Shared, tty: OwnedFd, take: Take, release: oneshot::Receiver<()>) -> Ended {
    let file = match own(tty) {
        Ok(f) => f,
        Err(e) => return Ended::Failed(format!("the terminal cannot be used: {e}")),
    };
    // SAFETY: the file owns its descriptor, open until the `AsyncFd` drops it.
    let fd = match unsafe { AsyncFd::register_with_interest(file, Interest::READABLE) } {
        Ok(fd) => fd,
        Err(e) => return Ended::Failed(format!("the terminal could not be watched: {}", e.into_parts().1)),
    };
    let mut release = release;
    let mut changed = shared.changed.subscribe();
    let mut out = Pending { data: Bytes::new(), next: take.from_offset };
    let mut room: Option<AsyncFd<OwnedFd>> = None;
    let mut keys = vec![0u8; 4096];
    loop {
        changed.borrow_and_update();
        let again = match out.write(shared, fd.get_ref()) {
            Ok(Wrote::Some) => {
                room = None;
                true
            }
            Ok(Wrote::Full) if room.is_none() => {
                match room_watch(fd.get_ref()) {
                    Ok(watch) => room = Some(watch),
                    Err(e) => return Ended::Failed(format!("the terminal could not be watched: {e}")),
                }
                false
            }
            Ok(Wrote::Full | Wrote::Nothing) => false,
            Err(e) => return Ended::Failed(format!("writing to the terminal: {e}")),
        };
        if let Some(exit) = shared.exit().filter(|exit| out.data.is_empty() && out.next >= exit.final_offset) {
            return Ended::Exited(exit);
        }
        tokio::select! {
            biased;
            _ = &mut release => return Ended::Released,
            ready = fd.readable() => {
                let Ok(mut ready) = ready else { return Ended::Failed("the terminal cannot be read".into()) };
                match ready.try_io(|f| f.get_ref().read(&mut keys)) {
                    Ok(Ok(0)) => return Ended::Failed("the terminal hung up".into()),
                    Ok(Ok(n)) => {
                        if typed(shared, &keys[..n], &take) {
                            return Ended::Detached;
                        }
                        // Less than asked for: the terminal holds no more now (what comes
                        // after this read wakes it again), so no read to learn that.
                        if n < keys.len() {
                            ready.clear_ready();
                        }
                    }
                    Ok(Err(e)) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Ok(Err(e)) => return Ended::Failed(format!("reading the terminal: {e}")),
                    Err(_would_block) => {}
                }
            }
            found = room_in(&room) => if let Err(e) = found { return Ended::Failed(format!("the terminal could not be watched: {e}")) },
            _ = changed.changed(), if out.data.is_empty() => {}
            _ = std::future::ready(()), if again => {}
        }
    }
}

/// Takes the terminal attach opened for the shim (its own open file, so making it
/// non-blocking leaves the one its shell shares as it was).
fn own(tty: OwnedFd) -> std::io::Result<std::fs::File> {
    if !nix::unistd::isatty(tty.as_raw_fd()).unwrap_or(false) {
        return Err(std::io::Error::other("not a terminal"));
    }
    let file = std::fs::File::from(tty);
    crate::pty::set_nonblocking(&file)?;
    Ok(file)
}

/// Output on its way to the terminal: what is left of the piece being written, and
/// where the stream stands after it.
struct Pending {
    data: Bytes,
    next: u64,
}

/// What one write did.
enum Wrote {
    /// Wrote or moved on: there may be more to write at once.
    Some,
    /// The terminal is full.
    Full,
    /// Nothing is waiting to be written.
    Nothing,
}

impl Pending {
    /// Writes what the terminal takes now of the piece under way, or of the next one.
    fn write(&mut self, shared: &Shared, tty: &std::fs::File) -> std::io::Result<Wrote> {
        if self.data.is_empty() {
            match shared.next_output(self.next, MAX_WRITE) {
                Next::Data(piece) => {
                    self.next = piece.offset + piece.data.len() as u64;
                    self.data = piece.data;
                }
                Next::Gap(to) => {
                    tracing::warn!("output {}..{to} is no longer available", self.next);
                    self.next = to;
                    return Ok(Wrote::Some);
                }
                Next::Wait => return Ok(Wrote::Nothing),
            }
        }
        match (&*tty).write(&self.data) {
            Ok(0) => Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => {
                self.data.advance(n);
                Ok(Wrote::Some)
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => Ok(Wrote::Some),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Ok(Wrote::Full),
            Err(e) => Err(e),
        }
    }
}

/// Waits for room in the terminal when it was full (for ever when it was not).
async fn room_in(room: &Option<AsyncFd<OwnedFd>>) -> std::io::Result<()> {
    match room {
        Some(watch) => {
            watch.writable().await?.clear_ready();
            Ok(())
        }
        None => std::future::pending().await,
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

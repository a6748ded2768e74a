//! The shim's shared state: output ring and counters, size, exit, viewers.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use drover_render::ring::{OutputRing, RingLimits};

use bytes::Bytes;
use drover_protocol::shim::{SessionSpec, ShimExit};
use tokio::sync::{mpsc, oneshot, watch, Notify};

use crate::dir::SessionDir;
use crate::recording::RecordingReader;
use crate::screen::{Screen, StreamProgress};

/// Recent output kept in memory so live forwarding rarely touches the file.
pub const RING_BYTES: usize = 1024 * 1024;

/// Bytes to write to the PTY, with an optional confirmation once written.
pub struct InputItem {
    /// What to write, as typed.
    pub bytes: Vec<u8>,
    /// Told the result once the bytes are written.
    pub done: Option<oneshot::Sender<std::io::Result<()>>>,
    /// Its share of `INPUT_BUDGET`, given back when the writer is done with it.
    _held: Held,
}

/// The most input the shim holds for its program, in bytes: beyond it, what is sent is
/// refused (a program that does not read cannot make its sender, or the Stop behind it,
/// wait), and up to it a paste into a program that reads slowly is kept whole.
pub const INPUT_BUDGET: usize = 16 << 20;

/// Bytes counted in the input queue until dropped.
struct Held {
    queued: Arc<AtomicUsize>,
    len: usize,
}

impl Drop for Held {
    fn drop(&mut self) {
        self.queued.fetch_sub(self.len, Ordering::AcqRel);
    }
}

/// What the ring keeps: whole reads as they came (each with its own time), no expiry.
const RING: RingLimits = RingLimits { bytes: RING_BYTES, join_up_to: 0, join_within: std::time::Duration::ZERO, max_age: None };

/// The output stream's state.
pub struct OutState {
    ring: OutputRing,
    /// Total bytes the program printed.
    pub written: u64,
    /// Bytes safely in the recording file.
    pub file_until: u64,
    /// The recording failed; later bytes exist only in memory.
    pub failed: Option<String>,
}

/// Output for the forwarder to send.
pub struct Piece {
    /// Where it starts in the stream.
    pub offset: u64,
    /// When its first byte was written, in µs since the program started.
    pub t_micros: u64,
    /// Its bytes (shared with the ring, not copied out of it).
    pub data: Bytes,
}

/// What the forwarder should do next.
pub enum Next {
    /// Send this.
    Data(Piece),
    /// Nothing new yet.
    Wait,
    /// Bytes before this offset can no longer be had (recording failed); skip to it.
    Gap(u64),
}

impl Default for OutState {
    fn default() -> OutState {
        OutState { ring: OutputRing::new(RING), written: 0, file_until: 0, failed: None }
    }
}

impl OutState {
    /// Adds output read from the PTY at `offset`, trimming the ring.
    pub fn push(&mut self, offset: u64, t_micros: u64, data: Bytes) {
        self.written = offset + data.len() as u64;
        self.ring.push(offset, t_micros, data, Instant::now());
    }

    fn ring_start(&self) -> u64 {
        self.ring.start().unwrap_or(self.written)
    }

    /// Up to `max` bytes from the ring starting at `from` (which must be in the ring).
    fn ring_range(&self, from: u64, max: usize) -> Piece {
        let (t_micros, data) = self.ring.range(from, max).expect("the offset is in the ring");
        Piece { offset: from, t_micros, data }
    }
}

/// State shared by the shim's threads and tasks.
pub struct Shared {
    /// What runs.
    pub spec: SessionSpec,
    /// Where its files are.
    pub dir: SessionDir,
    /// When the program started (RFC 3339).
    pub started_at: String,
    /// Monotonic start, for `t_micros`.
    pub started: Instant,
    /// The program's pid (= process group id), once started.
    pub pid: Mutex<Option<u32>>,
    /// Current size (cols, rows).
    pub size: Mutex<(u16, u16)>,
    /// The output stream.
    pub out: Mutex<OutState>,
    /// Bumped whenever output, exit or an error changes.
    pub changed: watch::Sender<u64>,
    /// The recording, read back by a connection that fell behind the ring; open for as
    /// long as the shim runs, since the device removes the session's directory once it
    /// has released the shim, while a slow viewer may still be owed the tail.
    recorded: RecordingReader,
    /// Progress shared with the screen worker.
    pub progress: Arc<StreamProgress>,
    /// The screen worker.
    pub screen: Screen,
    /// A Stop was requested.
    pub stop_requested: AtomicBool,
    /// Interactive viewers attached (0: the shim answers terminal queries).
    pub interactive_viewers: AtomicU32,
    /// Devices connected now.
    pub clients: AtomicU32,
    /// The device released the finished shim.
    pub released: Notify,
    /// Connections that follow the output and have not yet been sent its end: a
    /// released shim waits for them (a while) before it exits, so none loses the tail.
    pub following: AtomicU32,
    /// Writes to the PTY, in order.
    pub input: Mutex<Option<mpsc::UnboundedSender<InputItem>>>,
    /// Bytes in the input queue (at most `INPUT_BUDGET`).
    input_queued: Arc<AtomicUsize>,
    /// The PTY master, for resizing.
    pub master: Mutex<Option<crate::pty::Master>>,
    exit: Mutex<Option<ShimExit>>,
}

impl Shared {
    /// New state for `spec`, whose recording is read back by `recorded` (and followed by
    /// the screen through `progress`).
    pub fn new(
        spec: SessionSpec,
        dir: SessionDir,
        started: (Instant, chrono::DateTime<chrono::Utc>),
        (recorded, progress): (RecordingReader, Arc<StreamProgress>),
        screen: Screen,
    ) -> Shared {
        let size = (spec.cols, spec.rows);
        Shared {
            spec,
            dir,
            started_at: started.1.to_rfc3339(),
            started: started.0,
            pid: Mutex::new(None),
            size: Mutex::new(size),
            out: Mutex::new(OutState::default()),
            changed: watch::channel(0).0,
            recorded,
            progress,
            screen,
            stop_requested: AtomicBool::new(false),
            interactive_viewers: AtomicU32::new(0),
            clients: AtomicU32::new(0),
            released: Notify::new(),
            following: AtomicU32::new(0),
            input: Mutex::new(None),
            input_queued: Arc::new(AtomicUsize::new(0)),
            master: Mutex::new(None),
            exit: Mutex::new(None),
        }
    }

    /// µs since the program started.
    pub fn now_micros(&self) -> u64 {
        self.started.elapsed().as_micros() as u64
    }

    /// Wakes the forwarders.
    pub fn bump(&self) {
        self.changed.send_modify(|v| *v = v.wrapping_add(1));
    }

    /// How the program ended, once it has.
    pub fn exit(&self) -> Option<ShimExit> {
        self.exit.lock().expect("exit lock").clone()
    }

    /// Records the end and wakes the forwarders.
    pub fn set_exit(&self, exit: ShimExit) {
        *self.exit.lock().expect("exit lock") = Some(exit);
        self.bump();
    }

    /// The next piece of output from `from`, up to `max` bytes.
    pub fn next_output(&self, from: u64, max: usize) -> Next {
        let (file_until, ring_start) = {
            let out = self.out.lock().expect("out lock");
            if from >= out.written {
                return Next::Wait;
            }
            if from >= out.ring_start() {
                return Next::Data(out.ring_range(from, max));
            }
            (out.file_until, out.ring_start())
        };
        if from < file_until {
            let limit = ((file_until - from) as usize).min(max);
            match self.recorded.read_chunk(from, limit) {
                Ok(Some(chunk)) => return Next::Data(Piece { offset: chunk.offset, t_micros: chunk.t_micros, data: chunk.data.into() }),
                Ok(None) => {}
                Err(e) => tracing::warn!("reading the recording at {from}: {e}"),
            }
        }
        Next::Gap(ring_start)
    }

    /// Queues bytes for the PTY without waiting; with `confirm`, the receiver is told
    /// once they are written. Refused (`WouldBlock`) when the queue would hold more than
    /// `INPUT_BUDGET`: a program that does not read its input does not hold up whoever
    /// sends it, nor the Stop behind it.
    pub fn queue_input(&self, bytes: Vec<u8>, confirm: bool) -> std::io::Result<Option<oneshot::Receiver<std::io::Result<()>>>> {
        let ended = || std::io::Error::new(std::io::ErrorKind::BrokenPipe, "the program has ended");
        let tx = self.input.lock().expect("input lock").clone().ok_or_else(ended)?;
        let len = bytes.len();
        let held = Held { queued: self.input_queued.clone(), len };
        if self.input_queued.fetch_add(len, Ordering::AcqRel) + len > INPUT_BUDGET {
            drop(held);
            return Err(std::io::Error::new(
                std::io::ErrorKind::WouldBlock,
                "the program is not reading its input (16 MiB of it already waits)",
            ));
        }
        let (done, rx) = if confirm {
            let (tx, rx) = oneshot::channel();
            (Some(tx), Some(rx))
        } else {
            (None, None)
        };
        tx.send(InputItem { bytes, done, _held: held }).map_err(|_| ended())?;
        Ok(rx)
    }

    /// Whether no interactive viewer is attached.
    pub fn headless(&self) -> bool {
        self.interactive_viewers.load(Ordering::Acquire) == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn push(out: &mut OutState, offset: u64, data: &[u8]) {
        out.push(offset, offset * 10, Bytes::copy_from_slice(data));
    }

    #[test]
    fn ring_serves_ranges_across_chunks() {
        let mut out = OutState::default();
        push(&mut out, 0, b"abc");
        push(&mut out, 3, b"defg");
        let c = out.ring_range(2, 3);
        assert_eq!((c.offset, c.t_micros, &c.data[..]), (2, 0, &b"cde"[..]));
        let c = out.ring_range(4, 100);
        assert_eq!((c.t_micros, &c.data[..]), (30, &b"efg"[..]));
        assert_eq!(out.written, 7);
    }

    #[test]
    fn ring_is_bounded() {
        let mut out = OutState::default();
        let big = vec![b'x'; RING_BYTES / 2];
        for i in 0..5 {
            push(&mut out, i * big.len() as u64, &big);
        }
        assert!(out.ring.held() <= RING_BYTES);
        assert_eq!(out.ring_start(), 3 * big.len() as u64);
    }
}

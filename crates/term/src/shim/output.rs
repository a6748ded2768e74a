//! The PTY's output: read on the shim's runtime, recorded first, then published; terminal
//! queries answered when no interactive viewer is attached.

use std::io::Read;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use tokio::io::unix::AsyncFd;
use tokio::io::Interest;
use tokio::sync::mpsc;

use crate::queries::{self, Query, QueryScanner};
use crate::recording::RecordingWriter;

use super::Shared;

/// Bytes recorded and published at a time, at most.
const READ_BUF: usize = 64 * 1024;

/// The kernel hands a PTY's output over at most this much per read.
const PTY_READ: usize = 4096;

/// A read shorter than this drained the terminal: the pump waits for more rather than
/// reading again at once.
const SHORT_READ: usize = 512;

/// What becomes of the bytes read from the PTY.
pub struct Output {
    shared: Arc<Shared>,
    recording: RecordingWriter,
    scanner: QueryScanner,
    found: Vec<Query>,
    /// Queries to answer, in order, by a task that may wait for the screen.
    answers: mpsc::UnboundedSender<Vec<Query>>,
}

impl Output {
    /// Output for `shared`, recorded by `recording`. Starts the task that answers
    /// queries, so it is called on the shim's runtime.
    pub fn new(shared: Arc<Shared>, recording: RecordingWriter) -> Output {
        let (answers, rx) = mpsc::unbounded_channel();
        tokio::spawn(answer_queries(shared.clone(), rx));
        Output { shared, recording, scanner: QueryScanner::new(), found: Vec::new(), answers }
    }

    /// Records `data`, then publishes it and hands on the queries in it.
    fn take(&mut self, data: &[u8]) {
        let t_micros = self.shared.now_micros();
        record(&self.shared, &mut self.recording, data, t_micros);
        self.scanner.scan(data, &mut self.found);
        if !self.found.is_empty() {
            let found = std::mem::take(&mut self.found);
            if self.shared.headless() {
                let _ = self.answers.send(found);
            }
        }
    }

    /// Writes the index records of what [`Output::take`] recorded (its timing). Called
    /// once the forwarders have had the bytes, so an echo is not held up by a second
    /// file write before it is shown.
    fn write_index(&mut self) {
        if let Err(e) = self.recording.write_index() {
            let mut out = self.shared.out.lock().expect("out lock");
            if out.failed.is_none() {
                out.failed = Some(not_kept("the recording's index", &e));
            }
        }
    }

    /// The terminal has closed: everything recorded is made durable (off the runtime).
    async fn finish(self) {
        let mut recording = self.recording;
        let _ = tokio::task::spawn_blocking(move || recording.sync()).await;
    }

    /// [`Output::finish`] on a thread that may block.
    fn finish_blocking(mut self) {
        let _ = self.recording.sync();
    }
}

/// Reads the PTY until it closes, which is when the program and everything holding the
/// terminal have gone.
///
/// On the shim's runtime, so an echo wakes the one thread that also sends it on. The
/// terminal is non-blocking (its input is written from the runtime too); whatever more
/// is already waiting after a read is read into the same buffer first, so a flood is
/// recorded and published in batches of up to 64 KB (one file write, one wake-up)
/// without delaying output that trickles. Should the runtime not take the terminal, a
/// thread of its own reads it.
pub async fn pump(out: Output, reader: std::fs::File, readable: impl Fn(bool) -> bool + Send + 'static) {
    // Non-blocking (the writer made it so already, as the same open file): should it not
    // be, a read on the runtime would stall the whole shim.
    if let Err(e) = crate::pty::set_nonblocking(&reader) {
        tracing::warn!("reading the terminal from a thread of its own: {e}");
        let _ = tokio::task::spawn_blocking(move || pump_blocking(out, reader, readable)).await;
        return;
    }
    // SAFETY: a `File` owns its descriptor, open until the `AsyncFd` drops it.
    let fd = match unsafe { AsyncFd::register_with_interest(reader, Interest::READABLE) } {
        Ok(fd) => fd,
        Err(e) => {
            let (reader, e) = e.into_parts();
            tracing::warn!("reading the terminal from a thread of its own: {e}");
            let read = tokio::task::spawn_blocking(move || pump_blocking(out, reader, readable));
            let _ = read.await;
            return;
        }
    };
    let mut out = out;
    let mut buf = vec![0u8; READ_BUF];
    loop {
        let Ok(mut ready) = fd.readable().await else { break };
        let (mut n, mut closed) = (0, false);
        while n + PTY_READ <= buf.len() {
            match ready.try_io(|f| f.get_ref().read(&mut buf[n..])) {
                Ok(Ok(0)) => closed = true,
                Ok(Ok(got)) => {
                    n += got;
                    // An echo or a line: the terminal held no more, and what the program
                    // writes next wakes the pump again (the wait is edge-triggered), so
                    // no read is spent to learn it. A flood's reads are larger and go on.
                    if got < SHORT_READ {
                        ready.clear_ready();
                        break;
                    }
                }
                Ok(Err(e)) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                // EIO once every copy of the terminal's other end has closed.
                Ok(Err(_)) => closed = true,
                Err(_would_block) => break,
            }
            if closed {
                break;
            }
        }
        if n > 0 {
            out.take(&buf[..n]);
            // The forwarders (a local viewer's terminal first of all) send this batch
            // before its index record is written and the next batch is read.
            tokio::task::yield_now().await;
            out.write_index();
        }
        if closed {
            break;
        }
    }
    out.finish().await;
}

/// [`pump`] on a thread of its own: the terminal may be non-blocking, so with nothing to
/// read it waits in `readable(true)`; `readable(false)` says at once whether more waits.
fn pump_blocking(mut out: Output, mut reader: std::fs::File, readable: impl Fn(bool) -> bool) {
    let mut buf = vec![0u8; READ_BUF];
    let mut closed = false;
    while !closed {
        let mut n = 0;
        loop {
            match reader.read(&mut buf[n..]) {
                Ok(0) => closed = true,
                Ok(got) => n += got,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock && n == 0 => {
                    readable(true);
                    continue;
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(_) => closed = true,
            }
            if closed || n + PTY_READ > buf.len() || !readable(false) {
                break;
            }
        }
        if n > 0 {
            out.take(&buf[..n]);
            out.write_index();
        }
    }
    out.finish_blocking();
}

/// Why output is no longer kept on this device: `what` could not be written.
fn not_kept(what: &str, e: &std::io::Error) -> String {
    format!("{what} could not be written ({e}); the session keeps running, output is forwarded but not kept on this device")
}

fn record(shared: &Shared, recording: &mut RecordingWriter, data: &[u8], t_micros: u64) {
    let failed_before = shared.out.lock().expect("out lock").failed.is_some();
    let mut newly_failed = None;
    if !failed_before {
        if let Err(e) = recording.append_bytes(data, t_micros) {
            newly_failed = Some(not_kept("the recording", &e));
        }
    }
    let failed = failed_before || newly_failed.is_some();
    if failed {
        shared.screen.feed(data);
    }
    {
        let mut out = shared.out.lock().expect("out lock");
        let offset = out.written;
        if newly_failed.is_some() {
            out.failed = newly_failed;
        }
        if !failed {
            out.file_until = recording.len();
        }
        out.push(offset, t_micros, bytes::Bytes::copy_from_slice(data));
    }
    if !failed {
        shared.progress.recorded.store(recording.len(), Ordering::Release);
    }
    shared.bump();
}

/// Answers the queries handed on, in order, while no interactive viewer is attached (one
/// attached answers them itself). A cursor position waits for the screen to follow the
/// stream, so it is asked off the runtime.
async fn answer_queries(shared: Arc<Shared>, mut rx: mpsc::UnboundedReceiver<Vec<Query>>) {
    while let Some(found) = rx.recv().await {
        for q in found {
            if !shared.headless() {
                continue;
            }
            let cursor = match q {
                Query::CursorPosition => shared.screen.modes().await.map_or((0, 0), |m| m.cursor),
                _ => (0, 0),
            };
            // Dropped, not waited for, when the program is not reading its input.
            let _ = shared.queue_input(queries::answer(q, cursor), false);
        }
    }
}

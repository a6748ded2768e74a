//! The screen state kept beside the output stream.
//!
//! Terminal emulation is kept off the byte path (DESIGN.md): a worker thread owns a
//! `vt100` parser and catches it up from the recording file only when someone needs the
//! screen (a snapshot for a late joiner, the bracketed-paste mode for audited input, the
//! cursor for a query), when the output has gone idle, or when it lags too far behind.
//! A burst of output therefore costs the program nothing here while it streams.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use crate::recording::RecordingReader;

/// Output is parsed once it has been idle this long.
pub const IDLE_CATCH_UP: Duration = Duration::from_millis(50);
/// How often the worker looks for idle output.
const POLL: Duration = Duration::from_millis(100);
/// The worker catches up during a burst once it lags by this many bytes.
pub const MAX_LAG_BYTES: u64 = 32 * 1024 * 1024;
/// Bytes parsed per read from the recording.
const READ_STEP: usize = 1024 * 1024;

/// A screen snapshot: escape sequences that redraw the screen as of `offset`.
#[derive(Debug, Clone)]
pub struct ScreenSnapshot {
    /// Output offset the screen reflects.
    pub offset: u64,
    /// Columns.
    pub cols: u16,
    /// Rows.
    pub rows: u16,
    /// The redraw sequence.
    pub data: Vec<u8>,
}

/// Input-related state of the screen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Modes {
    /// The program enabled bracketed paste (mode 2004).
    pub bracketed_paste: bool,
    /// Cursor (row, column), 0-based.
    pub cursor: (u16, u16),
}

enum Request {
    Snapshot(oneshot::Sender<ScreenSnapshot>),
    Modes(oneshot::Sender<Modes>),
    Resize(u16, u16),
    Feed(Vec<u8>),
}

/// Progress of the output stream, shared by the PTY reader and the screen worker.
#[derive(Debug, Default)]
pub struct StreamProgress {
    /// Bytes appended to the recording file.
    pub recorded: AtomicU64,
    /// µs since start when output last arrived.
    pub last_output_micros: AtomicU64,
}

/// A handle to the screen worker; cheap to clone.
#[derive(Clone)]
pub struct Screen {
    tx: mpsc::Sender<Request>,
}

impl Screen {
    /// Starts the worker for a recording at `raw`/`idx`.
    pub fn start(raw: PathBuf, idx: PathBuf, cols: u16, rows: u16, progress: Arc<StreamProgress>, started: Instant) -> Screen {
        let (tx, rx) = mpsc::channel();
        std::thread::Builder::new()
            .name("screen".into())
            .spawn(move || Worker::new(raw, idx, cols, rows, progress, started).run(rx))
            .expect("spawn screen worker");
        Screen { tx }
    }

    /// A snapshot of the screen, caught up with everything recorded.
    pub async fn snapshot(&self) -> Option<ScreenSnapshot> {
        let (tx, rx) = oneshot::channel();
        self.tx.send(Request::Snapshot(tx)).ok()?;
        rx.await.ok()
    }

    /// The screen's input modes, caught up (blocking; for threads).
    pub fn modes_blocking(&self) -> Option<Modes> {
        let (tx, rx) = oneshot::channel();
        self.tx.send(Request::Modes(tx)).ok()?;
        rx.blocking_recv().ok()
    }

    /// The screen's input modes, caught up.
    pub async fn modes(&self) -> Option<Modes> {
        let (tx, rx) = oneshot::channel();
        self.tx.send(Request::Modes(tx)).ok()?;
        rx.await.ok()
    }

    /// Resizes the screen (after catching up).
    pub fn resize(&self, cols: u16, rows: u16) {
        let _ = self.tx.send(Request::Resize(cols, rows));
    }

    /// Feeds bytes that could not be recorded (the recording failed), in stream order.
    pub fn feed(&self, bytes: Vec<u8>) {
        let _ = self.tx.send(Request::Feed(bytes));
    }
}

struct Worker {
    raw: PathBuf,
    idx: PathBuf,
    reader: Option<RecordingReader>,
    parser: vt100::Parser,
    parsed: u64,
    progress: Arc<StreamProgress>,
    started: Instant,
}

impl Worker {
    fn new(raw: PathBuf, idx: PathBuf, cols: u16, rows: u16, progress: Arc<StreamProgress>, started: Instant) -> Self {
        Worker { raw, idx, reader: None, parser: vt100::Parser::new(rows, cols, 0), parsed: 0, progress, started }
    }

    fn run(mut self, rx: mpsc::Receiver<Request>) {
        loop {
            match rx.recv_timeout(POLL) {
                Ok(req) => self.handle(req),
                Err(RecvTimeoutError::Timeout) => self.maybe_catch_up(),
                Err(RecvTimeoutError::Disconnected) => return,
            }
        }
    }

    fn handle(&mut self, req: Request) {
        match req {
            Request::Snapshot(reply) => {
                self.catch_up();
                let _ = reply.send(self.snapshot());
            }
            Request::Modes(reply) => {
                self.catch_up();
                let screen = self.parser.screen();
                let _ = reply.send(Modes { bracketed_paste: screen.bracketed_paste(), cursor: screen.cursor_position() });
            }
            Request::Resize(cols, rows) => {
                self.catch_up();
                self.parser.set_size(rows, cols);
            }
            Request::Feed(bytes) => {
                self.parser.process(&bytes);
                self.parsed += bytes.len() as u64;
            }
        }
    }

    fn maybe_catch_up(&mut self) {
        let recorded = self.progress.recorded.load(Ordering::Acquire);
        if recorded <= self.parsed {
            return;
        }
        let now = self.started.elapsed().as_micros() as u64;
        let idle = now.saturating_sub(self.progress.last_output_micros.load(Ordering::Acquire)) >= IDLE_CATCH_UP.as_micros() as u64;
        if idle || recorded - self.parsed >= MAX_LAG_BYTES {
            self.catch_up();
        }
    }

    fn catch_up(&mut self) {
        let recorded = self.progress.recorded.load(Ordering::Acquire);
        if self.reader.is_none() {
            self.reader = RecordingReader::open(&self.raw, &self.idx).ok();
        }
        let Some(reader) = &self.reader else { return };
        while self.parsed < recorded {
            let want = ((recorded - self.parsed) as usize).min(READ_STEP);
            match reader.read_raw(self.parsed, want) {
                Ok(buf) if !buf.is_empty() => {
                    self.parser.process(&buf);
                    self.parsed += buf.len() as u64;
                }
                _ => return,
            }
        }
    }

    fn snapshot(&self) -> ScreenSnapshot {
        let screen = self.parser.screen();
        let (rows, cols) = screen.size();
        let mut data = Vec::new();
        if screen.alternate_screen() {
            data.extend_from_slice(b"\x1b[?1049h");
        }
        data.extend_from_slice(b"\x1b[0m\x1b[H\x1b[2J");
        data.extend(screen.state_formatted());
        data.extend(screen.cursor_state_formatted());
        ScreenSnapshot { offset: self.parsed, cols, rows, data }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recording::RecordingWriter;

    #[tokio::test]
    async fn snapshot_reflects_recorded_output_and_modes() {
        let dir = tempfile::tempdir().unwrap();
        let (raw, idx) = (dir.path().join("o.raw"), dir.path().join("o.idx"));
        let mut w = RecordingWriter::open(&raw, &idx).unwrap();
        let progress = Arc::new(StreamProgress::default());
        let screen = Screen::start(raw, idx, 20, 5, progress.clone(), Instant::now());
        w.append(b"hello\r\nworld\x1b[?2004h", 1).unwrap();
        progress.recorded.store(w.len(), Ordering::Release);
        let snap = screen.snapshot().await.unwrap();
        assert_eq!(snap.offset, w.len());
        assert_eq!((snap.cols, snap.rows), (20, 5));
        let mut check = vt100::Parser::new(5, 20, 0);
        check.process(&snap.data);
        assert_eq!(check.screen().contents(), "hello\nworld");
        let modes = screen.modes().await.unwrap();
        assert!(modes.bracketed_paste);
        assert_eq!(modes.cursor, (1, 5));
    }

    #[tokio::test]
    async fn resize_and_feed() {
        let dir = tempfile::tempdir().unwrap();
        let progress = Arc::new(StreamProgress::default());
        let screen = Screen::start(dir.path().join("missing.raw"), dir.path().join("missing.idx"), 10, 3, progress, Instant::now());
        screen.resize(30, 4);
        screen.feed(b"fed directly".to_vec());
        let snap = screen.snapshot().await.unwrap();
        assert_eq!((snap.cols, snap.rows, snap.offset), (30, 4, 12));
    }
}

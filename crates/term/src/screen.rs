//! The screen state kept beside the output stream.
//!
//! Terminal emulation is kept off the byte path (DESIGN.md): a worker thread owns a
//! `vt100` parser and follows the recording file behind the stream on its own thread,
//! so it never holds the bytes up. Whoever needs the screen (a snapshot for a late or lagging viewer, the
//! bracketed-paste mode for audited input, the cursor for a query) gets it caught up to
//! everything recorded; because the worker keeps up in the background, that is cheap.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, TryRecvError};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;

use crate::recording::RecordingReader;

/// How often an idle worker looks for new output.
const POLL: Duration = Duration::from_millis(20);
/// Bytes parsed per step; requests are served between steps.
const READ_STEP: usize = 256 * 1024;

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

/// How far the recording has got, shared by the PTY reader and the screen worker.
#[derive(Debug, Default)]
pub struct StreamProgress {
    /// Bytes appended to the recording file.
    pub recorded: AtomicU64,
}

/// A handle to the screen worker; cheap to clone.
#[derive(Clone)]
pub struct Screen {
    tx: mpsc::Sender<Request>,
}

impl Screen {
    /// Starts the worker for a recording at `raw`/`idx`.
    pub fn start(raw: PathBuf, idx: PathBuf, cols: u16, rows: u16, progress: Arc<StreamProgress>) -> Screen {
        let (tx, rx) = mpsc::channel();
        std::thread::Builder::new()
            .name("screen".into())
            // Normal priority on purpose: measured, a niced worker (10) starved during
            // floods, so snapshots for re-syncing viewers arrived late.
            .spawn(move || Worker::new(raw, idx, cols, rows, progress).run(rx))
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
}

impl Worker {
    fn new(raw: PathBuf, idx: PathBuf, cols: u16, rows: u16, progress: Arc<StreamProgress>) -> Self {
        Worker { raw, idx, reader: None, parser: vt100::Parser::new(rows, cols, 0), parsed: 0, progress }
    }

    fn run(mut self, rx: mpsc::Receiver<Request>) {
        loop {
            match rx.try_recv() {
                Ok(req) => {
                    self.handle(req);
                    continue;
                }
                Err(TryRecvError::Disconnected) => return,
                Err(TryRecvError::Empty) => {}
            }
            if self.step() {
                continue;
            }
            match rx.recv_timeout(POLL) {
                Ok(req) => self.handle(req),
                Err(RecvTimeoutError::Timeout) => {}
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

    /// Parses one step of recorded output; false when caught up.
    fn step(&mut self) -> bool {
        let recorded = self.progress.recorded.load(Ordering::Acquire);
        if recorded <= self.parsed {
            return false;
        }
        self.parse_until(recorded, READ_STEP)
    }

    /// Parses up to `max` bytes towards `until`; false if nothing could be read.
    fn parse_until(&mut self, until: u64, max: usize) -> bool {
        if self.reader.is_none() {
            self.reader = RecordingReader::open(&self.raw, &self.idx).ok();
        }
        let Some(reader) = &self.reader else { return false };
        let want = ((until - self.parsed) as usize).min(max);
        match reader.read_raw(self.parsed, want) {
            Ok(buf) if !buf.is_empty() => {
                self.parser.process(&buf);
                self.parsed += buf.len() as u64;
                true
            }
            _ => false,
        }
    }

    fn catch_up(&mut self) {
        let recorded = self.progress.recorded.load(Ordering::Acquire);
        while self.parsed < recorded && self.parse_until(recorded, 4 * READ_STEP) {}
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
        let screen = Screen::start(raw, idx, 20, 5, progress.clone());
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
        let screen = Screen::start(dir.path().join("missing.raw"), dir.path().join("missing.idx"), 10, 3, progress);
        screen.resize(30, 4);
        screen.feed(b"fed directly".to_vec());
        let snap = screen.snapshot().await.unwrap();
        assert_eq!((snap.cols, snap.rows, snap.offset), (30, 4, 12));
    }
}

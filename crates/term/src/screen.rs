//! The screen state kept beside the output stream.
//!
//! Terminal emulation is kept off the byte path (DESIGN.md). One `vt100` parser per
//! session follows the recording file:
//! - a background thread at the lowest CPU priority parses what was recorded whenever a
//!   core is free, so on a quiet machine the screen is always close to current;
//! - whoever needs the screen (a snapshot for a late or lagging viewer, the
//!   bracketed-paste mode for audited input, the cursor for a query) catches it up to
//!   everything recorded at their own priority, then reads it. A snapshot asked for
//!   with the screen megabytes behind (a flood) first gives the follower half a second.
//!
//! Parsing costs as much CPU as everything else in the shim, so parsing eagerly at normal
//! priority would slow the stream on a busy machine; with the low-priority follower a
//! flood is parsed only when a core is idle or someone asks.
//!
//! Once a session has printed nothing and nobody has asked for its screen for
//! [`QUIET`], the follower packs the screen (see `packed.rs`), if that loses nothing,
//! and whoever next needs it rebuilds it: a session waiting on someone holds a few KB
//! of escape sequences instead of every cell of its grids. The pages the shim's
//! allocator kept for reuse while it printed are then handed back ([`crate::heap`]).

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::{Duration, Instant};

use crate::packed::{self, Packed};
use crate::recording::RecordingReader;
use skim::Skim;

mod skim;

/// How often an idle follower looks for new output.
const POLL: Duration = Duration::from_millis(20);
/// How often it looks once the screen has been quiet for the packing time (packed or
/// not): a quiet session's shim wakes a few times a second, not fifty (a snapshot
/// catches the screen up itself).
const QUIET_POLL: Duration = Duration::from_millis(250);
/// Bytes the follower parses per step; the parser is free between steps. A caller that
/// wants the parser while a busy machine has taken the CPU from the follower mid-step
/// waits for the follower's next turn, which at the idle class comes rarely: a step is
/// kept to well under one turn's slice, so that one turn always ends it.
const FOLLOW_STEP: usize = 16 * 1024;
/// Bytes parsed per read when catching up on request.
const CATCH_UP_STEP: usize = 1024 * 1024;
/// How long a screen goes unchanged and unread before it is packed.
pub const QUIET: Duration = Duration::from_secs(5);
/// A snapshot asked for with the screen further behind the recording than this (a
/// flood) first gives the follower a while to parse the gap (see [`Screen::snapshot`]).
const FAR_BEHIND: u64 = 1024 * 1024;
/// How long a snapshot waits for the follower before it catches the screen up itself.
const FOLLOWER_WAIT: Duration = Duration::from_millis(500);
/// How often a waiting snapshot looks at where the follower stands.
const FOLLOWER_LOOK: Duration = Duration::from_millis(10);

/// A screen snapshot: escape sequences that redraw the screen as of `offset`.
#[derive(Debug, Clone)]
pub struct ScreenSnapshot {
    /// The stream offset the screen reflects: the viewer's live bytes continue from here.
    pub offset: u64,
    /// The screen's width, in columns.
    pub cols: u16,
    /// The screen's height, in rows.
    pub rows: u16,
    /// What redraws the screen on a terminal of this size (see [`drover_render::redraw`]).
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

/// How far the recording has got, shared by the PTY reader and the screen.
#[derive(Debug, Default)]
pub struct StreamProgress {
    /// Bytes appended to the recording file.
    pub recorded: AtomicU64,
}

/// A handle to the session's screen; cheap to clone.
#[derive(Clone)]
pub struct Screen {
    shared: Arc<Shared>,
}

struct Shared {
    state: Mutex<State>,
    /// Callers waiting for the parser: the follower stands aside while any are.
    waiting: AtomicUsize,
    /// Where parsing stands, as last seen with the parser's lock held (read without it).
    parsed: AtomicU64,
    progress: Arc<StreamProgress>,
    /// Resizes not yet parsed up to, in stream order (apart from the parser's lock, so a
    /// resize is placed at once however long a catch-up holds the parser).
    resizes: Mutex<VecDeque<Resize>>,
    /// How long the screen goes unchanged and unread before it is packed.
    quiet: Duration,
}

/// A resize of the terminal, applied when the parser reaches `at`: where the recorded
/// stream stood when the terminal was resized.
#[derive(Debug, Clone, Copy)]
struct Resize {
    at: u64,
    cols: u16,
    rows: u16,
}

impl Screen {
    /// Starts following a recording at `raw`/`idx`.
    /// Fails only if its follower thread cannot be started.
    pub fn start(raw: PathBuf, idx: PathBuf, cols: u16, rows: u16, progress: Arc<StreamProgress>) -> std::io::Result<Screen> {
        Screen::start_packing_after(raw, idx, cols, rows, progress, QUIET)
    }

    /// [`Screen::start`], packing the screen after `quiet` unchanged and unread.
    pub fn start_packing_after(
        raw: PathBuf,
        idx: PathBuf,
        cols: u16,
        rows: u16,
        progress: Arc<StreamProgress>,
        quiet: Duration,
    ) -> std::io::Result<Screen> {
        let model = Model::Live(Box::new(vt100::Parser::new(rows, cols, 0)));
        let skim = Skim::new(raw.clone(), idx.clone());
        let state = State { raw, idx, reader: None, model, parsed: 0, used: Instant::now(), packable: Packable::Yes };
        let resizes = Mutex::new(VecDeque::new());
        let shared = Arc::new(Shared {
            state: Mutex::new(state),
            waiting: AtomicUsize::new(0),
            parsed: AtomicU64::new(0),
            progress,
            resizes,
            quiet,
        });
        let weak = Arc::downgrade(&shared);
        std::thread::Builder::new().name("screen".into()).spawn(move || follow(weak, skim))?;
        Ok(Screen { shared })
    }

    /// The parser, caught up with everything recorded (blocking).
    fn caught_up(&self) -> MutexGuard<'_, State> {
        self.shared.waiting.fetch_add(1, Ordering::AcqRel);
        let mut state = self.shared.state.lock().unwrap_or_else(|e| e.into_inner());
        self.shared.waiting.fetch_sub(1, Ordering::AcqRel);
        state.catch_up(self.shared.progress.recorded.load(Ordering::Acquire), &self.shared.resizes, &self.shared.parsed);
        state.used = Instant::now();
        state
    }

    /// A snapshot of the screen, caught up with everything recorded by the time it is
    /// taken. With the screen far behind (a flood, which a lagging viewer's re-sync asks
    /// for again and again), the follower gets up to half a second to parse the gap
    /// first: parsed at the caller's priority, a flood's megabytes took CPU from the
    /// program printing them; the follower takes only what is left over.
    pub async fn snapshot(&self) -> Option<ScreenSnapshot> {
        self.let_the_follower_catch_up().await;
        self.snapshot_now().await
    }

    /// A snapshot of the screen, caught up with everything recorded, at once however far
    /// behind the screen is: a viewer's first screen, which it waits for before it shows
    /// anything or takes a key.
    pub async fn snapshot_now(&self) -> Option<ScreenSnapshot> {
        let this = self.clone();
        tokio::task::spawn_blocking(move || this.caught_up().snapshot()).await.ok()
    }

    /// Waits, up to [`FOLLOWER_WAIT`], while the screen is over [`FAR_BEHIND`] behind
    /// what was recorded at the call.
    async fn let_the_follower_catch_up(&self) {
        let target = self.shared.progress.recorded.load(Ordering::Acquire);
        let far_behind = || target.saturating_sub(self.shared.parsed.load(Ordering::Acquire)) > FAR_BEHIND;
        let deadline = tokio::time::Instant::now() + FOLLOWER_WAIT;
        while far_behind() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(FOLLOWER_LOOK).await;
        }
    }

    /// The screen's input modes, caught up (blocking; for threads).
    pub fn modes_blocking(&self) -> Modes {
        self.caught_up().modes()
    }

    /// The screen's input modes, caught up.
    pub async fn modes(&self) -> Option<Modes> {
        let this = self.clone();
        tokio::task::spawn_blocking(move || this.modes_blocking()).await.ok()
    }

    /// Resizes the screen where the recorded stream stands now, however far the parser
    /// is behind: called just before the terminal itself is resized, so what the program
    /// draws for the new size is parsed after it, as a terminal window would show it.
    pub fn resize(&self, cols: u16, rows: u16) {
        let mut resizes = self.shared.resizes.lock().unwrap_or_else(PoisonError::into_inner);
        let at = self.shared.progress.recorded.load(Ordering::Acquire);
        resizes.push_back(Resize { at, cols, rows });
    }

    /// Feeds bytes that could not be recorded (the recording failed), in stream order
    /// (blocking; called by the PTY reader).
    pub fn feed(&self, bytes: &[u8]) {
        let mut state = self.caught_up();
        state.process(bytes);
        state.parsed += bytes.len() as u64;
        self.shared.parsed.store(state.parsed, Ordering::Release);
        // The recording lacks these bytes, so it cannot tell whether the stream stands
        // between sequences.
        state.packable = Packable::Never;
    }
}

/// Resizes `parser`'s screen as a terminal window does: shrinking it below the cursor
/// first scrolls the lines above away (into the scrollback), so the cursor's line — the
/// prompt, the last output — stays in view. (vt100 alone would cut the bottom rows off.)
/// A cursor saved on the larger screen is brought onto the smaller one by vt100 itself
/// (since 0.16.2, doy/vt100-rust#13).
fn resize_keeping_cursor(parser: &mut vt100::Parser, cols: u16, rows: u16) {
    let old_rows = parser.screen().size().0;
    let (row, col) = parser.screen().cursor_position();
    if rows < old_rows && row >= rows && !parser.screen().alternate_screen() {
        let up = row + 1 - rows;
        // To the bottom row, `up` line feeds (each scrolls one line), then back to the
        // cursor's place among the moved lines.
        let mut seq = format!("\x1b[{old_rows};1H").into_bytes();
        seq.extend(std::iter::repeat_n(b'\n', up as usize));
        seq.extend(format!("\x1b[{};{}H", row - up + 1, col + 1).into_bytes());
        parser.process(&seq);
    }
    parser.screen_mut().set_size(rows, cols);
}

/// A new parser showing what `old` (one vt100 panicked in) showed: both grids with
/// their cursors, the attributes and the input modes (bracketed paste, application keys,
/// mouse: what input and query answers go by), rebuilt as a packed screen is
/// ([`packed::rebuild`]); blank if even that fails.
fn restarted(old: &vt100::Screen) -> vt100::Parser {
    let (rows, cols) = old.size();
    let replay = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut fresh = vt100::Parser::new(rows, cols, 0);
        fresh.process(&packed::rebuild(old, true));
        fresh
    }));
    replay.unwrap_or_else(|_| vt100::Parser::new(rows, cols, 0))
}

/// Puts the calling thread in the idle scheduling class: it runs on CPU time nothing
/// else wants, and a thread of the program's path that wakes takes the CPU from it at
/// once (at nice 19 alone it kept the CPU to the end of its slice, and a core it held
/// did not count as free for a waking thread). Nice 19 where the class is refused.
fn idle_priority() {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: both calls act on this thread's own id (0 for sched_setscheduler) and
    // read only `param`, which outlives the call.
    unsafe {
        if libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) != 0 {
            libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, 19);
        }
    }
}

/// The follower: parses recorded output in small steps at the lowest priority until the
/// screen is dropped; far behind a flood of plain lines, in large ones that parse only the
/// lines that show (`skim`).
fn follow(shared: Weak<Shared>, mut skim: Skim) {
    idle_priority();
    let mut keeping = false;
    loop {
        let Some(shared) = shared.upgrade() else { return };
        let recorded = shared.progress.recorded.load(Ordering::Acquire);
        let mut job = None;
        let mut quiet = false;
        let progressed = shared.waiting.load(Ordering::Acquire) == 0
            && (skim.step(&shared, recorded) || {
                let mut state = shared.state.lock().unwrap_or_else(|e| e.into_inner());
                skim.rows = state.live_rows();
                let progressed = recorded > state.parsed && state.parse_until(recorded, FOLLOW_STEP, &shared.resizes);
                shared.parsed.store(state.parsed, Ordering::Release);
                if !progressed && recorded == state.parsed {
                    // A resize placed where parsing stands waits for no more output.
                    state.resize_due(&shared.resizes);
                    quiet = state.used.elapsed() >= shared.quiet;
                    if quiet {
                        job = state.pack_job(&shared.resizes);
                    }
                }
                progressed
            });
        if let Some(job) = job {
            // Packing takes milliseconds (a large screen's check is tens): done unlocked.
            let packed = std::panic::catch_unwind(|| Packed::pack(&job.screen, &job.tail, job.whole)).ok().flatten();
            shared.state.lock().unwrap_or_else(|e| e.into_inner()).packed(&job, packed, &shared.resizes);
        }
        // Pages freed while the session prints are kept for reuse, and handed back as a
        // spell of quiet begins (the screen packed, if it could be).
        if progressed != keeping && (progressed || quiet) {
            crate::heap::keep_freed_pages(progressed);
            keeping = progressed;
        }
        drop(shared);
        if !progressed {
            std::thread::sleep(if quiet { QUIET_POLL } else { POLL });
        }
    }
}

struct State {
    raw: PathBuf,
    idx: PathBuf,
    reader: Option<RecordingReader>,
    model: Model,
    parsed: u64,
    /// When the screen last changed or was read.
    used: Instant,
    packable: Packable,
}

/// A screen to pack, copied with the lock held and packed without it.
struct ToPack {
    screen: vt100::Screen,
    /// The output parsed last (up to [`packed::TAIL`] bytes), and whether that is all.
    tail: Vec<u8>,
    whole: bool,
    /// Where parsing stood, and when the screen was last changed or read, at the copy.
    parsed: u64,
    used: Instant,
}

/// The screen as it is held.
enum Model {
    /// A parser, ready.
    Live(Box<vt100::Parser>),
    /// Packed while quiet.
    Packed(Packed),
}

/// Whether packing the screen is worth a try.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Packable {
    Yes,
    /// Tried and found lossy; not again until the screen changes.
    NotAsItIs,
    /// Output was parsed that the recording lacks.
    Never,
}

impl State {
    /// Parses up to `max` bytes towards `until`, applying the resizes due on the way
    /// (none is parsed past); false if nothing could be read.
    fn parse_until(&mut self, until: u64, max: usize, resizes: &Mutex<VecDeque<Resize>>) -> bool {
        let until = self.resize_due(resizes).map_or(until, |next| until.min(next));
        if self.reader.is_none() {
            self.reader = RecordingReader::open(&self.raw, &self.idx).ok();
        }
        let Some(reader) = &self.reader else { return false };
        let want = ((until.saturating_sub(self.parsed)) as usize).min(max);
        match reader.read_raw(self.parsed, want) {
            Ok(buf) if !buf.is_empty() => {
                self.process(&buf);
                self.parsed += buf.len() as u64;
                self.changed();
                true
            }
            _ => false,
        }
    }

    /// Parses `bytes`, skipping lines that scroll away unseen when that leaves the same
    /// screen ([`drover_render::offscreen`]: a flood caught up at once costs its last
    /// lines, not its megabytes). Should vt100 panic on them (a bug of its own), the
    /// screen starts afresh from what the old one showed: every later snapshot would fail
    /// otherwise, and each viewer would wait out the snapshot timeout for a stored screen.
    fn process(&mut self, bytes: &[u8]) {
        self.guarded(|parser| {
            drover_render::offscreen::process(parser, bytes);
        });
    }

    /// Runs `f` on the parser; should vt100 panic in it, the parser starts again from its
    /// last screen ([`restarted`]). False then.
    fn guarded(&mut self, f: impl FnOnce(&mut vt100::Parser)) -> bool {
        let parser = self.parser();
        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(parser))).is_ok() {
            return true;
        }
        tracing::warn!(at = self.parsed, "the screen parser failed; starting again from its last screen");
        let fresh = restarted(self.parser().screen());
        self.model = Model::Live(Box::new(fresh));
        false
    }

    /// The parser, rebuilt first if the screen was packed.
    fn parser(&mut self) -> &mut vt100::Parser {
        if let Model::Packed(packed) = &self.model {
            self.model = Model::Live(Box::new(packed.unpack()));
        }
        match &mut self.model {
            Model::Live(parser) => parser,
            Model::Packed(_) => unreachable!("unpacked just above"),
        }
    }

    /// Notes a change to the screen (output parsed, a resize).
    fn changed(&mut self) {
        self.used = Instant::now();
        if self.packable == Packable::NotAsItIs {
            self.packable = Packable::Yes;
        }
    }

    /// What packing the screen needs, if it is live, no resize is waiting and packing
    /// is worth a try: a copy of the screen and the output parsed last.
    fn pack_job(&mut self, resizes: &Mutex<VecDeque<Resize>>) -> Option<ToPack> {
        let Model::Live(parser) = &self.model else { return None };
        if self.packable != Packable::Yes || !resizes.lock().unwrap_or_else(PoisonError::into_inner).is_empty() {
            return None;
        }
        let len = self.parsed.min(packed::TAIL as u64);
        if self.reader.is_none() && len > 0 {
            self.reader = RecordingReader::open(&self.raw, &self.idx).ok();
        }
        let tail = match &self.reader {
            Some(reader) => reader.read_raw(self.parsed - len, len as usize).ok()?,
            None => Vec::new(),
        };
        let whole = len == self.parsed;
        (tail.len() as u64 == len).then(|| ToPack { screen: parser.screen().clone(), tail, whole, parsed: self.parsed, used: self.used })
    }

    /// Takes the screen packed from `job` (None: packing it would lose something) if
    /// nothing has changed or read it since.
    fn packed(&mut self, job: &ToPack, packed: Option<Packed>, resizes: &Mutex<VecDeque<Resize>>) {
        let unchanged = matches!(self.model, Model::Live(_))
            && self.parsed == job.parsed
            && self.used == job.used
            && resizes.lock().unwrap_or_else(PoisonError::into_inner).is_empty();
        match packed {
            Some(packed) if unchanged => {
                tracing::debug!(at = self.parsed, bytes = packed.len(), "screen packed");
                self.model = Model::Packed(packed);
            }
            None if unchanged => self.packable = Packable::NotAsItIs,
            _ => {}
        }
    }

    /// Parses everything `recorded`, saying in `progress` where it stands after each step.
    fn catch_up(&mut self, recorded: u64, resizes: &Mutex<VecDeque<Resize>>, progress: &AtomicU64) {
        while self.parsed < recorded && self.parse_until(recorded, CATCH_UP_STEP, resizes) {
            progress.store(self.parsed, Ordering::Release);
        }
        self.resize_due(resizes);
    }

    /// Applies the resizes placed where parsing stands (or before); returns where the next
    /// one is placed, if any.
    fn resize_due(&mut self, resizes: &Mutex<VecDeque<Resize>>) -> Option<u64> {
        let mut resizes = resizes.lock().unwrap_or_else(PoisonError::into_inner);
        while let Some(r) = resizes.front().copied() {
            if r.at > self.parsed {
                return Some(r.at);
            }
            resizes.pop_front();
            if !self.guarded(|parser| resize_keeping_cursor(parser, r.cols, r.rows)) {
                self.parser().screen_mut().set_size(r.rows, r.cols);
            }
            self.changed();
        }
        None
    }

    fn modes(&mut self) -> Modes {
        let screen = self.parser().screen();
        Modes { bracketed_paste: screen.bracketed_paste(), cursor: screen.cursor_position() }
    }

    fn snapshot(&mut self) -> ScreenSnapshot {
        let parsed = self.parsed;
        let screen = self.parser().screen();
        let (rows, cols) = screen.size();
        ScreenSnapshot { offset: parsed, cols, rows, data: drover_render::redraw::redraw(screen) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recording::RecordingWriter;

    /// A new recording, written as the PTY reader writes it.
    pub(super) struct Recorded {
        _dir: tempfile::TempDir,
        w: RecordingWriter,
        progress: Arc<StreamProgress>,
    }

    impl Recorded {
        /// The recording, and a screen of `cols`×`rows` following it.
        pub(super) fn new(cols: u16, rows: u16) -> (Recorded, Screen) {
            Recorded::packing_after(cols, rows, QUIET)
        }

        /// [`Recorded::new`], the screen packed after `quiet`.
        fn packing_after(cols: u16, rows: u16, quiet: Duration) -> (Recorded, Screen) {
            let dir = tempfile::tempdir().unwrap();
            let (raw, idx) = (dir.path().join("o.raw"), dir.path().join("o.idx"));
            let w = RecordingWriter::open(&raw, &idx).unwrap();
            let progress = Arc::new(StreamProgress::default());
            let screen = Screen::start_packing_after(raw, idx, cols, rows, progress.clone(), quiet).unwrap();
            (Recorded { _dir: dir, w, progress }, screen)
        }

        /// Records `bytes` at `t_micros` and says so, as the PTY reader does.
        pub(super) fn record(&mut self, bytes: &[u8], t_micros: u64) {
            self.w.append(bytes, t_micros).unwrap();
            self.progress.recorded.store(self.w.len(), Ordering::Release);
        }
    }

    /// Whether the screen is packed, once the follower has had `within` to pack it.
    fn packed_within(screen: &Screen, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        loop {
            if matches!(screen.shared.state.lock().unwrap().model, Model::Packed(_)) {
                return true;
            }
            if Instant::now() > deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    #[tokio::test]
    async fn a_quiet_screen_is_packed_and_serves_the_same_snapshot() {
        let quiet = Duration::from_millis(100);
        let (mut r, screen) = Recorded::packing_after(40, 6, quiet);
        r.record(b"$ make\r\n\x1b[1;32mok\x1b[m\x1b[?2004h\x1b[5;3H\x1b7\x1b[H", 1);
        let before = screen.snapshot().await.unwrap();
        assert!(packed_within(&screen, Duration::from_secs(5)), "a quiet screen is packed");
        let after = screen.snapshot().await.unwrap();
        assert_eq!((after.offset, after.cols, after.rows), (before.offset, before.cols, before.rows));
        assert_eq!(after.data, before.data, "the same redraw from the rebuilt screen");
        assert!(screen.modes_blocking().bracketed_paste);
        // Output goes on from the packed state, saved cursor included.
        assert!(packed_within(&screen, Duration::from_secs(5)), "packed again once quiet again");
        r.record(b"\x1b8here", 2);
        let mut check = vt100::Parser::new(6, 40, 0);
        check.process(&screen.snapshot().await.unwrap().data);
        assert_eq!(check.screen().contents(), "$ make\nok\n\n\n  here");
    }

    /// What the follower asked of the shim's heap, in order: keep freed pages (true) or
    /// hand them back (false). Set by `the_heap_is_…` alone, in a process of its own as
    /// every test is under nextest.
    static KEPT: Mutex<Vec<bool>> = Mutex::new(Vec::new());

    fn note_keep(keep: bool) {
        KEPT.lock().unwrap().push(keep);
    }

    /// Whether the follower has asked `asks` of the heap within `within`.
    fn asked_within(asks: &[bool], within: Duration) -> bool {
        let deadline = Instant::now() + within;
        while KEPT.lock().unwrap().len() < asks.len() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        *KEPT.lock().unwrap() == asks
    }

    #[test]
    fn the_heap_is_kept_while_output_comes_and_handed_back_once_quiet() {
        crate::heap::keep_freed_pages_with(note_keep);
        let quiet = Duration::from_secs(1);
        let (mut r, screen) = Recorded::packing_after(40, 6, quiet);
        r.record(b"$ make\r\nok", 1);
        assert!(asked_within(&[true], Duration::from_secs(5)), "kept as output comes: {:?}", KEPT.lock().unwrap());
        // More output before the quiet: nothing new asked.
        r.record(b"\r\nmore", 2);
        assert!(packed_within(&screen, Duration::from_secs(5)), "a quiet screen is packed");
        assert!(asked_within(&[true, false], Duration::from_secs(5)), "handed back once quiet: {:?}", KEPT.lock().unwrap());
        std::thread::sleep(4 * QUIET_POLL);
        assert_eq!(*KEPT.lock().unwrap(), [true, false], "not again while the quiet lasts");
        r.record(b"\r\nagain", 3);
        assert!(asked_within(&[true, false, true, false], Duration::from_secs(5)), "{:?}", KEPT.lock().unwrap());
    }

    /// A 20×3 screen with over 2 MiB recorded and its follower standing aside (as it does
    /// while anyone waits for the parser: here, for ever); and the flood's length.
    fn far_behind() -> (Recorded, Screen, u64) {
        let (mut r, screen) = Recorded::new(20, 3);
        screen.shared.waiting.fetch_add(1, Ordering::AcqRel);
        let flood: Vec<u8> = (0..200_000).flat_map(|i| format!("line {i}\r\n").into_bytes()).collect();
        assert!(flood.len() as u64 > 2 * FAR_BEHIND);
        r.record(&flood, 1);
        (r, screen, flood.len() as u64)
    }

    /// Asserts that `snap` is caught up with [`far_behind`]'s flood of `len` bytes.
    fn caught_up_with_the_flood(snap: &ScreenSnapshot, len: u64) {
        assert_eq!(snap.offset, len, "caught up to everything recorded when asked");
        let mut check = vt100::Parser::new(3, 20, 0);
        check.process(&snap.data);
        assert_eq!(check.screen().contents(), "line 199998\nline 199999");
    }

    #[tokio::test]
    async fn a_snapshot_far_behind_waits_for_the_follower_a_while_then_catches_up_itself() {
        let (mut r, screen, len) = far_behind();
        let t0 = Instant::now();
        let snap = screen.snapshot().await.unwrap();
        assert!(t0.elapsed() >= FOLLOWER_WAIT, "it gave the follower its time first: {:?}", t0.elapsed());
        caught_up_with_the_flood(&snap, len);
        screen.shared.waiting.fetch_sub(1, Ordering::AcqRel);

        // Close behind, it does not wait.
        r.record(b"one more\r\n", 2);
        let t0 = Instant::now();
        assert_eq!(screen.snapshot().await.unwrap().offset, len + 10);
        assert!(t0.elapsed() < FOLLOWER_WAIT, "{:?}", t0.elapsed());
    }

    #[tokio::test]
    async fn a_flood_caught_up_at_once_shows_what_parsing_all_of_it_shows() {
        let (mut r, screen) = Recorded::new(80, 24);
        screen.shared.waiting.fetch_add(1, Ordering::AcqRel);
        let mut flood = b"\x1b[?1049h\x1b[1;33m".to_vec();
        for i in 0..100_000 {
            flood.extend_from_slice(format!("\x1b[{}mwarning {i}: 字 \x1b[m\tat src/lib.rs:{i}\r\n", 31 + i % 6).as_bytes());
        }
        flood.extend_from_slice(b"\x1b[4mlast, underlined");
        r.record(&flood, 1);
        let snap = screen.snapshot_now().await.unwrap();
        assert_eq!(snap.offset, flood.len() as u64);
        let mut whole = vt100::Parser::new(24, 80, 0);
        whole.process(&flood);
        assert_eq!(snap.data, drover_render::redraw::redraw(whole.screen()), "the same redraw as the whole flood parsed");
    }

    #[test]
    fn the_follower_runs_in_the_idle_class() {
        let (_r, _screen) = Recorded::new(20, 3);
        let idle = |tid: &str| {
            let tid: libc::pid_t = tid.parse().unwrap_or(0);
            // SAFETY: reads the policy of a thread of this process by id; no memory is
            // shared with the call.
            unsafe { libc::sched_getscheduler(tid) == libc::SCHED_IDLE }
        };
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let followers: Vec<String> = std::fs::read_dir("/proc/self/task")
                .unwrap()
                .filter_map(|t| t.ok())
                .map(|t| t.file_name().to_string_lossy().into_owned())
                .filter(|tid| std::fs::read_to_string(format!("/proc/self/task/{tid}/comm")).is_ok_and(|c| c.trim() == "screen"))
                .collect();
            // A thread names itself once it runs: until then the follower is not found.
            if !followers.is_empty() && followers.iter().all(|tid| idle(tid)) {
                break;
            }
            assert!(Instant::now() < deadline, "no follower, or one out of the idle class: {followers:?}");
            std::thread::sleep(Duration::from_millis(10));
        }
        // The class is the follower's alone: the thread that made the screen keeps its own.
        // SAFETY: as above, for the calling thread.
        assert_ne!(unsafe { libc::sched_getscheduler(0) }, libc::SCHED_IDLE);
    }

    #[tokio::test]
    async fn a_first_snapshot_far_behind_catches_up_at_once() {
        let (_r, screen, len) = far_behind();
        let t0 = Instant::now();
        let snap = screen.snapshot_now().await.unwrap();
        assert!(t0.elapsed() < FOLLOWER_WAIT, "a viewer's first screen does not wait for the follower: {:?}", t0.elapsed());
        caught_up_with_the_flood(&snap, len);
        screen.shared.waiting.fetch_sub(1, Ordering::AcqRel);
    }

    #[tokio::test]
    async fn a_screen_packing_would_change_is_kept_until_it_changes() {
        let quiet = Duration::from_millis(50);
        let (mut r, screen) = Recorded::packing_after(40, 6, quiet);
        // A scroll region left set (no sequence rebuilds it), then a sequence cut short.
        r.record(b"\x1b[2;4rregion", 1);
        assert!(!packed_within(&screen, Duration::from_millis(500)), "a scroll region is not packed");
        r.record(b"\x1b[r\x1b[3", 2);
        assert!(!packed_within(&screen, Duration::from_millis(500)), "half a sequence is not packed");
        r.record(b"1mred", 3);
        assert!(packed_within(&screen, Duration::from_secs(5)), "packed once both have ended");
    }

    #[tokio::test]
    async fn snapshot_reflects_recorded_output_and_modes() {
        let (mut r, screen) = Recorded::new(20, 5);
        r.record(b"hello\r\nworld\x1b[?2004h", 1);
        let snap = screen.snapshot().await.unwrap();
        assert_eq!(snap.offset, r.w.len());
        assert_eq!((snap.cols, snap.rows), (20, 5));
        let mut check = vt100::Parser::new(5, 20, 0);
        check.process(&snap.data);
        assert_eq!(check.screen().contents(), "hello\nworld");
        let modes = screen.modes().await.unwrap();
        assert!(modes.bracketed_paste);
        assert_eq!(modes.cursor, (1, 5));
    }

    #[test]
    fn shrinking_below_the_cursor_keeps_the_cursor_line_in_view() {
        let mut parser = vt100::Parser::new(5, 10, 100);
        parser.process(b"one\r\ntwo\r\nthree\r\nfour\r\n$ ls");
        resize_keeping_cursor(&mut parser, 10, 3);
        assert_eq!(parser.screen().contents(), "three\nfour\n$ ls");
        assert_eq!(parser.screen().cursor_position(), (2, 4));
        // What scrolled away is in the scrollback; growing again leaves the screen as is.
        parser.screen_mut().set_scrollback(2);
        assert_eq!(parser.screen().contents().lines().next(), Some("one"));
        parser.screen_mut().set_scrollback(0);
        resize_keeping_cursor(&mut parser, 10, 5);
        assert_eq!(parser.screen().contents(), "three\nfour\n$ ls");
        // A cursor already in view: nothing moves.
        let mut top = vt100::Parser::new(5, 10, 0);
        top.process(b"a\r\nb");
        resize_keeping_cursor(&mut top, 10, 3);
        assert_eq!((top.screen().contents().as_str(), top.screen().cursor_position()), ("a\nb", (1, 1)));
    }

    #[test]
    fn shrinking_a_full_screen_program_keeps_the_cursor_it_returns_to_on_screen() {
        let mut parser = vt100::Parser::new(30, 100, 0);
        parser.process(b"\x1b[30;1H$ vim\r\n\x1b[?1049h\x1b[Hfull screen");
        resize_keeping_cursor(&mut parser, 80, 24);
        assert!(parser.screen().alternate_screen(), "still in the alternate screen");
        assert_eq!(parser.screen().contents().lines().next(), Some("full screen"), "its contents kept");
        // Leaving the alternate screen restores the cursor saved on entering it.
        parser.process(b"\x1b[?1049lHTOP-NEXT");
        assert_eq!(parser.screen().cursor_position(), (23, 9));
        assert_eq!(parser.screen().contents().lines().last(), Some("HTOP-NEXT"));
    }

    #[tokio::test]
    async fn a_parser_panic_leaves_a_working_screen() {
        let (mut r, screen) = Recorded::new(80, 24);
        r.record(b"\x1b[?2004h\x1b[22;1Hkept", 1);
        screen.snapshot().await.expect("a snapshot");
        // A panic inside vt100 (0.15 had one for a restored cursor after a shrink).
        let ok = screen.shared.state.lock().unwrap().guarded(|parser| {
            parser.process(b"\x1b[Hlost");
            panic!("a bug in the parser");
        });
        assert!(!ok, "the panic is reported");
        let snap = screen.snapshot().await.expect("a snapshot after the parser failed");
        assert_eq!((snap.cols, snap.rows, snap.offset), (80, 24, r.w.len()));
        // What the screen showed, and the input modes the program set, are kept.
        assert!(screen.modes_blocking().bracketed_paste, "bracketed paste lost in the restart");
        let mut kept = vt100::Parser::new(24, 80, 0);
        kept.process(&snap.data);
        assert!(kept.screen().contents().contains("kept"), "{:?}", kept.screen().contents());
        r.record(b"\x1b[Hnext", 2);
        let mut check = vt100::Parser::new(24, 80, 0);
        check.process(&screen.snapshot().await.unwrap().data);
        assert!(check.screen().contents().starts_with("next"), "{:?}", check.screen().contents());
    }

    #[tokio::test]
    async fn a_resize_is_placed_where_the_stream_stood_however_far_behind_the_parser_is() {
        let (mut r, screen) = Recorded::new(20, 5);
        let before = b"$ ls\r\n";
        r.record(before, 1);
        screen.resize(10, 5);
        // Drawn for the new width, and recorded before the parser has got to the resize.
        let after = b"abcdefghijklmnop";
        r.record(after, 2);
        let snap = screen.snapshot().await.unwrap();
        assert_eq!((snap.cols, snap.rows), (10, 5));
        let mut want = vt100::Parser::new(5, 20, 0);
        want.process(before);
        resize_keeping_cursor(&mut want, 10, 5);
        want.process(after);
        let mut got = vt100::Parser::new(5, 10, 0);
        got.process(&snap.data);
        assert_eq!(got.screen().contents(), want.screen().contents());
        let rows: Vec<String> = got.screen().rows(0, 10).take(3).collect();
        assert_eq!(rows, ["$ ls", "abcdefghij", "klmnop"], "the line is wrapped at the new width");
    }

    #[tokio::test]
    async fn resize_and_feed() {
        let dir = tempfile::tempdir().unwrap();
        let progress = Arc::new(StreamProgress::default());
        let screen = Screen::start(dir.path().join("missing.raw"), dir.path().join("missing.idx"), 10, 3, progress).unwrap();
        screen.resize(30, 4);
        screen.feed(b"fed directly");
        let snap = screen.snapshot().await.unwrap();
        assert_eq!((snap.cols, snap.rows, snap.offset), (30, 4, 12));
    }

    #[tokio::test]
    async fn follower_parses_in_the_background_and_stops_with_the_screen() {
        let (mut r, screen) = Recorded::new(20, 5);
        r.record(&vec![b'x'; 300 * 1024], 1);
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while screen.shared.state.lock().unwrap().parsed < r.w.len() {
            assert!(std::time::Instant::now() < deadline, "the follower never caught up");
            std::thread::sleep(Duration::from_millis(10));
        }
        let weak = Arc::downgrade(&screen.shared);
        drop(screen);
        std::thread::sleep(POLL * 3);
        assert!(weak.upgrade().is_none(), "the follower still holds the screen");
    }
}

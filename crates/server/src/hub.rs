//! Output hubs: one per live session, fanning its terminal out to viewers.
//!
//! Every viewer has a bounded queue. Publishing never waits: a viewer whose queue is
//! full is marked lagging and skipped, and its task re-syncs it from a fresh snapshot
//! plus the bytes after it (kept in a small ring). So a slow or stalled viewer never
//! slows the program or the other viewers, and a late joiner starts from a snapshot
//! instead of a replay. Offsets make the hand-over exact: a viewer gets bytes from its
//! snapshot's offset on, once.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::Bytes;
use drover_core::SessionId;
use drover_protocol::viewer::ViewerEvent;
use drover_render::ring::{OutputRing, RingLimits};
use drover_store::ViewerCount;
use tokio::sync::{mpsc, watch, Notify};

/// Recent output kept per live session for re-syncing viewers.
const RING_BYTES: usize = 1024 * 1024;
/// Output arriving in small pieces is joined in the ring up to this size, so a chatty
/// session's ring holds a few large buffers, not thousands of tiny ones (each piece
/// costs far more in bookkeeping than its bytes).
const RING_PIECE_BYTES: usize = 16 * 1024;
/// Output is joined into a piece only while the piece is younger than this: a burst is
/// joined, a quiet session's occasional lines are not (so they leave as they age).
const RING_JOIN_WITHIN: std::time::Duration = std::time::Duration::from_secs(1);
/// Output older than this leaves the ring (the newest piece stays): a joining viewer's
/// snapshot is fresh, so only recent bytes are ever needed, and a quiet session's ring
/// stays small instead of filling to the cap over hours.
const RING_AGE: std::time::Duration = std::time::Duration::from_secs(60);
/// The hub's ring, from the three limits above.
const RING: RingLimits =
    RingLimits { bytes: RING_BYTES, join_up_to: RING_PIECE_BYTES, join_within: RING_JOIN_WITHIN, max_age: Some(RING_AGE) };
/// Bytes queued for a viewer before it is considered lagging and re-synced.
pub const VIEWER_QUEUE_BYTES: usize = 16 * 1024 * 1024;

/// Why a viewer cannot be resumed from an offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoResync {
    /// The ring no longer reaches back that far: send stored output or a newer snapshot.
    TooOld,
    /// The viewer is no longer attached (the session ended).
    Gone,
}

/// What a viewer's task is handed.
#[derive(Debug)]
pub enum ViewerOut {
    /// Terminal bytes.
    Bytes(Bytes),
    /// A JSON event.
    Event(ViewerEvent),
}

struct Slot {
    tx: mpsc::UnboundedSender<ViewerOut>,
    queued: Arc<AtomicUsize>,
    lag: Arc<Notify>,
    next: u64,
    lagging: bool,
    interactive: bool,
}

struct Inner {
    latest: u64,
    ring: OutputRing,
    viewers: HashMap<u64, Slot>,
    next_viewer: u64,
    size: (u16, u16),
    last_output: Instant,
    /// When a viewer last came or went.
    last_viewer: Instant,
    ended: Option<ViewerEvent>,
}

impl Inner {
    /// Whether the ring still holds the output from `offset` on.
    fn ring_reaches(&self, offset: u64) -> Result<(), NoResync> {
        let ring_start = self.ring.start().unwrap_or(self.latest);
        if offset < ring_start && offset < self.latest {
            return Err(NoResync::TooOld);
        }
        Ok(())
    }
}

/// The source of reading numbers ([`Hub::viewers`]).
static NEXT_READING: AtomicU64 = AtomicU64::new(1);

/// A number for a reading of viewers: later readings have larger numbers.
pub fn next_reading() -> u64 {
    NEXT_READING.fetch_add(1, Ordering::Relaxed)
}

/// One live session's hub.
pub struct Hub {
    inner: Mutex<Inner>,
    /// Bumped (to the latest offset) whenever output arrives or the session ends.
    pub changed: watch::Sender<u64>,
}

/// A viewer's registration.
pub struct Joined {
    /// Its id in the hub.
    pub id: u64,
    /// Notified when the viewer must re-sync (at once on join).
    pub lag: Arc<Notify>,
    /// Its queue.
    pub rx: mpsc::UnboundedReceiver<ViewerOut>,
    /// Bytes in its queue; the viewer subtracts what it has written.
    pub queued: Arc<AtomicUsize>,
}

impl Hub {
    fn new(latest: u64, size: (u16, u16)) -> Hub {
        Hub {
            inner: Mutex::new(Inner {
                latest,
                ring: OutputRing::new(RING),
                viewers: HashMap::new(),
                next_viewer: 0,
                size,
                last_output: Instant::now(),
                last_viewer: Instant::now(),
                ended: None,
            }),
            changed: watch::channel(latest).0,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().expect("hub lock")
    }

    /// Fans out output at `offset`. Never waits.
    pub fn publish(&self, offset: u64, data: Bytes) {
        let end = offset + data.len() as u64;
        {
            let mut g = self.lock();
            if end <= g.latest {
                return;
            }
            // A resent piece that overlaps what the ring holds: keep only the new bytes.
            let (offset, data) = if offset < g.latest { (g.latest, data.slice((g.latest - offset) as usize..)) } else { (offset, data) };
            g.latest = end;
            g.last_output = Instant::now();
            g.ring.push(offset, 0, data.clone(), Instant::now());
            for slot in g.viewers.values_mut() {
                if slot.lagging || end <= slot.next {
                    continue;
                }
                let piece = if offset < slot.next { data.slice((slot.next - offset) as usize..) } else { data.clone() };
                slot.next = end;
                let len = piece.len();
                if slot.queued.load(Ordering::Acquire) + len > VIEWER_QUEUE_BYTES || slot.tx.send(ViewerOut::Bytes(piece)).is_err() {
                    slot.lagging = true;
                    slot.lag.notify_one();
                } else {
                    slot.queued.fetch_add(len, Ordering::AcqRel);
                }
            }
        }
        self.changed.send_replace(end);
    }

    /// Adds a viewer; it starts lagging, so its task fetches a snapshot first.
    pub fn join(&self, interactive: bool) -> Joined {
        let (tx, rx) = mpsc::unbounded_channel();
        let lag = Arc::new(Notify::new());
        lag.notify_one();
        let queued = Arc::new(AtomicUsize::new(0));
        let mut g = self.lock();
        let id = g.next_viewer;
        g.next_viewer += 1;
        g.last_viewer = Instant::now();
        g.viewers.insert(id, Slot { tx, queued: queued.clone(), lag: lag.clone(), next: 0, lagging: true, interactive });
        Joined { id, lag, rx, queued }
    }

    /// Stops queueing output for a viewer until it is re-synced ([`Hub::resync`]): it
    /// has all it can take for now.
    pub fn hold(&self, id: u64) {
        if let Some(slot) = self.lock().viewers.get_mut(&id) {
            slot.lagging = true;
        }
    }

    /// Removes a viewer.
    pub fn leave(&self, id: u64) {
        let mut g = self.lock();
        g.viewers.remove(&id);
        g.last_viewer = Instant::now();
    }

    /// The output from `offset` on, as the ring holds it (for a reader that is not a
    /// viewer); TooOld when the ring no longer reaches back that far.
    pub fn since(&self, offset: u64) -> Result<Vec<Bytes>, NoResync> {
        let g = self.lock();
        g.ring_reaches(offset)?;
        Ok(g.ring.since(offset))
    }

    /// Resumes a lagging viewer from a snapshot taken at `offset`: returns the bytes after
    /// the snapshot that the viewer must write next, or why it cannot.
    pub fn resync(&self, id: u64, offset: u64) -> Result<Vec<Bytes>, NoResync> {
        let mut g = self.lock();
        if !g.viewers.contains_key(&id) {
            // Ended while the viewer was re-syncing: what followed its snapshot is still
            // owed it, before the end it is about to be told.
            if g.ended.is_some() {
                g.ring_reaches(offset)?;
                return Ok(g.ring.since(offset));
            }
            return Err(NoResync::Gone);
        }
        g.ring_reaches(offset)?;
        let out = g.ring.since(offset);
        let next = g.latest.max(offset);
        let slot = g.viewers.get_mut(&id).ok_or(NoResync::Gone)?;
        slot.next = next;
        slot.lagging = false;
        slot.queued.store(0, Ordering::Release);
        Ok(out)
    }

    /// The highest offset received.
    pub fn latest(&self) -> u64 {
        self.lock().latest
    }

    /// Time since the last output.
    pub fn since_output(&self) -> std::time::Duration {
        self.lock().last_output.elapsed()
    }

    /// How long nothing has happened here: no output, no input, no viewer (None while a
    /// viewer is attached). What idle-parking goes by.
    pub fn idle_for(&self) -> Option<std::time::Duration> {
        let g = self.lock();
        g.viewers.is_empty().then(|| g.last_output.elapsed().min(g.last_viewer.elapsed()))
    }

    /// Counts the output arrival as "now" (used when input is sent, for stillness).
    pub fn touch(&self) {
        self.lock().last_output = Instant::now();
    }

    /// Current terminal size.
    pub fn size(&self) -> (u16, u16) {
        self.lock().size
    }

    /// Records a new size and tells the other viewers.
    pub fn resized(&self, cols: u16, rows: u16, by: Option<u64>) {
        Hub::resize_in(&mut self.lock(), cols, rows, by);
    }

    /// The size the program's terminal has now (as its device reported it, through the
    /// database on another replica): viewers hear of it when it is not the size the hub
    /// had (a viewer here that asked for it has set it already). One look under the
    /// lock, so a viewer's resize in between is not undone.
    pub fn sized(&self, cols: u16, rows: u16) {
        let mut g = self.lock();
        if g.size != (cols, rows) {
            Hub::resize_in(&mut g, cols, rows, None);
        }
    }

    fn resize_in(g: &mut Inner, cols: u16, rows: u16, by: Option<u64>) {
        g.size = (cols, rows);
        for (id, slot) in g.viewers.iter() {
            if Some(*id) != by {
                let _ = slot.tx.send(ViewerOut::Event(ViewerEvent::Resize { cols, rows }));
            }
        }
    }

    /// Its viewers now, with the reading's number ([`next_reading`], taken under the
    /// hub's lock), so of two readings the later is known (see `Store::set_viewers`).
    pub fn viewers(&self) -> (ViewerCount, u64) {
        let g = self.lock();
        let reading = next_reading();
        let interactive = g.viewers.values().filter(|s| s.interactive).count() as u32;
        (ViewerCount { attached: g.viewers.len() as u32, interactive }, reading)
    }

    /// Interactive viewers attached.
    pub fn interactive(&self) -> u32 {
        self.lock().viewers.values().filter(|s| s.interactive).count() as u32
    }

    /// All viewers attached.
    pub fn attached(&self) -> u32 {
        self.lock().viewers.len() as u32
    }

    /// The session ended: tell every viewer and drop their queues.
    pub fn end(&self, event: ViewerEvent) {
        let latest = {
            let mut g = self.lock();
            for slot in g.viewers.values() {
                let _ = slot.tx.send(ViewerOut::Event(event.clone()));
            }
            g.viewers.clear();
            g.ended = Some(event);
            g.latest
        };
        self.changed.send_replace(latest);
    }

    /// Returns once the session has ended.
    pub async fn wait_ended(&self) {
        let mut changed = self.changed.subscribe();
        while self.ended().is_none() {
            if changed.changed().await.is_err() {
                return;
            }
        }
    }

    /// The end event, once the session has ended.
    pub fn ended(&self) -> Option<ViewerEvent> {
        self.lock().ended.clone()
    }
}

/// What the hubs hold now ([`Hubs::census`]).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct HubCensus {
    /// Hubs (live sessions with output here).
    pub hubs: u64,
    /// Viewers attached to them.
    pub viewers: u64,
    /// Bytes of recent output their rings keep.
    pub ring_bytes: u64,
    /// Pieces those bytes are kept in.
    pub ring_pieces: u64,
}

/// All live hubs.
#[derive(Default)]
pub struct Hubs {
    hubs: Mutex<HashMap<SessionId, Arc<Hub>>>,
}

impl Hubs {
    /// The hub of `session`, created with `latest`/`size` if there is none.
    pub fn get_or_create(&self, session: SessionId, latest: u64, size: (u16, u16)) -> Arc<Hub> {
        self.hubs.lock().expect("hubs").entry(session).or_insert_with(|| Arc::new(Hub::new(latest, size))).clone()
    }

    /// The hub of `session`, if it has one.
    pub fn get(&self, session: SessionId) -> Option<Arc<Hub>> {
        self.hubs.lock().expect("hubs").get(&session).cloned()
    }

    /// Removes the hub of an ended session.
    pub fn remove(&self, session: SessionId) -> Option<Arc<Hub>> {
        self.hubs.lock().expect("hubs").remove(&session)
    }

    /// The hub of `session`: the one there is, else `hub`, which becomes it.
    pub fn adopt(&self, session: SessionId, hub: Arc<Hub>) -> Arc<Hub> {
        self.hubs.lock().expect("hubs").entry(session).or_insert(hub).clone()
    }

    /// Viewers attached to any terminal here.
    pub fn viewers(&self) -> u32 {
        self.hubs.lock().expect("hubs").values().map(|h| h.attached()).sum()
    }

    /// Every live hub here, with its session: for the rounds that look at each
    /// (idle-parking, guesses) without reading the database.
    pub fn all(&self) -> Vec<(SessionId, Arc<Hub>)> {
        self.hubs.lock().expect("hubs").iter().map(|(s, h)| (*s, h.clone())).collect()
    }

    /// Hubs now (live sessions with output here).
    pub fn count(&self) -> u64 {
        self.hubs.lock().expect("hubs").len() as u64
    }

    /// What the hubs hold now, for `/metrics`.
    pub fn census(&self) -> HubCensus {
        let hubs: Vec<Arc<Hub>> = self.hubs.lock().expect("hubs").values().cloned().collect();
        let mut c = HubCensus { hubs: hubs.len() as u64, ..HubCensus::default() };
        for h in hubs {
            let g = h.lock();
            c.viewers += g.viewers.len() as u64;
            c.ring_bytes += g.ring.held() as u64;
            c.ring_pieces += g.ring.pieces() as u64;
        }
        c
    }

    /// Removes `session`'s hub if it is still `hub` (not one made since).
    pub fn remove_if(&self, session: SessionId, hub: &Arc<Hub>) {
        let mut hubs = self.hubs.lock().expect("hubs");
        if hubs.get(&session).is_some_and(|h| Arc::ptr_eq(h, hub)) {
            hubs.remove(&session);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    #[tokio::test]
    async fn joiner_resyncs_from_snapshot_offset_then_gets_live_bytes_once() {
        let hub = Hub::new(0, (80, 24));
        hub.publish(0, b("hello "));
        let mut j = hub.join(true);
        hub.publish(6, b("world"));
        // Lagging viewers get nothing until they resync.
        assert!(j.rx.try_recv().is_err());
        let after = hub.resync(j.id, 3).unwrap();
        let text: Vec<u8> = after.iter().flat_map(|b| b.to_vec()).collect();
        assert_eq!(text, b"lo world");
        hub.publish(6, b("world!!"));
        match j.rx.try_recv().unwrap() {
            ViewerOut::Bytes(x) => assert_eq!(&x[..], b"!!"),
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn a_full_queue_marks_the_viewer_lagging_without_blocking_others() {
        let hub = Hub::new(0, (80, 24));
        let slow = hub.join(true);
        hub.resync(slow.id, 0).unwrap();
        let mut fast = hub.join(false);
        hub.resync(fast.id, 0).unwrap();
        let piece = Bytes::from(vec![b'x'; 64 * 1024]);
        let n = (VIEWER_QUEUE_BYTES / piece.len()) as u64 + 2;
        for i in 0..n {
            hub.publish(i * piece.len() as u64, piece.clone());
            while let Ok(ViewerOut::Bytes(b)) = fast.rx.try_recv() {
                fast.queued.fetch_sub(b.len(), Ordering::AcqRel);
            }
        }
        assert!(hub.lock().viewers[&slow.id].lagging);
        assert!(!hub.lock().viewers[&fast.id].lagging);
        assert_eq!(hub.latest(), n * piece.len() as u64);
    }

    #[tokio::test]
    async fn a_viewer_resyncing_as_the_session_ends_still_gets_what_followed_its_snapshot() {
        let hub = Hub::new(0, (80, 24));
        hub.publish(0, Bytes::from_static(b"hello\r\n"));
        let j = hub.join(false);
        // Its snapshot shows the screen at 7; meanwhile the program prints its last line
        // and the session ends.
        hub.publish(7, Bytes::from_static(b"got hello\r\n"));
        hub.end(ViewerEvent::Resync);
        let after = hub.resync(j.id, 7).expect("the bytes after the snapshot");
        assert_eq!(after.concat(), b"got hello\r\n");
        // One that left is owed nothing.
        let hub = Hub::new(0, (80, 24));
        let j = hub.join(false);
        hub.leave(j.id);
        assert_eq!(hub.resync(j.id, 0), Err(NoResync::Gone));
    }

    #[tokio::test]
    async fn resync_refuses_offsets_older_than_the_ring() {
        let hub = Hub::new(0, (80, 24));
        let big = Bytes::from(vec![b'x'; RING_BYTES]);
        hub.publish(0, big.clone());
        hub.publish(RING_BYTES as u64, big);
        let j = hub.join(false);
        assert_eq!(hub.resync(j.id, 10), Err(NoResync::TooOld));
        assert!(hub.resync(j.id, RING_BYTES as u64).is_ok());
        hub.leave(j.id);
        assert_eq!(hub.resync(j.id, RING_BYTES as u64), Err(NoResync::Gone));
    }

    #[tokio::test]
    async fn small_pieces_are_joined_in_the_ring_and_read_back_exactly() {
        let hub = Hub::new(0, (80, 24));
        let mut all = Vec::new();
        for i in 0..10_000u32 {
            let line = format!("line {i}\r\n");
            hub.publish(all.len() as u64, Bytes::from(line.clone().into_bytes()));
            all.extend_from_slice(line.as_bytes());
        }
        let pieces = hub.lock().ring.pieces();
        assert!(pieces <= all.len() / RING_PIECE_BYTES + 1, "{pieces} pieces for {} bytes", all.len());
        let j = hub.join(false);
        let from = 12_345u64;
        let text: Vec<u8> = hub.resync(j.id, from).unwrap().iter().flat_map(|b| b.to_vec()).collect();
        assert_eq!(text, &all[from as usize..]);
    }

    #[tokio::test]
    async fn an_overlapping_resend_is_not_repeated() {
        let hub = Hub::new(0, (80, 24));
        hub.publish(0, b("0123456789"));
        hub.publish(6, b("6789abcdef"));
        let j = hub.join(false);
        let text: Vec<u8> = hub.resync(j.id, 0).unwrap().iter().flat_map(|b| b.to_vec()).collect();
        assert_eq!(text, b"0123456789abcdef");
        assert_eq!(hub.lock().ring.held(), 16);
    }

    #[tokio::test]
    async fn end_reaches_viewers() {
        let hub = Hub::new(0, (80, 24));
        let mut j = hub.join(false);
        hub.end(ViewerEvent::Resync);
        assert!(matches!(j.rx.recv().await, Some(ViewerOut::Event(ViewerEvent::Resync))));
        assert!(j.rx.recv().await.is_none());
        assert!(hub.ended().is_some());
    }
}

//! One writer for every device link's output (group commit).
//!
//! A link's read loop queues each piece of output here and goes on reading: nothing
//! waits for a reply, so a line printed costs one queue push, not a round trip through
//! other tasks. The writer stores whatever is queued in one transaction, then wakes the
//! replicas following those sessions and stops runs whose output was refused. Groups of small writes are spaced
//! [`COMMIT_SPACING`] apart (the writer sleeps until then, so the queue wakes nobody
//! per line), and a lone link that writes now and then waits for nothing. Output of a
//! session another replica follows cuts the wait short: that replica's viewers see
//! only what is committed, so a keystroke's echo typed there waits for no spacing.
//!
//! Events that must follow their output (a session's end) wait on
//! [`OutputWriter::stored`], which answers once everything the link queued before it
//! is stored.
//!
//! Each link may have [`LINK_BUDGET`] bytes queued and not yet stored; its reader waits
//! for more (and so does the device, through TCP). A write that fails is kept and
//! retried, link by link, so nothing not yet stored is lost, a link's output is never
//! stored out of order (a gap would be filled with NUL bytes), and a link whose writes
//! fail holds up only itself.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use drover_core::{DeviceId, SessionId};
use drover_protocol::device::ServerMessage;
use drover_store::{OutputChunk, Store, StoreError};
use tokio::sync::{mpsc, oneshot, Notify, Semaphore};
use tokio::time::Instant;

use crate::metrics::OutputMetrics;
use crate::AppState;

#[cfg(test)]
mod tests;

/// Where the writer stores output: [`Store`] in production, a fake in tests.
pub(crate) trait OutputStore: Send + Sync + 'static {
    /// Stores `chunks` in one transaction; answers, per session, the offset now held
    /// (a session left out had its output refused: its run is no longer live).
    fn append_output(&self, chunks: Vec<OutputChunk>) -> impl Future<Output = Result<HashMap<SessionId, u64>, StoreError>> + Send;
}

impl OutputStore for Store {
    fn append_output(&self, chunks: Vec<OutputChunk>) -> impl Future<Output = Result<HashMap<SessionId, u64>, StoreError>> + Send {
        Store::append_output(self, chunks)
    }
}

/// Whom the writer tells what it stored: the devices' links and the other replicas.
pub(crate) trait OutputNotices: Send + Sync + 'static {
    /// Has `device` stop `session`, whose output was refused (without waiting).
    fn release(&self, device: DeviceId, session: SessionId);
    /// Wakes the replicas following any of `sessions`: more of their output is stored.
    fn announce(&self, sessions: Vec<SessionId>);
    /// Whether a replica follows `session` from the database: its output is then
    /// committed without waiting out [`COMMIT_SPACING`].
    fn followed(&self, session: SessionId) -> bool;
}

impl<N: OutputNotices + ?Sized> OutputNotices for Arc<N> {
    fn release(&self, device: DeviceId, session: SessionId) {
        (**self).release(device, session);
    }

    fn announce(&self, sessions: Vec<SessionId>) {
        (**self).announce(sessions);
    }

    fn followed(&self, session: SessionId) -> bool {
        (**self).followed(session)
    }
}

impl OutputNotices for AppState {
    fn release(&self, device: DeviceId, session: SessionId) {
        let state = self.clone();
        tokio::spawn(async move {
            let _ = state.devices.send(device, &ServerMessage::Release { session }).await;
        });
    }

    fn announce(&self, sessions: Vec<SessionId>) {
        self.topology.output_stored(self, sessions);
    }

    fn followed(&self, session: SessionId) -> bool {
        self.cluster.followed(session)
    }
}

/// Bytes written in one transaction at most (a group stops growing past it).
const GROUP_BYTES: usize = 16 * 1024 * 1024;
/// The least time between the starts of two commits of small groups: a group waits for
/// more until then (which is at once when the last commit was longer ago).
const COMMIT_SPACING: Duration = Duration::from_millis(50);
/// A group smaller than this waits for more (see [`COMMIT_SPACING`]).
const SMALL_BYTES: usize = 256 * 1024;
/// Requests waiting for the writer before links wait.
const QUEUE: usize = 4096;
/// Bytes of one link's output queued and not yet stored, at most (a larger piece
/// counts as this much). A group's worth: a link streaming fast fills the next group
/// while the last one commits (its viewers get its bytes as they are read, so a
/// smaller budget would hold them to the database's pace).
const LINK_BUDGET: usize = GROUP_BYTES;
/// The first wait before a failed write is tried again; it doubles up to [`MAX_RETRY`].
const FIRST_RETRY: Duration = Duration::from_millis(50);
/// The longest wait between tries of a failed write.
const MAX_RETRY: Duration = Duration::from_secs(5);

/// One connection of a device: its output is stored in the order it was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Link {
    /// Whose output it carries (and whose runs are stopped if it is refused).
    pub device: DeviceId,
    /// Tells this connection from the device's earlier and later ones
    /// (`Devices::connect`).
    pub epoch: u64,
}

/// The writer has stopped (the runtime is shutting down).
#[derive(Debug)]
pub(crate) struct Stopped;

/// A link's way into the writer: the link, and its budget of output queued and not yet
/// stored ([`LINK_BUDGET`]).
pub(crate) struct LinkOutput {
    link: Link,
    budget: Arc<Semaphore>,
}

impl LinkOutput {
    /// For a link that has just connected.
    pub(crate) fn new(link: Link) -> LinkOutput {
        LinkOutput { link, budget: Arc::new(Semaphore::new(LINK_BUDGET)) }
    }

    /// Which connection this output comes from.
    pub(crate) fn link(&self) -> Link {
        self.link
    }
}

/// What a piece of output takes of its link's budget.
fn cost(chunk: &OutputChunk) -> usize {
    chunk.data.len().clamp(1, LINK_BUDGET)
}

enum Request {
    Output {
        link: Link,
        chunk: OutputChunk,
        budget: Arc<Semaphore>,
    },
    Stored {
        link: Link,
        reply: oneshot::Sender<bool>,
    },
    /// The link's reader has stopped: nothing more of its output comes.
    Closed {
        link: Link,
    },
    /// Everything of the link is done with (its events too).
    Forget {
        link: Link,
    },
}

/// The shared writer; started on first use.
#[derive(Default)]
pub(crate) struct OutputWriter {
    queue: OnceLock<Queue>,
}

impl OutputWriter {
    fn queue(&self, state: &AppState) -> &Queue {
        self.queue.get_or_init(|| Queue::start(state.store.clone(), state.clone(), state.metrics.output.clone()))
    }

    /// Queues `chunk`, read from `out`'s link, to be stored; waits while the link has
    /// its whole budget queued.
    pub(crate) async fn store(&self, state: &AppState, out: &LinkOutput, chunk: OutputChunk) -> Result<(), Stopped> {
        self.queue(state).store(out, chunk).await
    }

    /// Resolves once everything `link` queued before is stored: true, or false when it
    /// never will be on this link (its link ended with output the database refused; the
    /// device resends that output, and reports its ends again, when it reconnects).
    pub(crate) async fn stored(&self, state: &AppState, link: Link) -> bool {
        self.queue(state).stored(link).await
    }

    /// Says `link`'s reader has stopped (after all its output): output of it that could
    /// not be stored is dropped, since the device resends it on its next link.
    pub(crate) async fn closed(&self, state: &AppState, link: Link) {
        self.queue(state).closed(link).await;
    }

    /// Says everything of `link` is done with (after [`OutputWriter::closed`] and its
    /// events).
    pub(crate) async fn forget(&self, state: &AppState, link: Link) {
        self.queue(state).forget(link).await;
    }
}

/// The way into a running writer (see [`OutputWriter`] for what each request means).
struct Queue {
    tx: mpsc::Sender<Request>,
    metrics: OutputMetrics,
    notices: Arc<dyn OutputNotices>,
    /// Wakes the writer out of its spacing: output of a followed session is queued.
    hurry: Arc<Notify>,
}

impl Queue {
    /// Starts a writer storing into `store`, telling `notices` and counting in `metrics`.
    fn start(store: impl OutputStore, notices: impl OutputNotices, metrics: OutputMetrics) -> Queue {
        let (tx, rx) = mpsc::channel(QUEUE);
        let notices: Arc<dyn OutputNotices> = Arc::new(notices);
        let hurry = Arc::new(Notify::new());
        tokio::spawn(run(store, notices.clone(), metrics.clone(), hurry.clone(), rx));
        Queue { tx, metrics, notices, hurry }
    }

    async fn store(&self, out: &LinkOutput, chunk: OutputChunk) -> Result<(), Stopped> {
        out.budget.acquire_many(cost(&chunk) as u32).await.map_err(|_| Stopped)?.forget();
        let bytes = chunk.data.len() as i64;
        let session = chunk.session;
        self.metrics.backlog.inc_by(bytes);
        let request = Request::Output { link: out.link, chunk, budget: out.budget.clone() };
        self.tx.send(request).await.map_err(|_| {
            self.metrics.backlog.dec_by(bytes);
            Stopped
        })?;
        if self.notices.followed(session) {
            self.hurry.notify_one();
        }
        Ok(())
    }

    async fn stored(&self, link: Link) -> bool {
        let (reply, answer) = oneshot::channel();
        if self.tx.send(Request::Stored { link, reply }).await.is_err() {
            return false;
        }
        answer.await.unwrap_or(false)
    }

    async fn closed(&self, link: Link) {
        let _ = self.tx.send(Request::Closed { link }).await;
    }

    async fn forget(&self, link: Link) {
        let _ = self.tx.send(Request::Forget { link }).await;
    }
}

/// What one commit holds of one link.
#[derive(Default)]
struct Part {
    chunks: Vec<OutputChunk>,
    /// The link's budget, given back as its output is stored or dropped.
    budget: Option<Arc<Semaphore>>,
    /// Waiting on this output being stored.
    waiting: Vec<oneshot::Sender<bool>>,
    /// The wait before the next try, when this is a retry.
    retry: Option<Duration>,
}

impl Part {
    fn bytes(&self) -> usize {
        self.chunks.iter().map(|c| c.data.len()).sum()
    }

    /// Gives the part's budget back to its link, and takes its bytes off the backlog.
    fn release(&mut self, backlog: &prometheus_client::metrics::gauge::Gauge) {
        if let Some(budget) = &self.budget {
            budget.add_permits(self.chunks.iter().map(cost).sum());
        }
        backlog.dec_by(self.bytes() as i64);
    }
}

/// Parts of several links.
type Parts = Vec<(Link, Part)>;

/// Output of a link whose write failed, kept for the next try.
struct Stalled {
    part: Part,
    at: Instant,
}

/// Everything taken for the next commit.
#[derive(Default)]
struct Group {
    parts: HashMap<Link, Part>,
    bytes: usize,
    closed: Vec<Link>,
    /// Links forgotten (after `closed`, so handled after it).
    forgotten: Vec<Link>,
}

struct Writer<S, N> {
    store: S,
    notices: N,
    stalled: HashMap<Link, Stalled>,
    /// Links that ended with output the database refused (dropped): they answer
    /// [`Request::Stored`] with false until forgotten.
    failed: HashSet<Link>,
    last_commit: Option<Instant>,
    metrics: OutputMetrics,
}

async fn run(
    store: impl OutputStore,
    notices: impl OutputNotices,
    metrics: OutputMetrics,
    hurry: Arc<Notify>,
    mut rx: mpsc::Receiver<Request>,
) {
    let mut w = Writer { store, notices, stalled: HashMap::new(), failed: HashSet::new(), last_commit: None, metrics };
    loop {
        let mut group = Group::default();
        let retry_at = w.stalled.values().map(|s| s.at).min();
        let first = match retry_at {
            None => Some(rx.recv().await),
            Some(at) => tokio::select! {
                r = rx.recv() => Some(r),
                _ = tokio::time::sleep_until(at) => None,
            },
        };
        match first {
            Some(Some(r)) => w.take(&mut group, r),
            Some(None) => return,
            None => {}
        }
        // Small writes wait out the spacing since the last commit (announcements
        // come that much later; viewers here already have the bytes), then take what
        // came; output another replica's viewers wait on ends the wait.
        if group.bytes < SMALL_BYTES {
            if let Some(last) = w.last_commit {
                tokio::select! {
                    () = tokio::time::sleep_until(last + COMMIT_SPACING) => {}
                    () = hurry.notified() => {}
                }
            }
        }
        while group.bytes < GROUP_BYTES {
            match rx.try_recv() {
                Ok(r) => w.take(&mut group, r),
                Err(_) => break,
            }
        }
        w.take_due(&mut group);
        w.commit(group).await;
    }
}

impl<S: OutputStore, N: OutputNotices> Writer<S, N> {
    /// Adds `r` to `group`, or to its link's kept output when that link is stalled.
    fn take(&mut self, group: &mut Group, r: Request) {
        match r {
            Request::Output { link, chunk, budget } => {
                let part = match self.stalled.get_mut(&link) {
                    Some(s) => &mut s.part,
                    None => {
                        group.bytes += chunk.data.len();
                        group.parts.entry(link).or_default()
                    }
                };
                part.budget.get_or_insert(budget);
                part.chunks.push(chunk);
            }
            Request::Stored { link, reply } => {
                if self.failed.contains(&link) {
                    let _ = reply.send(false);
                } else if let Some(s) = self.stalled.get_mut(&link) {
                    s.part.waiting.push(reply);
                } else {
                    group.parts.entry(link).or_default().waiting.push(reply);
                }
            }
            Request::Closed { link } => group.closed.push(link),
            Request::Forget { link } => group.forgotten.push(link),
        }
    }

    /// Moves the kept output whose retry is due into `group`, while it has room (nothing
    /// newer of its link is there: a stalled link's output is kept behind it).
    fn take_due(&mut self, group: &mut Group) {
        let now = Instant::now();
        let due: Vec<Link> = self.stalled.iter().filter(|(_, s)| s.at <= now).map(|(l, _)| *l).collect();
        for link in due {
            if group.bytes >= GROUP_BYTES {
                break;
            }
            if let Some(s) = self.stalled.remove(&link) {
                group.bytes += s.part.bytes();
                group.parts.insert(link, s.part);
            }
        }
    }

    async fn commit(&mut self, group: Group) {
        let Group { parts, closed, forgotten, .. } = group;
        let (writes, waits): (Parts, Parts) = parts.into_iter().partition(|(_, p)| !p.chunks.is_empty());
        for (_, part) in waits {
            for w in part.waiting {
                let _ = w.send(true);
            }
        }
        if !writes.is_empty() {
            self.last_commit = Some(Instant::now());
            let all: Vec<OutputChunk> = writes.iter().flat_map(|(_, p)| p.chunks.iter().cloned()).collect();
            let many = writes.len() > 1;
            match self.append(all).await {
                Ok(held) => self.settle(writes, &held),
                Err(e) if !many => {
                    for (link, part) in writes {
                        self.stall(link, part, &e);
                    }
                }
                // Each link's output written again on its own, so a bad write fails only
                // that link.
                Err(_) => {
                    for (link, part) in writes {
                        match self.append(part.chunks.clone()).await {
                            Ok(held) => self.settle(vec![(link, part)], &held),
                            Err(e) => self.stall(link, part, &e),
                        }
                    }
                }
            }
        }
        // A link that ended with output the database refused: that output is dropped
        // (not stored: the device resends it on its next link, from the welcome's offset).
        for link in closed {
            if let Some(mut s) = self.stalled.remove(&link) {
                tracing::warn!(device = %link.device, "a link ended with output not yet stored; its device resends it");
                s.part.release(&self.metrics.backlog);
                for w in s.part.waiting {
                    let _ = w.send(false);
                }
                self.failed.insert(link);
            }
        }
        for link in forgotten {
            self.failed.remove(&link);
        }
    }

    /// Stores `chunks` in one transaction, timing it.
    async fn append(&self, chunks: Vec<OutputChunk>) -> Result<HashMap<SessionId, u64>, StoreError> {
        let bytes = chunks.iter().map(|c| c.data.len()).sum();
        let started = Instant::now();
        let held = self.store.append_output(chunks).await?;
        self.metrics.committed(bytes, started.elapsed());
        Ok(held)
    }

    /// Stored parts: announces their sessions' output, stops the runs whose output was
    /// refused, and answers whoever waited.
    fn settle(&mut self, parts: Parts, held: &HashMap<SessionId, u64>) {
        let mut announced = Vec::new();
        for (link, mut part) in parts {
            part.release(&self.metrics.backlog);
            let sessions: HashSet<SessionId> = part.chunks.iter().map(|c| c.session).collect();
            for session in sessions {
                match held.get(&session) {
                    Some(_) => announced.push(session),
                    // Output of a run that is no longer live (its lease is gone): refused,
                    // and the device is told to stop the run.
                    None => {
                        tracing::warn!(%session, "refused output of a run that is no longer live: stopping it");
                        self.notices.release(link.device, session);
                    }
                }
            }
            for w in part.waiting {
                let _ = w.send(true);
            }
        }
        self.notices.announce(announced);
    }

    /// Keeps a part that failed to be stored for a later try (nothing of it is
    /// announced or answered as stored, so nothing is lost; its link's budget stays taken, so its reader
    /// waits once the budget is used up).
    fn stall(&mut self, link: Link, mut part: Part, e: &drover_store::StoreError) {
        tracing::error!(device = %link.device, "storing output failed, retrying: {e}");
        let wait = next_retry(part.retry);
        part.retry = Some(wait);
        self.stalled.insert(link, Stalled { part, at: Instant::now() + wait });
    }
}

/// The wait before the next try of a failed write, after `last` (None: the first).
fn next_retry(last: Option<Duration>) -> Duration {
    last.map_or(FIRST_RETRY, |d| (d * 2).min(MAX_RETRY))
}

//! One writer for every device link's output (group commit), which also acknowledges it.
//!
//! A link's read loop queues each piece of output here and goes on reading: nothing
//! waits for a reply, so a line printed costs one queue push, not a round trip through
//! other tasks. The writer stores whatever is queued in one transaction, then tells
//! each link the offsets now held of its sessions. Groups of small writes are spaced
//! [`COMMIT_SPACING`] apart (the writer sleeps until then, so the queue wakes nobody
//! per line), and a lone link that writes now and then waits for nothing.
//!
//! Events that must follow their output (a session's end) wait on
//! [`OutputWriter::stored`], which answers once everything the link queued before it
//! is stored.
//!
//! A write that fails is kept and retried, link by link, so nothing unacknowledged is
//! lost and a link's output is never stored out of order (a gap would be filled with
//! NUL bytes). When no link's write succeeds (the database is down) the writer waits
//! out the retry before taking more, so links wait too. A link whose kept output grows
//! past [`STALLED_BYTES`] is closed: the device reconnects and resends from the offset
//! the server holds.

use std::collections::{HashMap, HashSet};
use std::sync::OnceLock;
use std::time::Duration;

use drover_core::{DeviceId, SessionId};
use drover_protocol::device::ServerMessage;
use drover_store::OutputChunk;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use crate::AppState;

/// Bytes written in one transaction at most (a group stops growing past it).
const GROUP_BYTES: usize = 16 * 1024 * 1024;
/// The least time between the starts of two commits of small groups: a group waits for
/// more until then (which is at once when the last commit was longer ago).
const COMMIT_SPACING: Duration = Duration::from_millis(50);
/// A group smaller than this waits for more (see [`COMMIT_SPACING`]).
const SMALL_BYTES: usize = 256 * 1024;
/// Requests waiting for the writer before links wait.
const QUEUE: usize = 4096;
/// The first wait before a failed write is tried again; it doubles up to [`MAX_RETRY`].
const FIRST_RETRY: Duration = Duration::from_millis(50);
/// The longest wait between tries of a failed write.
const MAX_RETRY: Duration = Duration::from_secs(5);
/// Output kept for one link whose writes fail, at most, before the link is closed.
const STALLED_BYTES: usize = 2 * 1024 * 1024;

/// One connection of a device: its output is stored in the order it was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Link {
    /// The device.
    pub device: DeviceId,
    /// The connection's epoch (`Devices::connect`).
    pub epoch: u64,
}

/// The writer has stopped (the runtime is shutting down).
#[derive(Debug)]
pub(crate) struct Stopped;

enum Request {
    Output { link: Link, chunk: OutputChunk },
    Stored { link: Link, reply: oneshot::Sender<bool> },
    Closed { link: Link },
}

/// The shared writer; started on first use.
#[derive(Default)]
pub(crate) struct OutputWriter {
    queue: OnceLock<mpsc::Sender<Request>>,
}

impl OutputWriter {
    fn queue(&self, state: &AppState) -> &mpsc::Sender<Request> {
        self.queue.get_or_init(|| {
            let (tx, rx) = mpsc::channel(QUEUE);
            tokio::spawn(run(state.clone(), rx));
            tx
        })
    }

    /// Queues `chunk`, read from `link`, to be stored and then acknowledged on the link.
    pub(crate) async fn store(&self, state: &AppState, link: Link, chunk: OutputChunk) -> Result<(), Stopped> {
        self.queue(state).send(Request::Output { link, chunk }).await.map_err(|_| Stopped)
    }

    /// Resolves once everything `link` queued before is stored: true, or false when it
    /// never will be on this link (the link was closed; the device resends it).
    pub(crate) async fn stored(&self, state: &AppState, link: Link) -> bool {
        let (reply, answer) = oneshot::channel();
        if self.queue(state).send(Request::Stored { link, reply }).await.is_err() {
            return false;
        }
        answer.await.unwrap_or(false)
    }

    /// Says `link` has ended (after all its output): what it still holds is dropped.
    pub(crate) async fn closed(&self, state: &AppState, link: Link) {
        let _ = self.queue(state).send(Request::Closed { link }).await;
    }
}

/// What one commit holds of one link.
#[derive(Default)]
struct Part {
    chunks: Vec<OutputChunk>,
    /// Waiting on this output being stored.
    waiting: Vec<oneshot::Sender<bool>>,
    /// The wait before the next try, when this is a retry.
    retry: Option<Duration>,
}

/// Output of a link whose write failed, kept for the next try.
struct Stalled {
    part: Part,
    bytes: usize,
    at: Instant,
}

/// Everything taken for the next commit.
#[derive(Default)]
struct Group {
    parts: HashMap<Link, Part>,
    bytes: usize,
    closed: Vec<Link>,
}

struct Writer {
    state: AppState,
    stalled: HashMap<Link, Stalled>,
    /// Links closed for holding too much failed output: the rest of theirs is dropped.
    dropped: HashSet<Link>,
    last_commit: Option<Instant>,
}

async fn run(state: AppState, mut rx: mpsc::Receiver<Request>) {
    let mut w = Writer { state, stalled: HashMap::new(), dropped: HashSet::new(), last_commit: None };
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
        // Small writes wait out the spacing since the last commit (acknowledgements
        // come that much later; viewers already have the bytes), then take what came.
        if group.bytes < SMALL_BYTES {
            if let Some(last) = w.last_commit {
                tokio::time::sleep_until(last + COMMIT_SPACING).await;
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

impl Writer {
    /// Adds `r` to `group`, or to its link's kept output when that link is stalled.
    fn take(&mut self, group: &mut Group, r: Request) {
        match r {
            Request::Output { link, chunk } => {
                if self.dropped.contains(&link) {
                    return;
                }
                if let Some(s) = self.stalled.get_mut(&link) {
                    s.bytes += chunk.data.len();
                    s.part.chunks.push(chunk);
                    if s.bytes > STALLED_BYTES {
                        self.drop_link(link);
                    }
                    return;
                }
                group.bytes += chunk.data.len();
                group.parts.entry(link).or_default().chunks.push(chunk);
            }
            Request::Stored { link, reply } => {
                if self.dropped.contains(&link) {
                    let _ = reply.send(false);
                } else if let Some(s) = self.stalled.get_mut(&link) {
                    s.part.waiting.push(reply);
                } else {
                    group.parts.entry(link).or_default().waiting.push(reply);
                }
            }
            Request::Closed { link } => group.closed.push(link),
        }
    }

    /// Moves the kept output whose retry is due into `group` (nothing newer of its link
    /// is there: a stalled link's output is kept behind it).
    fn take_due(&mut self, group: &mut Group) {
        let now = Instant::now();
        let due: Vec<Link> = self.stalled.iter().filter(|(_, s)| s.at <= now).map(|(l, _)| *l).collect();
        for link in due {
            if let Some(s) = self.stalled.remove(&link) {
                group.bytes += s.bytes;
                group.parts.insert(link, s.part);
            }
        }
    }

    /// Closes `link`, dropping what it holds: the device resends it when it reconnects.
    fn drop_link(&mut self, link: Link) {
        tracing::error!(device = %link.device, "output of this device's link could not be stored; closing the link so it resends");
        if let Some(s) = self.stalled.remove(&link) {
            for w in s.part.waiting {
                let _ = w.send(false);
            }
        }
        self.dropped.insert(link);
        self.state.devices.close_local(link.device, link.epoch);
    }

    async fn commit(&mut self, group: Group) {
        let Group { parts, closed, .. } = group;
        let writes = parts.values().any(|p| !p.chunks.is_empty());
        let mut any_stored = !writes;
        if writes {
            self.last_commit = Some(Instant::now());
            let parts: Vec<(Link, Part)> = parts.into_iter().collect();
            let all: Vec<OutputChunk> = parts.iter().flat_map(|(_, p)| p.chunks.iter().cloned()).collect();
            let many = parts.len() > 1;
            match self.state.store.append_output(all).await {
                Ok(held) => {
                    any_stored = true;
                    for (link, part) in parts {
                        self.settle(link, part, &held);
                    }
                }
                Err(e) if !many => {
                    for (link, part) in parts {
                        self.stall(link, part, &e);
                    }
                }
                // One link's output written again on its own, so a bad write fails only
                // that link.
                Err(_) => {
                    for (link, part) in parts {
                        match self.state.store.append_output(part.chunks.clone()).await {
                            Ok(held) => {
                                any_stored = true;
                                self.settle(link, part, &held);
                            }
                            Err(e) => self.stall(link, part, &e),
                        }
                    }
                }
            }
        } else {
            for (_, part) in parts {
                for w in part.waiting {
                    let _ = w.send(true);
                }
            }
        }
        for link in closed {
            self.dropped.remove(&link);
            if let Some(s) = self.stalled.remove(&link) {
                for w in s.part.waiting {
                    let _ = w.send(false);
                }
            }
        }
        // Nothing could be stored (the database is away): wait for the retry before
        // taking more, so the links wait too instead of piling output up here.
        if !any_stored {
            if let Some(at) = self.stalled.values().map(|s| s.at).min() {
                tokio::time::sleep_until(at).await;
            }
        }
    }

    /// A stored part: acknowledges its sessions on the link, stops the runs whose
    /// output was refused, and answers whoever waited.
    fn settle(&mut self, link: Link, part: Part, held: &HashMap<SessionId, u64>) {
        let sessions: HashSet<SessionId> = part.chunks.iter().map(|c| c.session).collect();
        for session in sessions {
            match held.get(&session) {
                Some(&offset) => {
                    self.state.devices.post_local(link.device, &ServerMessage::Ack { session, offset });
                    crate::cluster::announce_output(&self.state, session);
                }
                // Output of a run that is no longer live (its lease is gone): refused,
                // and the device is told to stop the run.
                None => {
                    tracing::warn!(%session, "refused output of a run that is no longer live: stopping it");
                    let state = self.state.clone();
                    tokio::spawn(async move {
                        let _ = state.devices.send(link.device, &ServerMessage::Release { session }).await;
                    });
                }
            }
        }
        for w in part.waiting {
            let _ = w.send(true);
        }
    }

    /// Keeps a part that failed to be stored for a later try (nothing of it is
    /// acknowledged, so nothing is lost).
    fn stall(&mut self, link: Link, mut part: Part, e: &drover_store::StoreError) {
        tracing::error!(device = %link.device, "storing output failed, retrying: {e}");
        let wait = part.retry.map_or(FIRST_RETRY, |d| (d * 2).min(MAX_RETRY));
        part.retry = Some(wait);
        let bytes = part.chunks.iter().map(|c| c.data.len()).sum();
        self.stalled.insert(link, Stalled { part, bytes, at: Instant::now() + wait });
    }
}

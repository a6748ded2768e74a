//! One writer for every device link's output (group commit). Each link's ingest task
//! batches its own output; with many devices printing a little each, that is one
//! transaction per link per line. Their batches are queued here instead and written
//! together: whatever arrived while the last write was committing goes into the next
//! one, and groups of small batches are spaced [`COMMIT_SPACING`] apart, so the commit
//! rate stays bounded, not what the fleet prints, while a lone link that writes now and
//! then waits for nothing.

use std::collections::{HashMap, HashSet};
use std::sync::OnceLock;

use drover_core::SessionId;
use drover_store::{OutputChunk, Store, StoreError};
use tokio::sync::{mpsc, oneshot};

/// Bytes written in one transaction at most (a group stops growing past it).
const GROUP_BYTES: usize = 16 * 1024 * 1024;
/// The least time between the starts of two commits of small groups: a group waits for
/// more until then (which is at once when the last commit was longer ago).
const COMMIT_SPACING: std::time::Duration = std::time::Duration::from_millis(50);
/// A group smaller than this waits for more (see [`COMMIT_SPACING`]).
const SMALL_BYTES: usize = 256 * 1024;
/// Batches waiting for the writer before links wait.
const QUEUE: usize = 4096;

/// Per session, the offset now held (what may be acknowledged), or why not.
type Held = Result<HashMap<SessionId, u64>, String>;

/// What a link asks for: its batch stored, and the offsets now held of its sessions.
struct Request {
    chunks: Vec<OutputChunk>,
    reply: oneshot::Sender<Held>,
}

/// The shared writer; started on first use.
#[derive(Default)]
pub(crate) struct OutputWriter {
    queue: OnceLock<mpsc::Sender<Request>>,
}

impl OutputWriter {
    /// Stores `chunks` (with whatever else is waiting) and returns, per session of
    /// theirs, the offset now held; a session missing is no longer live (fenced).
    pub(crate) async fn append(&self, store: &Store, chunks: Vec<OutputChunk>) -> Held {
        let queue = self.queue.get_or_init(|| {
            let (tx, rx) = mpsc::channel(QUEUE);
            tokio::spawn(run(store.clone(), rx));
            tx
        });
        let (reply, answer) = oneshot::channel();
        queue.send(Request { chunks, reply }).await.map_err(|_| "the output writer stopped".to_string())?;
        answer.await.map_err(|_| "the output writer stopped".to_string())?
    }
}

async fn run(store: Store, mut rx: mpsc::Receiver<Request>) {
    let mut last_commit: Option<tokio::time::Instant> = None;
    while let Some(first) = rx.recv().await {
        let mut group = vec![first];
        let mut bytes: usize = group[0].chunks.iter().map(|c| c.data.len()).sum();
        // Small batches wait for others until the spacing since the last commit is up
        // (acknowledgements come that much later; viewers already have the bytes); a
        // big one is written at once.
        let deadline = last_commit.map_or_else(tokio::time::Instant::now, |t| t + COMMIT_SPACING);
        while bytes < GROUP_BYTES {
            let next =
                if bytes < SMALL_BYTES { tokio::time::timeout_at(deadline, rx.recv()).await.ok().flatten() } else { rx.try_recv().ok() };
            match next {
                Some(r) => {
                    bytes += r.chunks.iter().map(|c| c.data.len()).sum::<usize>();
                    group.push(r);
                }
                None => break,
            }
        }
        last_commit = Some(tokio::time::Instant::now());
        let mut all = Vec::new();
        let mut asked: Vec<(HashSet<SessionId>, oneshot::Sender<Held>)> = Vec::new();
        for r in group {
            asked.push((r.chunks.iter().map(|c| c.session).collect(), r.reply));
            all.extend(r.chunks);
        }
        // A group that fails is written again link by link, so one link's bad batch
        // fails only that link (which retries it) and not everyone's.
        let spare = (asked.len() > 1).then(|| all.clone());
        match (store.append_output(all).await, spare) {
            (Ok(held), _) => {
                for (sessions, reply) in asked {
                    let _ = reply.send(Ok(held.iter().filter(|(s, _)| sessions.contains(s)).map(|(s, o)| (*s, *o)).collect()));
                }
            }
            (Err(e), None) => {
                for (_, reply) in asked {
                    let _ = reply.send(Err(e.to_string()));
                }
            }
            (Err(_), Some(all)) => {
                for (sessions, reply) in asked {
                    let mine: Vec<OutputChunk> = all.iter().filter(|c| sessions.contains(&c.session)).cloned().collect();
                    let _ = reply.send(store.append_output(mine).await.map_err(|e: StoreError| e.to_string()));
                }
            }
        }
    }
}

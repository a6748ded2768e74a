//! The writer against an in-memory store: group commit, retries and budgets.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use drover_core::{DeviceId, SessionId};
use drover_store::{OutputChunk, StoreError};
use tokio::sync::Semaphore;
use tokio::time::Instant;

use super::*;

/// A store held in memory that fails the writes touching a session while it is told
/// to, and can be held shut (a slow database).
#[derive(Clone, Default)]
struct FakeStore {
    inner: Arc<Mutex<Inner>>,
    /// When set, a write waits for a permit.
    gate: Option<Arc<Semaphore>>,
}

#[derive(Default)]
struct Inner {
    /// Every write tried: its chunks, and whether it was stored.
    tries: Vec<(Vec<OutputChunk>, bool, Instant)>,
    /// Sessions whose writes fail, and how many more times.
    failing: HashMap<SessionId, u32>,
    /// The offsets held per session.
    held: HashMap<SessionId, u64>,
    /// Sessions whose output is refused (no longer live).
    refused: Vec<SessionId>,
}

impl FakeStore {
    fn fail(&self, session: SessionId, times: u32) {
        self.inner.lock().unwrap().failing.insert(session, times);
    }

    fn tries(&self) -> Vec<(Vec<OutputChunk>, bool, Instant)> {
        self.inner.lock().unwrap().tries.clone()
    }

    /// The bytes stored of `session`, in the order they were stored.
    fn stored(&self, session: SessionId) -> Vec<u8> {
        let tries = self.tries();
        tries
            .iter()
            .filter(|(_, ok, _)| *ok)
            .flat_map(|(c, _, _)| c.iter())
            .filter(|c| c.session == session)
            .flat_map(|c| c.data.clone())
            .collect()
    }
}

impl OutputStore for FakeStore {
    async fn append_output(&self, chunks: Vec<OutputChunk>) -> Result<HashMap<SessionId, u64>, StoreError> {
        if let Some(gate) = &self.gate {
            gate.acquire().await.expect("gate").forget();
        }
        let mut inner = self.inner.lock().unwrap();
        let failing = chunks.iter().any(|c| inner.failing.get(&c.session).is_some_and(|n| *n > 0));
        inner.tries.push((chunks.clone(), !failing, Instant::now()));
        if failing {
            for c in &chunks {
                if let Some(n) = inner.failing.get_mut(&c.session) {
                    *n = n.saturating_sub(1);
                }
            }
            return Err(StoreError::Io("the disk is full".into()));
        }
        let mut held = HashMap::new();
        for c in chunks {
            if inner.refused.contains(&c.session) {
                continue;
            }
            let end = c.offset + c.data.len() as u64;
            inner.held.insert(c.session, end);
            held.insert(c.session, end);
        }
        Ok(held)
    }
}

/// What the writer told, in order; and the sessions another replica follows.
#[derive(Clone, Default)]
struct FakeNotices(Arc<Mutex<Vec<Notice>>>, Arc<Mutex<HashSet<SessionId>>>);

#[derive(Debug, Clone, PartialEq, Eq)]
enum Notice {
    Release(DeviceId, SessionId),
    Announce(Vec<SessionId>),
}

impl FakeNotices {
    fn all(&self) -> Vec<Notice> {
        self.0.lock().unwrap().clone()
    }

    /// The sessions announced as having more output stored, in order.
    fn announced(&self) -> Vec<SessionId> {
        self.all()
            .into_iter()
            .flat_map(|n| match n {
                Notice::Announce(sessions) => sessions,
                Notice::Release(..) => Vec::new(),
            })
            .collect()
    }
}

impl OutputNotices for FakeNotices {
    fn release(&self, device: DeviceId, session: SessionId) {
        self.0.lock().unwrap().push(Notice::Release(device, session));
    }

    fn announce(&self, sessions: Vec<SessionId>) {
        self.0.lock().unwrap().push(Notice::Announce(sessions));
    }

    fn followed(&self, session: SessionId) -> bool {
        self.1.lock().unwrap().contains(&session)
    }
}

fn link() -> LinkOutput {
    LinkOutput::new(Link { device: DeviceId::new(), epoch: 1 })
}

fn chunk(session: SessionId, offset: u64, data: &[u8]) -> OutputChunk {
    OutputChunk { session, offset, t_micros: 0, data: bytes::Bytes::copy_from_slice(data) }
}

fn start(store: &FakeStore, notices: &FakeNotices) -> Queue {
    Queue::start(store.clone(), notices.clone(), OutputMetrics::new())
}

#[tokio::test]
async fn output_queued_together_is_stored_in_one_commit() {
    let (store, notices) = (FakeStore::default(), FakeNotices::default());
    let q = start(&store, &notices);
    let (a, b) = (link(), link());
    let (sa, sb) = (SessionId::new(), SessionId::new());
    // Queued before the writer task first runs (one thread: it runs when this waits).
    q.store(&a, chunk(sa, 0, b"one ")).await.unwrap();
    q.store(&b, chunk(sb, 0, b"two")).await.unwrap();
    q.store(&a, chunk(sa, 4, b"three")).await.unwrap();
    assert!(q.stored(a.link()).await);
    assert!(q.stored(b.link()).await);
    let tries = store.tries();
    assert_eq!(tries.len(), 1, "one transaction for everything queued");
    assert_eq!(tries[0].0.len(), 3);
    assert_eq!(store.stored(sa), b"one three");
    assert_eq!(store.stored(sb), b"two");
    let mut announced = notices.announced();
    announced.sort_by_key(|s| *s == sb);
    assert_eq!(announced, vec![sa, sb], "each session announced once, after the commit");
}

#[tokio::test]
async fn small_writes_are_spaced_apart() {
    let (store, notices) = (FakeStore::default(), FakeNotices::default());
    let q = start(&store, &notices);
    let a = link();
    let s = SessionId::new();
    q.store(&a, chunk(s, 0, b"a")).await.unwrap();
    assert!(q.stored(a.link()).await);
    q.store(&a, chunk(s, 1, b"b")).await.unwrap();
    assert!(q.stored(a.link()).await);
    let tries = store.tries();
    assert_eq!(tries.len(), 2);
    assert!(tries[1].2 - tries[0].2 >= COMMIT_SPACING, "the second small commit waited out the spacing");
}

// On the paused clock, which moves only when every task waits: the spacing cannot end
// by itself before the followed output comes.
#[tokio::test(start_paused = true)]
async fn output_another_replica_follows_is_not_held_by_the_spacing() {
    let (store, notices) = (FakeStore::default(), FakeNotices::default());
    let q = start(&store, &notices);
    let (a, b) = (link(), link());
    let (quiet, followed) = (SessionId::new(), SessionId::new());
    notices.1.lock().unwrap().insert(followed);
    q.store(&a, chunk(quiet, 0, b"a")).await.unwrap();
    assert!(q.stored(a.link()).await);
    // The writer now waits out the spacing for this one…
    q.store(&a, chunk(quiet, 1, b"b")).await.unwrap();
    tokio::time::sleep(COMMIT_SPACING / 5).await;
    // …until output of a followed session comes: both go in the next commit, at once.
    q.store(&b, chunk(followed, 0, b"echo")).await.unwrap();
    assert!(q.stored(b.link()).await);
    let tries = store.tries();
    assert_eq!(tries.len(), 2);
    assert_eq!(tries[1].0.len(), 2, "what waited went with the followed output");
    let gap = tries[1].2 - tries[0].2;
    assert_eq!(gap, COMMIT_SPACING / 5, "the followed output was committed as it came, not after the spacing");
    // A followed session's output alone after a commit waits for nothing either.
    q.store(&b, chunk(followed, 4, b"!")).await.unwrap();
    assert!(q.stored(b.link()).await);
    let tries = store.tries();
    assert_eq!(tries[2].2, tries[1].2, "committed at once");
}

#[tokio::test]
async fn a_failed_write_is_retried_in_order_with_growing_waits() {
    let (store, notices) = (FakeStore::default(), FakeNotices::default());
    let q = start(&store, &notices);
    let a = link();
    let s = SessionId::new();
    store.fail(s, 2);
    q.store(&a, chunk(s, 0, b"first ")).await.unwrap();
    // Let the first try fail, then queue more behind it.
    tokio::time::sleep(Duration::from_millis(10)).await;
    q.store(&a, chunk(s, 6, b"second")).await.unwrap();
    assert!(q.stored(a.link()).await);
    let tries = store.tries();
    assert_eq!(tries.iter().map(|t| t.1).collect::<Vec<_>>(), vec![false, false, true]);
    assert!(tries[1].2 - tries[0].2 >= FIRST_RETRY);
    assert!(tries[2].2 - tries[1].2 >= FIRST_RETRY * 2, "the wait doubles");
    assert_eq!(store.stored(s), b"first second", "kept output is stored before what came after it");
    assert_eq!(notices.announced(), vec![s], "nothing announced before it is stored");
}

#[tokio::test]
async fn a_failing_link_holds_up_only_itself() {
    let (store, notices) = (FakeStore::default(), FakeNotices::default());
    let q = start(&store, &notices);
    let (a, b) = (link(), link());
    let (sa, sb) = (SessionId::new(), SessionId::new());
    store.fail(sa, 1);
    q.store(&a, chunk(sa, 0, b"bad")).await.unwrap();
    q.store(&b, chunk(sb, 0, b"good")).await.unwrap();
    let t0 = Instant::now();
    assert!(q.stored(b.link()).await);
    assert!(t0.elapsed() < FIRST_RETRY, "the other link is stored without waiting for the retry");
    assert_eq!(store.stored(sb), b"good");
    assert!(q.stored(a.link()).await);
    assert_eq!(store.stored(sa), b"bad");
}

#[tokio::test]
async fn a_link_closed_with_unstored_output_answers_false_until_forgotten() {
    let (store, notices) = (FakeStore::default(), FakeNotices::default());
    let q = start(&store, &notices);
    let a = link();
    let s = SessionId::new();
    store.fail(s, u32::MAX);
    q.store(&a, chunk(s, 0, b"lost")).await.unwrap();
    q.closed(a.link()).await;
    assert!(!q.stored(a.link()).await, "its output was dropped, not stored");
    assert!(notices.announced().is_empty());
    assert_eq!(a.budget.available_permits(), LINK_BUDGET, "the dropped output's budget is given back");
    q.forget(a.link()).await;
    // (A request taken with the forget is answered before it is handled.)
    tokio::time::sleep(COMMIT_SPACING * 2).await;
    assert!(q.stored(a.link()).await, "a forgotten link answers like a new one");
}

#[tokio::test]
async fn refused_output_stops_its_run_and_is_not_acknowledged() {
    let (store, notices) = (FakeStore::default(), FakeNotices::default());
    let q = start(&store, &notices);
    let a = link();
    let s = SessionId::new();
    store.inner.lock().unwrap().refused.push(s);
    q.store(&a, chunk(s, 0, b"late")).await.unwrap();
    assert!(q.stored(a.link()).await);
    assert_eq!(notices.all(), vec![Notice::Release(a.link().device, s), Notice::Announce(vec![])]);
}

#[tokio::test]
async fn a_link_waits_once_its_budget_is_queued() {
    let gate = Arc::new(Semaphore::new(0));
    let store = FakeStore { gate: Some(gate.clone()), ..FakeStore::default() };
    let notices = FakeNotices::default();
    let q = start(&store, &notices);
    let a = link();
    let s = SessionId::new();
    let big = vec![b'x'; LINK_BUDGET];
    q.store(&a, chunk(s, 0, &big)).await.unwrap();
    let next = q.store(&a, chunk(s, big.len() as u64, b"y"));
    tokio::pin!(next);
    assert!(tokio::time::timeout(Duration::from_millis(100), &mut next).await.is_err(), "the reader waits while its budget is queued");
    gate.add_permits(10);
    tokio::time::timeout(Duration::from_secs(5), next).await.expect("stored output gives its budget back").unwrap();
    assert!(q.stored(a.link()).await);
    assert_eq!(a.budget.available_permits(), LINK_BUDGET);
}

#[test]
fn retry_waits_double_up_to_the_cap() {
    assert_eq!(next_retry(None), FIRST_RETRY);
    assert_eq!(next_retry(Some(FIRST_RETRY)), FIRST_RETRY * 2);
    assert_eq!(next_retry(Some(MAX_RETRY - Duration::from_millis(1))), MAX_RETRY);
    assert_eq!(next_retry(Some(MAX_RETRY)), MAX_RETRY);
}

#[test]
fn a_piece_costs_its_length_within_the_budget() {
    let s = SessionId::new();
    assert_eq!(cost(&chunk(s, 0, b"")), 1);
    assert_eq!(cost(&chunk(s, 0, b"abc")), 3);
    assert_eq!(cost(&chunk(s, 0, &vec![0; LINK_BUDGET + 1])), LINK_BUDGET);
}

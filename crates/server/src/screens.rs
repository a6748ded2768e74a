//! Screen checkpoints, made and used. A session's whole terminal state is kept every
//! [`EVERY_BYTES`] of output while it runs and once at its end
//! (`drover_render::checkpoint`), so the screen at any point — a finished session's
//! Final screen, a viewer the device cannot answer, the player's seek — is the nearest
//! checkpoint plus at most about that many bytes: bounded work however long it ran.
//!
//! The checkpointer runs on one server at a time (its lease) and does its parsing on a
//! thread of its own at the lowest CPU priority, so a burst of output or the first pass
//! over sessions stored before checkpoints existed never slows what people are doing.
//! Each new checkpoint is the last one plus the bytes since: no model is held between
//! checkpoints, whatever the number of live sessions.

use std::sync::{mpsc, Arc, OnceLock};
use std::time::Duration;

use drover_core::SessionId;
use drover_render::checkpoint::{Replayer, Resizes, Taken};
use drover_store::{CheckpointAt, ScreenCheckpoint, ScreenDue, Store, StoreError};

use crate::leases::Monitor;
use crate::AppState;

/// Output between two checkpoints of a live session. What a seek replays past its
/// checkpoint is at most this much, and output that scrolls line by line replays slowest
/// (the README's benchmark section has the rate): the spacing bounds the slowest seek.
pub const EVERY_BYTES: u64 = 256 * 1024;
/// A quiet session gets a checkpoint after [`QUIET_AFTER`] once it printed this much.
const QUIET_BYTES: u64 = 64 * 1024;
/// How long a quiet session waits for its next checkpoint.
const QUIET_AFTER: Duration = Duration::from_secs(600);
/// Output replayed past a checkpoint to answer a request, at most: beyond it the screen is
/// not ready (its checkpoints are still being built).
pub const MAX_TAIL_BYTES: u64 = 8 * 1024 * 1024;
/// How often the checkpointer looks for sessions that need one.
const PASS_EVERY: Duration = Duration::from_secs(1);
/// A pass's look for due sessions reads every live session: the passes are spaced so
/// that it takes at most one part in this many of the time (with a large fleet's live
/// sessions it was a scan of them all every second, most of the server's CPU).
const LOOK_SHARE: u32 = 20;
/// Sessions handled per pass.
const PASS_SESSIONS: i64 = 16;
/// Bytes read from the store per step of the checkpointer.
const PAGE: usize = 4 * 1024 * 1024;
/// Bytes read per step when answering a request (the tail past a checkpoint is short;
/// what follows the point wanted is not read).
const TAIL_PAGE: usize = 256 * 1024;

/// Where in a session's stream a screen is wanted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScreenPoint {
    /// After everything stored and every resize: a finished session's Final screen, a
    /// live one's screen now.
    End,
    /// After the output and resizes at or before this time (µs since the start), as a
    /// player that reached it shows.
    Time(u64),
}

/// Why a screen could not be had.
#[derive(Debug, thiserror::Error)]
pub enum ScreenError {
    /// Too much output lies past the nearest checkpoint: checkpoints are still being built.
    #[error("this session's screen is still being prepared; try again in a few seconds")]
    NotReady,
    /// Reading the store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The screen at `point` of `session`: the nearest checkpoint at or before it plus the
/// output after it. `size_now` stands for the size it started at when that was not kept.
pub async fn screen_at(store: &Store, session: SessionId, point: ScreenPoint, size_now: (u16, u16)) -> Result<Taken, ScreenError> {
    let (start_size, Recorded { list: resizes, .. }) = sizes(store, session, size_now).await?;
    let (at, until) = match point {
        ScreenPoint::End => (CheckpointAt::Offset(u64::MAX), u64::MAX),
        ScreenPoint::Time(t) => (CheckpointAt::Time(t), t),
    };
    let mut r = match store.checkpoint(session, at).await? {
        Some(c) => Replayer::resume(&taken(c), resizes),
        None => Replayer::start(start_size, resizes),
    };
    let base = r.offset();
    loop {
        let mut rows = store.read_output_rows(session, r.offset(), TAIL_PAGE).await?;
        let before = rows.len();
        rows.retain(|c| c.t_micros <= until);
        let (Some(last), done) = (rows.last(), rows.len() < before) else { break };
        if last.offset + last.data.len() as u64 - base > MAX_TAIL_BYTES {
            return Err(ScreenError::NotReady);
        }
        r = on_cpu(move || {
            for c in &rows {
                r.feed(c.offset, c.t_micros, &c.data);
            }
            r
        })
        .await?;
        if done {
            break;
        }
    }
    r.resize_until(match point {
        ScreenPoint::End => None,
        ScreenPoint::Time(t) => Some(t),
    });
    Ok(r.take())
}

/// The screen as the output from `from` on draws it on a blank `size` terminal (an
/// approximation, for a live session whose checkpoints lag too far behind).
pub async fn recent_screen(store: &Store, session: SessionId, from: u64, size: (u16, u16)) -> Result<Taken, StoreError> {
    let mut r = Replayer::start(size, Resizes::default());
    let mut offset = from;
    loop {
        let rows = store.read_output_rows(session, offset, PAGE).await?;
        let Some(last) = rows.last() else { break };
        offset = last.offset + last.data.len() as u64;
        r = on_cpu(move || {
            for c in &rows {
                r.feed(c.offset, c.t_micros, &c.data);
            }
            r
        })
        .await?;
    }
    Ok(r.take())
}

/// What a viewer's terminal is sent to show a screen: a reset of whatever it showed,
/// then the checkpoint's dump.
pub fn redraw(t: &Taken) -> Vec<u8> {
    let mut data = b"\x1b[?1049l\x1b[!p\x1b[0m\x1b[r\x1b[H\x1b[2J".to_vec();
    data.extend_from_slice(t.dump.as_bytes());
    data
}

/// A session's resizes as its marks record them.
pub(crate) struct Recorded {
    /// The resizes that could be read, in order.
    pub(crate) list: Resizes,
    /// How many resize marks there were (the checkpointer's check that none came since).
    recorded: usize,
}

/// A session's first size (`fallback` when it was not kept) and resizes, from its marks.
pub(crate) async fn sizes(store: &Store, session: SessionId, fallback: (u16, u16)) -> Result<((u16, u16), Recorded), StoreError> {
    let marks = store.marks(session).await?;
    let first = marks.iter().find(|m| m.kind == "s").and_then(|m| crate::render::parse_size(&m.data)).unwrap_or(fallback);
    let list = marks.iter().filter(|m| m.kind == "r").filter_map(|m| crate::render::parse_size(&m.data).map(|s| (m.t_micros, s))).collect();
    let recorded = marks.iter().filter(|m| m.kind == "r").count();
    Ok((first, Recorded { list: Resizes { list }, recorded }))
}

fn taken(c: ScreenCheckpoint) -> Taken {
    Taken { offset: c.offset, t_micros: c.t_micros, size: (c.cols, c.rows), dump: c.data }
}

fn stored(t: &Taken) -> ScreenCheckpoint {
    ScreenCheckpoint { offset: t.offset, t_micros: t.t_micros, cols: t.size.0, rows: t.size.1, data: t.dump.clone() }
}

/// Runs terminal emulation off the async workers (it is CPU work), in its turn: at most
/// [`replay_slots`] run at once across the server, and the rest wait for one to end.
pub(crate) async fn on_cpu<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Result<T, StoreError> {
    let turn = replays().clone().acquire_owned().await.map_err(|e| StoreError::Io(e.to_string()))?;
    // The turn ends with the work, not with the request: one given up on still runs out.
    tokio::task::spawn_blocking(move || {
        let _turn = turn;
        f()
    })
    .await
    .map_err(|e| StoreError::Io(e.to_string()))
}

/// How many replays (screens at a point, texts) may run at once: one fewer than the
/// cores, and at least one, so a core is always left to the threads that serve requests
/// however many people ask for whole transcripts at once.
fn replay_slots() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().saturating_sub(1).max(1))
}

/// The turns of [`on_cpu`].
fn replays() -> &'static Arc<tokio::sync::Semaphore> {
    static REPLAYS: OnceLock<Arc<tokio::sync::Semaphore>> = OnceLock::new();
    REPLAYS.get_or_init(|| Arc::new(tokio::sync::Semaphore::new(replay_slots())))
}

/// Starts the checkpointer: every [`PASS_EVERY`], while this server holds its lease, it
/// brings the sessions that need one up to date.
pub fn spawn(state: AppState) {
    let cpu = LowPriority::start();
    tokio::spawn(async move {
        let mut wait = PASS_EVERY;
        loop {
            tokio::time::sleep(wait).await;
            if !state.leases.holds(Monitor::Screens) {
                continue;
            }
            match pass(&state.store, &cpu).await {
                Ok(looked) => wait = pass_wait(looked),
                Err(e) => tracing::warn!("making screen checkpoints: {e}"),
            }
        }
    });
}

/// The wait before the next pass, after one whose look for due sessions took `looked`:
/// [`PASS_EVERY`], or longer where that look is slow (it reads every live session), so
/// it takes at most 1/[`LOOK_SHARE`] of the time.
fn pass_wait(looked: Duration) -> Duration {
    PASS_EVERY.max(looked * LOOK_SHARE)
}

/// One pass over the sessions that need a checkpoint; returns how long finding them took.
async fn pass(store: &Store, cpu: &LowPriority) -> Result<Duration, StoreError> {
    let stale = chrono::Utc::now() - chrono::Duration::from_std(QUIET_AFTER).unwrap_or_default();
    let t0 = std::time::Instant::now();
    let due = store.screens_due(EVERY_BYTES, QUIET_BYTES, &drover_store::format_time(stale), PASS_SESSIONS).await?;
    let looked = t0.elapsed();
    for d in due {
        if let Err(e) = bring_up_to_date(store, cpu, &d).await {
            tracing::warn!(session = %d.session, "making a screen checkpoint: {e}");
        }
    }
    Ok(looked)
}

/// Makes `due`'s missing checkpoints: one every [`EVERY_BYTES`] after its last, and for
/// an ended session the one at its end.
pub async fn bring_up_to_date(store: &Store, cpu: &LowPriority, due: &ScreenDue) -> Result<(), StoreError> {
    if due.ended && due.output_bytes == 0 {
        return store.screen_done(due.session).await;
    }
    let (_, resizes) = sizes(store, due.session, due.start_size).await?;
    let known = resizes.recorded;
    let last = store.checkpoint(due.session, CheckpointAt::Offset(u64::MAX)).await?;
    let mut next_at = last.as_ref().map_or(EVERY_BYTES, |c| c.offset + EVERY_BYTES);
    let mut r = match last {
        Some(c) => Replayer::resume(&taken(c), resizes.list),
        None => Replayer::start(due.start_size, resizes.list),
    };
    let mut made = None;
    loop {
        let chunks = store.read_output_rows(due.session, r.offset(), PAGE).await?;
        if chunks.is_empty() {
            break;
        }
        let (back, taken) = cpu
            .run(move || {
                let mut taken = Vec::new();
                for c in &chunks {
                    r.feed(c.offset, c.t_micros, &c.data);
                    if r.offset() >= next_at {
                        taken.push(r.take());
                        next_at = r.offset() + EVERY_BYTES;
                    }
                }
                (r, taken)
            })
            .await?;
        r = back;
        for t in &taken {
            if !store.put_checkpoint(due.session, &stored(t), false, known).await? {
                // A resize came in meanwhile: the next pass starts again with it.
                return Ok(());
            }
            made = Some(t.offset);
        }
    }
    if due.ended {
        r.resize_until(None);
        store.put_checkpoint(due.session, &stored(&r.take()), true, known).await?;
    } else if made.is_none() && r.offset() > 0 {
        // A quiet session's checkpoint, made on time rather than size.
        store.put_checkpoint(due.session, &stored(&r.take()), false, known).await?;
    }
    Ok(())
}

/// Puts the calling thread in the idle scheduling class: it runs on CPU time nothing
/// else wants, and a thread that wakes to serve people takes the CPU from it at once (at
/// nice 19 alone it kept the CPU to the end of its slice, and a core it held did not
/// count as free for a waking thread). Nice 19 where the class is refused.
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

/// A thread at the lowest CPU priority that runs the checkpointer's emulation.
pub struct LowPriority {
    jobs: mpsc::Sender<Box<dyn FnOnce() + Send>>,
}

impl LowPriority {
    /// Starts the thread (it ends with the last handle).
    pub fn start() -> LowPriority {
        let (jobs, rx) = mpsc::channel::<Box<dyn FnOnce() + Send>>();
        let spawned = std::thread::Builder::new().name("screens".into()).spawn(move || {
            idle_priority();
            for job in rx {
                job();
            }
        });
        if let Err(e) = spawned {
            tracing::warn!("cannot start the screen checkpoint thread: {e}");
        }
        LowPriority { jobs }
    }

    /// Runs `f` on the thread and waits for its result.
    pub async fn run<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> Result<T, StoreError> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.jobs
            .send(Box::new(move || {
                let _ = tx.send(f());
            }))
            .map_err(|_| StoreError::Io("the screen checkpoint thread has stopped".into()))?;
        rx.await.map_err(|_| StoreError::Io("the screen checkpoint thread has stopped".into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passes_are_spaced_by_the_time_their_look_takes() {
        assert_eq!(pass_wait(Duration::from_millis(5)), PASS_EVERY);
        assert_eq!(pass_wait(PASS_EVERY / LOOK_SHARE), PASS_EVERY);
        assert_eq!(pass_wait(Duration::from_millis(300)), Duration::from_millis(300) * LOOK_SHARE);
    }

    #[tokio::test]
    async fn the_checkpointers_parsing_runs_in_the_idle_class() {
        let cpu = LowPriority::start();
        // SAFETY: reads the calling thread's own policy; no memory is shared with the call.
        let policy = cpu.run(|| unsafe { libc::sched_getscheduler(0) }).await.unwrap();
        assert_eq!(policy, libc::SCHED_IDLE);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn replays_take_turns_for_the_cpu() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let (running, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let replays: Vec<_> = (0..replay_slots() + 4)
            .map(|_| {
                let (running, most) = (running.clone(), most.clone());
                tokio::spawn(on_cpu(move || {
                    most.fetch_max(running.fetch_add(1, Ordering::SeqCst) + 1, Ordering::SeqCst);
                    std::thread::sleep(Duration::from_millis(30));
                    running.fetch_sub(1, Ordering::SeqCst);
                }))
            })
            .collect();
        // One given up on keeps its turn until its work is done.
        replays[0].abort();
        for r in replays.into_iter().skip(1) {
            r.await.unwrap().unwrap();
        }
        let most = most.load(Ordering::SeqCst);
        assert!((1..=replay_slots()).contains(&most), "{most} ran at once, at most {} may", replay_slots());
    }
}

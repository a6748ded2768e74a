//! The monitor's flag, lost and stall decisions against an in-memory store and links.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use chrono::Utc;
use drover_core::liveness::{LivenessRules, StaleFlag};
use drover_core::{DeviceId, RunEnd, SessionId, TaskId};
use drover_store::{LiveGlance, StoreError};

use super::*;

const SILENT: Duration = Duration::from_secs(15 * 60);
const STALL: Duration = Duration::from_secs(30 * 60);

fn ago(d: Duration) -> String {
    drover_store::format_time(Utc::now() - chrono::Duration::from_std(d).unwrap())
}

/// A session created an hour ago on a device last heard from `contact` ago.
fn watched(contact: Duration) -> Watched {
    let session = SessionId::new();
    Watched {
        glance: LiveGlance {
            session,
            created_at: ago(Duration::from_secs(3600)),
            stale_flag: None,
            task_run: false,
            sandbox_finished: false,
            sandbox_changed_at: ago(Duration::from_secs(3600)),
            last_contact_at: Some(ago(contact)),
            device_revoked: false,
        },
        device: DeviceId::new(),
        device_name: "box".into(),
        task: None,
        handed_off: false,
        running: true,
        started_at: ago(Duration::from_secs(3600)),
        last_output_at: None,
        output_bytes: 7,
    }
}

/// A task's run, connected here, quiet for `quiet`.
fn task_run(quiet: Duration) -> (Watched, LinkSeen) {
    let mut w = watched(Duration::ZERO);
    w.task = Some(TaskId::new());
    w.glance.task_run = true;
    (w, LinkSeen::Here(Some(quiet)))
}

#[derive(Default)]
struct FakeStore {
    /// The sessions as read now; a second read of a session takes `fresh` when set.
    live: Mutex<HashMap<SessionId, Watched>>,
    fresh: Mutex<HashMap<SessionId, Watched>>,
    progress: Mutex<HashMap<SessionId, String>>,
    waiting: Mutex<bool>,
    /// Flags written, in order.
    flags: Mutex<Vec<(SessionId, Option<StaleFlag>)>>,
    /// Sessions read closely.
    looked: Mutex<Vec<SessionId>>,
}

impl LivenessStore for FakeStore {
    async fn live_glances(&self) -> Result<Vec<LiveGlance>, StoreError> {
        Ok(self.live.lock().unwrap().values().map(|w| w.glance.clone()).collect())
    }

    async fn watched(&self, session: SessionId) -> Result<Option<Watched>, StoreError> {
        let first = !self.looked.lock().unwrap().contains(&session);
        self.looked.lock().unwrap().push(session);
        let fresh = if first { None } else { self.fresh.lock().unwrap().get(&session).cloned() };
        Ok(fresh.or_else(|| self.live.lock().unwrap().get(&session).cloned()))
    }

    async fn last_progress_at(&self, session: SessionId) -> Result<Option<String>, StoreError> {
        Ok(self.progress.lock().unwrap().get(&session).cloned())
    }

    async fn last_note_closed_at(&self, _task: TaskId) -> Result<Option<String>, StoreError> {
        Ok(None)
    }

    async fn waiting_on_person(&self, _task: TaskId) -> Result<bool, StoreError> {
        Ok(*self.waiting.lock().unwrap())
    }

    async fn set_stale_flag(&self, session: SessionId, flag: Option<StaleFlag>) -> Result<bool, StoreError> {
        self.flags.lock().unwrap().push((session, flag));
        if let Some(w) = self.live.lock().unwrap().get_mut(&session) {
            w.glance.stale_flag = flag;
        }
        Ok(true)
    }
}

#[derive(Default)]
struct FakeRuns {
    links: Mutex<HashMap<DeviceId, LinkSeen>>,
    ended: Mutex<Vec<(SessionId, RunEnd)>>,
}

impl LiveRuns for FakeRuns {
    fn link(&self, device: DeviceId, _session: SessionId) -> LinkSeen {
        self.links.lock().unwrap().get(&device).copied().unwrap_or(LinkSeen::Away)
    }

    async fn end_lost(&self, run: &Watched, end: RunEnd) -> Result<(), StoreError> {
        self.ended.lock().unwrap().push((run.glance.session, end));
        Ok(())
    }
}

struct World {
    store: FakeStore,
    runs: FakeRuns,
    rules: LivenessRules,
}

impl World {
    fn new(sessions: &[(Watched, LinkSeen)]) -> World {
        let world = World { store: FakeStore::default(), runs: FakeRuns::default(), rules: LivenessRules::default() };
        for (w, link) in sessions {
            world.store.live.lock().unwrap().insert(w.glance.session, w.clone());
            world.runs.links.lock().unwrap().insert(w.device, *link);
        }
        world
    }

    async fn check(&self) {
        let monitor = Monitor { store: &self.store, runs: &self.runs, rules: &self.rules, stall_after: STALL };
        monitor.check().await.unwrap();
    }

    fn flags(&self) -> Vec<(SessionId, Option<StaleFlag>)> {
        self.store.flags.lock().unwrap().clone()
    }

    fn ended(&self) -> Vec<(SessionId, RunEnd)> {
        self.runs.ended.lock().unwrap().clone()
    }
}

#[tokio::test]
async fn a_session_with_nothing_to_flag_gets_no_closer_look() {
    let fine = watched(Duration::from_secs(10));
    let world = World::new(&[(fine, LinkSeen::Here(None))]);
    world.check().await;
    assert!(world.store.looked.lock().unwrap().is_empty(), "a glance was enough");
    assert!(world.flags().is_empty());
}

#[tokio::test]
async fn a_silent_device_is_flagged_then_its_run_lost_at_the_next_check() {
    let w = watched(SILENT + Duration::from_secs(1));
    let id = w.glance.session;
    let world = World::new(&[(w, LinkSeen::Away)]);
    world.check().await;
    assert_eq!(world.flags(), vec![(id, Some(StaleFlag::DeviceSilent))]);
    assert!(world.ended().is_empty(), "flagged first, not lost");
    world.check().await;
    let reason = StaleFlag::DeviceSilent.lost_reason().to_string();
    assert_eq!(world.ended(), vec![(id, RunEnd::DeviceLost { reason })]);
}

#[tokio::test]
async fn a_run_past_its_finished_sandbox_ends_as_outliving_it() {
    let mut w = watched(Duration::ZERO);
    w.glance.stale_flag = Some(StaleFlag::SandboxRetired);
    w.glance.sandbox_finished = true;
    w.glance.sandbox_changed_at = ago(Duration::from_secs(3600));
    let id = w.glance.session;
    let world = World::new(&[(w, LinkSeen::Here(None))]);
    world.check().await;
    let reason = StaleFlag::SandboxRetired.lost_reason().to_string();
    assert_eq!(world.ended(), vec![(id, RunEnd::OutlivedSandbox { reason })]);
}

#[tokio::test]
async fn a_device_heard_from_again_clears_its_flag() {
    let mut w = watched(Duration::from_secs(5));
    w.glance.stale_flag = Some(StaleFlag::DeviceSilent);
    let id = w.glance.session;
    let world = World::new(&[(w, LinkSeen::Here(None))]);
    world.check().await;
    assert_eq!(world.flags(), vec![(id, None)]);
    assert!(world.ended().is_empty());
}

#[tokio::test]
async fn a_run_is_not_lost_when_a_fresh_read_shows_its_device_back() {
    let mut w = watched(SILENT * 2);
    w.glance.stale_flag = Some(StaleFlag::DeviceSilent);
    let id = w.glance.session;
    let mut back = w.clone();
    back.glance.last_contact_at = Some(ago(Duration::ZERO));
    let world = World::new(&[(w, LinkSeen::Away)]);
    world.store.fresh.lock().unwrap().insert(id, back);
    world.check().await;
    assert!(world.ended().is_empty(), "decided again on the fresh read");
}

#[tokio::test]
async fn a_quiet_task_run_without_progress_is_replaced() {
    let (w, link) = task_run(STALL + Duration::from_secs(1));
    let id = w.glance.session;
    let world = World::new(&[(w, link)]);
    world.check().await;
    assert_eq!(world.ended(), vec![(id, RunEnd::Lost { reason: stalled_reason(STALL) })]);
}

#[tokio::test]
async fn a_task_run_that_is_quiet_but_not_stalled_stays() {
    // Quiet, but with recent progress; quiet, but waiting on a person; quiet on a device
    // that is away (its output is not seen); not quiet long enough.
    let (with_progress, l1) = task_run(STALL * 2);
    let (away, _) = task_run(STALL * 2);
    let (recent, l3) = task_run(STALL / 2);
    let world = World::new(&[(with_progress.clone(), l1), (away, LinkSeen::Away), (recent, l3)]);
    world.store.progress.lock().unwrap().insert(with_progress.glance.session, ago(Duration::from_secs(60)));
    world.check().await;
    assert!(world.ended().is_empty());

    let (waiting, l4) = task_run(STALL * 2);
    let world = World::new(&[(waiting, l4)]);
    *world.store.waiting.lock().unwrap() = true;
    world.check().await;
    assert!(world.ended().is_empty(), "a run waiting on a person has not stalled");
}

#[tokio::test]
async fn a_task_run_on_another_replica_is_judged_by_its_stored_output_time() {
    let (mut w, _) = task_run(Duration::ZERO);
    w.last_output_at = Some(ago(STALL * 2));
    let id = w.glance.session;
    let world = World::new(&[(w, LinkSeen::Elsewhere)]);
    world.check().await;
    assert_eq!(world.ended().len(), 1);
    assert_eq!(world.ended()[0].0, id);
}

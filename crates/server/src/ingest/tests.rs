//! Ingest's logic against an in-memory store that decides ends as the real one does.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;

use drover_core::outcome::{decide_end, EndEvidence, ExitStatus};
use drover_core::{Outcome, SandboxId, SandboxState, WorkspaceId};
use drover_store::RunTimes;

use super::*;

/// An end as the fake stored it: the session, its times, its output length, its reporter.
type StoredEnd = (SessionId, String, Option<String>, u64, String);

/// The store, in memory: sessions by id, and what ingest wrote.
#[derive(Default)]
struct Fake {
    sessions: Mutex<HashMap<SessionId, SessionRow>>,
    ends: Mutex<Vec<StoredEnd>>,
    marks: Mutex<Vec<(SessionId, Mark)>>,
    sizes: Mutex<Vec<(SessionId, u16, u16)>>,
    /// Adding a mark fails (a resize's size is recorded even so).
    marks_fail: bool,
}

impl IngestStore for Fake {
    async fn session(&self, id: SessionId) -> Result<Option<SessionRow>, StoreError> {
        Ok(self.sessions.lock().unwrap().get(&id).cloned())
    }

    async fn end_session(
        &self,
        id: SessionId,
        end: &RunEnd,
        times: RunTimes<'_>,
        final_offset: u64,
        reporter: &str,
    ) -> Result<Option<Ending>, StoreError> {
        let mut sessions = self.sessions.lock().unwrap();
        let Some(row) = sessions.get_mut(&id) else { return Ok(None) };
        let evidence = EndEvidence {
            outcome: row.outcome,
            handed_off: row.handed_off.as_deref(),
            stop_requested_by: row.stop_requested_by.as_deref(),
            stop_reason: row.stop_reason.as_deref(),
            reporter,
        };
        let Ok(decided) = decide_end(&evidence, end) else { return Ok(None) };
        row.outcome = decided.ending.outcome;
        let stored = (id, times.ended_at.to_string(), times.started_at.map(str::to_string), final_offset, decided.actor);
        self.ends.lock().unwrap().push(stored);
        Ok(Some(decided.ending))
    }

    async fn add_mark(&self, id: SessionId, mark: &Mark) -> Result<(), StoreError> {
        if self.marks_fail {
            return Err(StoreError::Corrupt("the disk is full".into()));
        }
        self.marks.lock().unwrap().push((id, mark.clone()));
        Ok(())
    }

    async fn set_size(&self, id: SessionId, cols: u16, rows: u16) -> Result<(), StoreError> {
        self.sizes.lock().unwrap().push((id, cols, rows));
        Ok(())
    }
}

/// A running session on `device`.
fn running_on(device: DeviceId) -> SessionRow {
    SessionRow {
        id: SessionId::new(),
        workspace: WorkspaceId::new(),
        sandbox: SandboxId::new(),
        sandbox_state: SandboxState::Active,
        title: "t".into(),
        device,
        device_name: "box".into(),
        command: vec!["sh".into()],
        cwd: "/".into(),
        cols: 80,
        rows: 24,
        outcome: Outcome::Running,
        exit_code: None,
        reason: None,
        created_by: "alice".into(),
        created_at: drover_store::now(),
        started_at: None,
        ended_at: None,
        output_bytes: 0,
        final_offset: None,
        stop_requested_by: None,
        task: None,
        stage: None,
        agent: None,
        agent_name: None,
        repo_name: None,
        operator: None,
        handed_off: None,
        stale_flag: None,
        pruned_at: None,
        usage: None,
        stop_reason: None,
        skills: None,
        last_output_at: None,
    }
}

/// A store holding `row`.
fn holding(row: &SessionRow) -> Fake {
    let fake = Fake::default();
    fake.sessions.lock().unwrap().insert(row.id, row.clone());
    fake
}

/// "Exited with code 0", reported with these times and 42 bytes of output.
fn exited(started_at: Option<&str>, ended_at: &str) -> EndReport {
    EndReport {
        end: RunEnd::Exited { status: ExitStatus::code(0), stop_requested: false },
        started_at: started_at.map(str::to_string),
        ended_at: ended_at.into(),
        final_offset: 42,
    }
}

#[tokio::test]
async fn an_end_its_device_reports_is_stored_by_that_device_with_times_in_the_stored_format() {
    let device = DeviceId::new();
    let row = running_on(device);
    let store = holding(&row);
    let report = exited(Some("2026-01-02T03:00:00+01:00"), "2026-01-02T03:04:05.5+01:00");
    let (read, ending) = store_end(&store, device, "box", row.id, &report).await.unwrap().unwrap();
    assert_eq!((read.id, ending.outcome), (row.id, Outcome::Incomplete));
    let stored = store.ends.lock().unwrap().clone();
    let expected =
        (row.id, "2026-01-02T02:04:05.500000Z".to_string(), Some("2026-01-02T02:00:00.000000Z".to_string()), 42, "device box".to_string());
    assert_eq!(stored, vec![expected]);
}

#[tokio::test]
async fn times_that_do_not_parse_are_dropped_or_replaced_by_now() {
    let device = DeviceId::new();
    let row = running_on(device);
    let store = holding(&row);
    let before = drover_store::now();
    store_end(&store, device, "box", row.id, &exited(Some("yesterday"), "soon")).await.unwrap().unwrap();
    let (_, ended_at, started_at, _, _) = store.ends.lock().unwrap()[0].clone();
    assert_eq!(started_at, None);
    assert!(ended_at >= before && ended_at <= drover_store::now(), "{ended_at} is now");
}

#[tokio::test]
async fn another_devices_report_and_a_second_end_change_nothing() {
    let device = DeviceId::new();
    let row = running_on(device);
    let store = holding(&row);
    let report = exited(None, "2026-01-02T03:04:05Z");
    assert!(store_end(&store, DeviceId::new(), "other", row.id, &report).await.unwrap().is_none(), "not its device");
    assert!(store_end(&store, device, "box", SessionId::new(), &report).await.unwrap().is_none(), "no such session");
    assert!(store.ends.lock().unwrap().is_empty());
    assert!(store_end(&store, device, "box", row.id, &report).await.unwrap().is_some());
    assert!(store_end(&store, device, "box", row.id, &report).await.unwrap().is_none(), "ended already");
    assert_eq!(store.ends.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn a_person_who_stopped_the_run_is_the_ends_actor() {
    let device = DeviceId::new();
    let mut row = running_on(device);
    row.stop_requested_by = Some("alice".into());
    let store = holding(&row);
    let report = EndReport { end: RunEnd::Exited { status: ExitStatus::signal(15), stop_requested: true }, ..exited(None, "") };
    let (_, ending) = store_end(&store, device, "box", row.id, &report).await.unwrap().unwrap();
    assert_eq!(ending.outcome, Outcome::Released);
    assert_eq!(store.ends.lock().unwrap()[0].4, "alice");
}

#[tokio::test]
async fn a_resize_is_marked_and_its_size_recorded_even_when_the_mark_fails() {
    let id = SessionId::new();
    let store = Fake::default();
    record_resize(&store, id, 1_500, 120, 40).await;
    let marks: Vec<_> = store.marks.lock().unwrap().iter().map(|(s, m)| (*s, m.t_micros, m.kind.clone(), m.data.clone())).collect();
    assert_eq!(marks, vec![(id, 1_500, "r".to_string(), "120x40".to_string())]);
    assert_eq!(*store.sizes.lock().unwrap(), vec![(id, 120, 40)]);
    let failing = Fake { marks_fail: true, ..Fake::default() };
    record_resize(&failing, id, 2_000, 100, 30).await;
    assert_eq!(*failing.sizes.lock().unwrap(), vec![(id, 100, 30)]);
}

#[tokio::test]
async fn an_end_is_tried_again_until_stored_and_given_up_after_its_attempts() {
    let tries = AtomicU32::new(0);
    let twice_then_stored = retried(SessionId::new(), Duration::ZERO, || {
        let n = tries.fetch_add(1, Ordering::SeqCst);
        async move {
            if n < 2 {
                Err(StoreError::Corrupt("locked".into()))
            } else {
                Ok(())
            }
        }
    })
    .await;
    assert!(twice_then_stored);
    assert_eq!(tries.load(Ordering::SeqCst), 3, "stops trying once stored");
    let tries = AtomicU32::new(0);
    let never = retried(SessionId::new(), Duration::ZERO, || {
        tries.fetch_add(1, Ordering::SeqCst);
        async { Err(StoreError::Corrupt("locked".into())) }
    })
    .await;
    assert!(!never);
    assert_eq!(tries.load(Ordering::SeqCst), END_ATTEMPTS);
}

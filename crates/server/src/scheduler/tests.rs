//! The scheduler's choices against an in-memory queue and fleet.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::Duration;

use drover_core::{DeviceId, TaskId, WorkspaceId};
use drover_store::{DeviceRow, StoreError};

use super::*;

#[derive(Debug, Clone)]
struct Task {
    id: TaskId,
    workspace: WorkspaceId,
    queued_at: String,
}

impl QueuedTask for Task {
    fn id(&self) -> TaskId {
        self.id
    }

    fn workspace(&self) -> WorkspaceId {
        self.workspace
    }

    fn queued_at(&self) -> &str {
        &self.queued_at
    }
}

fn device(name: &str, slots: u32, live: u32) -> DeviceRow {
    DeviceRow { id: DeviceId::new(), name: name.into(), slots, last_contact_at: None, live_sessions: live, revoked_at: None, sandbox: None }
}

/// A queue and fleet in memory; staffing puts a task on the first connected device its
/// round shows with a slot free.
#[derive(Default)]
struct Fleet {
    queue: Vec<Task>,
    devices: HashMap<WorkspaceId, Vec<DeviceRow>>,
    connected: HashSet<DeviceId>,
    /// Tasks staffed (or tried), in order, with the device.
    staffed: Mutex<Vec<(TaskId, Option<DeviceId>)>>,
    listed: Mutex<Vec<WorkspaceId>>,
}

impl Fleet {
    fn queue(&mut self, workspace: WorkspaceId, n: usize) -> Vec<TaskId> {
        (0..n)
            .map(|_| {
                let id = TaskId::new();
                let queued_at = format!("{:06}", self.queue.len());
                self.queue.push(Task { id, workspace, queued_at });
                id
            })
            .collect()
    }

    fn staffed(&self) -> Vec<(TaskId, Option<DeviceId>)> {
        self.staffed.lock().unwrap().clone()
    }
}

impl Staffing for Fleet {
    type Task = Task;

    async fn queued_tasks(&self, after: Option<(&str, TaskId)>, limit: i64) -> Result<Vec<Task>, StoreError> {
        let from = after.map(|(at, _)| at.to_string());
        Ok(self.queue.iter().filter(|t| from.as_ref().is_none_or(|f| t.queued_at > *f)).take(limit as usize).cloned().collect())
    }

    async fn list_devices(&self, workspace: WorkspaceId) -> Result<Vec<DeviceRow>, StoreError> {
        self.listed.lock().unwrap().push(workspace);
        Ok(self.devices.get(&workspace).cloned().unwrap_or_default())
    }

    fn is_connected(&self, device: DeviceId) -> bool {
        self.connected.contains(&device)
    }

    async fn staff(&self, task: &Task, devices: &[DeviceRow]) -> Result<Option<DeviceId>, StoreError> {
        let d = devices.iter().find(|d| self.connected.contains(&d.id) && d.live_sessions < d.slots).map(|d| d.id);
        self.staffed.lock().unwrap().push((task.id, d));
        Ok(d)
    }
}

#[tokio::test]
async fn a_device_filled_this_round_takes_no_more() {
    let ws = WorkspaceId::new();
    let mut fleet = Fleet::default();
    let one = device("one", 2, 1);
    fleet.connected.insert(one.id);
    let dev = one.id;
    fleet.devices.insert(ws, vec![one]);
    let tasks = fleet.queue(ws, 3);
    round_with(&fleet).await.unwrap();
    assert_eq!(fleet.staffed(), vec![(tasks[0], Some(dev))], "its last slot went to the first queued; the rest were not tried");
}

#[tokio::test]
async fn a_workspace_without_a_free_connected_slot_is_skipped_and_read_once() {
    let (away_ws, busy_ws, open_ws) = (WorkspaceId::new(), WorkspaceId::new(), WorkspaceId::new());
    let mut fleet = Fleet::default();
    fleet.devices.insert(away_ws, vec![device("away", 4, 0)]);
    let busy = device("busy", 1, 1);
    fleet.connected.insert(busy.id);
    fleet.devices.insert(busy_ws, vec![busy]);
    let open = device("open", 4, 0);
    fleet.connected.insert(open.id);
    let open_id = open.id;
    fleet.devices.insert(open_ws, vec![open]);
    fleet.queue(away_ws, 2);
    fleet.queue(busy_ws, 2);
    let mine = fleet.queue(open_ws, 1);
    round_with(&fleet).await.unwrap();
    assert_eq!(fleet.staffed(), vec![(mine[0], Some(open_id))]);
    assert_eq!(fleet.listed.lock().unwrap().len(), 3, "each workspace's devices read once a round");
}

#[tokio::test]
async fn a_round_walks_every_batch_of_the_queue_in_order() {
    let ws = WorkspaceId::new();
    let mut fleet = Fleet::default();
    let big = device("big", 1000, 0);
    fleet.connected.insert(big.id);
    fleet.devices.insert(ws, vec![big]);
    let tasks = fleet.queue(ws, 2 * BATCH as usize + 50);
    round_with(&fleet).await.unwrap();
    let staffed: Vec<TaskId> = fleet.staffed().into_iter().map(|(t, _)| t).collect();
    assert_eq!(staffed, tasks);
}

#[test]
fn a_free_slot_needs_a_connected_device() {
    let (full, away, open) = (device("full", 1, 1), device("away", 2, 0), device("open", 2, 1));
    let connected: HashSet<DeviceId> = [full.id, open.id].into();
    assert!(!has_free_slot(&[full.clone(), away.clone()], |d| connected.contains(&d)));
    assert!(has_free_slot(&[full, away, open], |d| connected.contains(&d)));
}

#[test]
fn a_task_with_a_sandbox_goes_only_to_its_device() {
    let (a, b) = (device("a", 2, 0), device("b", 4, 0));
    let paths: HashMap<DeviceId, String> = [(a.id, "/src".to_string()), (b.id, "/src".to_string())].into();
    let all = [a.clone(), b.clone()];
    let anywhere = candidates(None, &all, &paths, |_| true, |_| false);
    assert_eq!(pick(&anywhere), Some(b.id), "the most free slots");
    let pinned = candidates(Some(a.id), &all, &paths, |_| true, |_| false);
    assert_eq!(pinned.iter().map(|c| c.id).collect::<Vec<_>>(), vec![a.id]);
    assert_eq!(pick(&pinned), Some(a.id));
}

#[test]
fn candidates_carry_the_repository_link_and_silence() {
    let (a, b) = (device("a", 2, 0), device("b", 4, 0));
    let paths: HashMap<DeviceId, String> = [(a.id, "/src".to_string())].into();
    let list = candidates(None, &[a.clone(), b.clone()], &paths, |d| d == a.id, |d| d.name == "b");
    assert_eq!(
        list.iter().map(|c| (c.has_repo, c.connected, c.silent)).collect::<Vec<_>>(),
        vec![(true, true, false), (false, false, true)]
    );
    assert_eq!(pick(&list), Some(a.id), "b has no clone, no link and no contact");
}

#[test]
fn a_device_silent_for_the_window_is_silent() {
    let window = Duration::from_secs(900);
    let now = chrono::Utc::now();
    let mut d = device("d", 1, 0);
    assert!(!is_silent(window, now, &d), "a device that never reported is tried");
    d.last_contact_at = Some(drover_store::format_time(now - chrono::Duration::seconds(899)));
    assert!(!is_silent(window, now, &d));
    d.last_contact_at = Some(drover_store::format_time(now - chrono::Duration::seconds(900)));
    assert!(is_silent(window, now, &d));
}

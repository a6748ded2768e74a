//! How many viewers a session has among replicas, and telling its device's shim how
//! many can type (it answers terminal queries itself only when none can). Each replica
//! stores its own (`replica_viewers`), and the replica the device is linked to tells it
//! the sum over live replicas: a read-only viewer on one replica must not make the shim
//! answer while someone types on another. (Alone, the hub's count is all there is:
//! [`crate::topology`].)
//!
//! Counts cross on the way (two replicas, two viewers leaving and joining), so each is
//! ordered: a replica's stored counts by the hub's reading number, what a device is
//! told by the ticket of the database read it came from. What could not be stored or
//! told, and any count that includes other replicas' viewers (one may die with them),
//! is looked at again every few seconds.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use drover_core::{DeviceId, SessionId};
use drover_protocol::device::ServerMessage;
use drover_store::ViewerCount;

use crate::hub::Hub;
use crate::AppState;

/// How often counts that need it are looked at again.
const RECOUNT_EVERY: Duration = Duration::from_secs(5);
/// A told count that needs no second look is forgotten after this long.
const FORGET_TOLD: Duration = Duration::from_secs(60);

/// What this replica stored and told of its sessions' viewers.
#[derive(Default)]
pub(crate) struct ViewerCounts {
    /// Per session whose device is linked here: what it was last told.
    told: Mutex<HashMap<SessionId, Told>>,
    /// Sessions whose viewers here could not be stored, with their device.
    unsaved: Mutex<HashMap<SessionId, DeviceId>>,
    /// Numbers database reads: one that started later saw at least as much.
    tickets: AtomicU64,
}

/// What a device was told of one session's viewers.
struct Told {
    device: DeviceId,
    /// The count of viewers who can type (None: not told; it is tried again).
    count: Option<u32>,
    /// The ticket of the read it came from: an older read is not told after it.
    ticket: u64,
    /// Other replicas' viewers were in it: it is read again now and then.
    others: bool,
    at: Instant,
}

impl Told {
    fn needs_recount(&self) -> bool {
        self.others || self.count.is_none()
    }
}

impl ViewerCounts {
    /// Counts told, and counts waiting to be stored (for `/metrics`).
    pub(crate) fn census(&self) -> (u64, u64) {
        (self.told.lock().expect("told lock").len() as u64, self.unsaved.lock().expect("unsaved lock").len() as u64)
    }
}

/// After a viewer joined or left `hub` here: stores this replica's count and has the
/// device told how many viewers can type.
pub(crate) async fn changed(state: &AppState, hub: &Hub, session: SessionId, device: DeviceId) {
    let (count, reading) = hub.viewers();
    match state.store.set_viewers(&state.replica, session, count, reading).await {
        Ok(()) => {
            state.viewers.unsaved.lock().expect("unsaved lock").remove(&session);
        }
        Err(e) => {
            tracing::warn!(%session, "recording this replica's viewers (tried again shortly): {e}");
            state.viewers.unsaved.lock().expect("unsaved lock").insert(session, device);
        }
    }
    nudge(state, session, device).await;
}

/// Has `session`'s device told its viewers anew: here if it is linked here, else by
/// the replica it is linked to.
async fn nudge(state: &AppState, session: SessionId, device: DeviceId) {
    if state.devices.is_local(device) {
        tell(state, device, &[session], false).await;
    } else {
        state.devices.relay_viewers(device, session).await;
    }
}

/// How long a replica's viewers count after it was last seen alive: longer than its
/// lease, so a late heartbeat under load does not drop them for a moment.
fn alive(state: &AppState) -> Duration {
    state.config.lease_ttl * 3
}

/// Viewers of `session` attached on every live replica.
pub(crate) async fn attached(state: &AppState, session: SessionId) -> Result<u32, drover_store::StoreError> {
    let seen = state.store.viewers(&[session], alive(state), &state.replica).await?;
    Ok(seen.get(&session).map_or(0, |v| v.total.attached))
}

/// Tells `device` (linked here) how many viewers of each of `sessions` can type, on
/// every replica. Never waits on the device: a count its queue has no room for is tried
/// again shortly.
pub(crate) async fn tell(state: &AppState, device: DeviceId, sessions: &[SessionId], changed_only: bool) {
    tell_via(state, device, sessions, changed_only, &|m| state.devices.post_local(device, m)).await;
}

/// [`tell`] through `send` (false: not sent), which a link about to open uses before
/// anything else can reach its device. With `changed_only`, a count the device was
/// told already is not sent again; a count older than one told since never is.
pub(crate) async fn tell_via(
    state: &AppState,
    device: DeviceId,
    sessions: &[SessionId],
    changed_only: bool,
    send: crate::topology::SendToDevice<'_>,
) {
    let ticket = state.viewers.tickets.fetch_add(1, Ordering::SeqCst);
    let counts = match state.store.viewers(sessions, alive(state), &state.replica).await {
        Ok(counts) => counts,
        Err(e) => {
            tracing::warn!(%device, "counting viewers on every replica (tried again shortly): {e}");
            let mut told = state.viewers.told.lock().expect("told lock");
            for &session in sessions {
                told.entry(session).or_insert(Told { device, count: None, ticket, others: true, at: Instant::now() }).others = true;
            }
            return;
        }
    };
    // Decided and sent under the lock, so a newer count is never overtaken.
    let mut told = state.viewers.told.lock().expect("told lock");
    for &session in sessions {
        let seen = counts.get(&session).copied().unwrap_or_default();
        let total = seen.total.interactive;
        let t = told.entry(session).or_insert(Told { device, count: None, ticket, others: false, at: Instant::now() });
        if t.ticket > ticket {
            continue;
        }
        let unchanged = t.count == Some(total);
        let sent = (changed_only && unchanged) || send(&ServerMessage::Viewers { session, interactive: total });
        *t = Told { device, count: sent.then_some(total), ticket, others: seen.elsewhere > 0, at: Instant::now() };
    }
}

/// Starts the second looks: counts that include other replicas' viewers, or that could
/// not be stored or told.
pub(crate) fn spawn(state: AppState) {
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(RECOUNT_EVERY).await;
            recount(&state).await;
        }
    });
}

async fn recount(state: &AppState) {
    let unsaved: Vec<(SessionId, DeviceId)> = state.viewers.unsaved.lock().expect("unsaved lock").drain().collect();
    for (session, device) in unsaved {
        match state.hubs.get(session) {
            Some(hub) => changed(state, &hub, session, device).await,
            None => {
                // The hub is gone, and its viewers with it.
                let none = ViewerCount::default();
                let reading = crate::hub::next_reading();
                if state.store.set_viewers(&state.replica, session, none, reading).await.is_err() {
                    state.viewers.unsaved.lock().expect("unsaved lock").insert(session, device);
                }
            }
        }
    }
    let mut by_device: HashMap<DeviceId, Vec<SessionId>> = HashMap::new();
    state.viewers.told.lock().expect("told lock").retain(|&session, t| {
        let keep = state.devices.is_local(t.device) && (t.needs_recount() || t.at.elapsed() < FORGET_TOLD);
        if keep && t.needs_recount() {
            by_device.entry(t.device).or_default().push(session);
        }
        keep
    });
    for (device, sessions) in by_device {
        tell(state, device, &sessions, true).await;
    }
}

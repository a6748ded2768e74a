//! Where this server stands: alone on its database (SQLite), or one of several replicas
//! sharing PostgreSQL. What differs between the two — where viewer counts and sign-in
//! attempts are kept, whether a device's link is recorded for the others, whether output
//! is followed from the database — is one implementation of [`Topology`] each
//! ([`alone::Alone`], [`replicas::Replicas`]), chosen once from the store at start, so
//! no other module asks which it is.

mod alone;
mod replicas;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use drover_core::{DeviceId, SessionId};
use drover_protocol::device::ServerMessage;
use drover_store::{Store, StoreError};

use crate::hub::Hub;
use crate::limits::Counted;
use crate::AppState;

/// A topology's answer, still to come.
pub(crate) type Pending<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// How a message to a device is handed to its link (false: not handed over).
pub(crate) type SendToDevice<'a> = &'a (dyn Fn(&ServerMessage) -> bool + Send + Sync);

/// Everything the server does differently alone and among replicas.
pub(crate) trait Topology: Send + Sync {
    /// Starts this topology's own background work.
    fn start(&self, state: &AppState);

    /// Viewers of `session` attached anywhere (not only to this server).
    fn attached<'a>(&'a self, state: &'a AppState, session: SessionId) -> Pending<'a, Result<u32, StoreError>>;

    /// A viewer joined or left `hub` here: the count is kept where it is kept, and the
    /// session's shim is told how many can type.
    fn viewers_changed<'a>(&'a self, state: &'a AppState, hub: &'a Hub, session: SessionId, device: DeviceId) -> Pending<'a, ()>;

    /// Tells `device` (linked here) through `send` how many viewers of each of
    /// `sessions` can type; with `changed_only`, a count told already is not sent again.
    fn tell_viewers<'a>(
        &'a self,
        state: &'a AppState,
        device: DeviceId,
        sessions: &'a [SessionId],
        changed_only: bool,
        send: SendToDevice<'a>,
    ) -> Pending<'a, ()>;

    /// Whether a shim just started may have viewers to hear of (a viewer may have come
    /// while its device was preparing the run), given its hub here.
    fn may_have_viewers(&self, hub: &Hub) -> bool;

    /// `device`'s link opened here.
    fn linked<'a>(&'a self, state: &'a AppState, device: DeviceId, name: &'a str) -> Pending<'a, ()>;

    /// `device`'s link here closed (and no newer one replaced it).
    fn unlinked<'a>(&'a self, state: &'a AppState, device: DeviceId, name: &'a str) -> Pending<'a, ()>;

    /// More output of `sessions` is stored (called after each commit; never waits).
    fn output_stored(&self, state: &AppState, sessions: Vec<SessionId>);

    /// A viewer here wants `session`'s output in `hub` (its device on `device`); also
    /// says it is still wanted.
    fn follow(&self, state: &AppState, hub: Arc<Hub>, session: SessionId, device: DeviceId);

    /// Sign-in attempts under `key` in the window, wherever they were made.
    fn attempts<'a>(&'a self, state: &'a AppState, key: &'a str) -> Pending<'a, Result<usize, StoreError>>;

    /// Counts a sign-in attempt under each of `keys` (`(key, limit)`), unless one is at
    /// its limit: then how long until it may try again.
    fn count_attempt<'a>(
        &'a self,
        state: &'a AppState,
        keys: &'a [(&'a str, usize)],
    ) -> Pending<'a, Result<Result<Counted, Duration>, StoreError>>;
}

/// The topology of a server on `store`: replicas on a shared database, else alone.
pub(crate) fn select(store: &Store) -> Arc<dyn Topology> {
    if store.is_shared() {
        Arc::new(replicas::Replicas)
    } else {
        Arc::new(alone::Alone::default())
    }
}

/// Tells `device` (linked here) how many viewers of each of `sessions` can type, on its
/// link's queue. Never waits on the device: a count its queue has no room for is tried
/// again (replicas) or told with the next change.
pub(crate) async fn tell_viewers(state: &AppState, device: DeviceId, sessions: &[SessionId], changed_only: bool) {
    let send = |m: &ServerMessage| state.devices.post_local(device, m);
    state.topology.tell_viewers(state, device, sessions, changed_only, &send).await;
}

/// The hub of a live session: this server's, or one following it from the replica its
/// device is linked to (None when it has neither: not live, or its device is away).
pub(crate) fn live_hub(state: &AppState, row: &drover_store::SessionRow) -> Option<Arc<Hub>> {
    if let Some(hub) = state.hubs.get(row.id) {
        state.topology.follow(state, hub.clone(), row.id, row.device);
        return Some(hub);
    }
    if !row.outcome.is_live() || state.devices.remote_replica(row.device).is_none() {
        return None;
    }
    let hub = state.hubs.get_or_create(row.id, row.output_bytes, (row.cols, row.rows));
    state.topology.follow(state, hub.clone(), row.id, row.device);
    Some(hub)
}

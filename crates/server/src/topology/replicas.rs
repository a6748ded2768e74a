//! One of several replicas on a shared PostgreSQL database: viewer counts and sign-in
//! attempts are kept in the database (so neither is multiplied by the number of
//! replicas), a device's link is recorded so the others can reach it through this one,
//! the replicas following a session are woken after each commit of its output, and a
//! session linked elsewhere is followed from the database ([`crate::cluster`]).

use std::sync::Arc;
use std::time::Duration;

use drover_core::{DeviceId, SessionId};
use drover_store::StoreError;

use super::{Pending, SendToDevice, Topology};
use crate::hub::Hub;
use crate::limits::Counted;
use crate::AppState;

/// This replica among the others.
pub(crate) struct Replicas;

impl Topology for Replicas {
    fn start(&self, state: &AppState) {
        let mailboxes = crate::cluster::Mailboxes { store: state.store.clone(), replica: state.replica.clone() };
        state.devices.relay_through(Arc::new(mailboxes));
        crate::cluster::spawn(state.clone());
        crate::viewers::spawn(state.clone());
    }

    fn attached<'a>(&'a self, state: &'a AppState, session: SessionId) -> Pending<'a, Result<u32, StoreError>> {
        Box::pin(crate::viewers::attached(state, session))
    }

    fn viewers_changed<'a>(&'a self, state: &'a AppState, hub: &'a Hub, session: SessionId, device: DeviceId) -> Pending<'a, ()> {
        Box::pin(crate::viewers::changed(state, hub, session, device))
    }

    fn tell_viewers<'a>(
        &'a self,
        state: &'a AppState,
        device: DeviceId,
        sessions: &'a [SessionId],
        changed_only: bool,
        send: SendToDevice<'a>,
    ) -> Pending<'a, ()> {
        Box::pin(crate::viewers::tell_via(state, device, sessions, changed_only, send))
    }

    /// Any shim may: its viewers can be on another replica.
    fn may_have_viewers(&self, _hub: &Hub) -> bool {
        true
    }

    fn linked<'a>(&'a self, state: &'a AppState, device: DeviceId, name: &'a str) -> Pending<'a, ()> {
        Box::pin(async move {
            // Other replicas reach this device through this one from now on.
            if let Err(e) = state.store.link_device(device, &state.replica).await {
                tracing::warn!(device = %name, "recording where this device is linked: {e}");
            }
        })
    }

    fn unlinked<'a>(&'a self, state: &'a AppState, device: DeviceId, name: &'a str) -> Pending<'a, ()> {
        Box::pin(async move {
            if let Err(e) = state.store.unlink_device(device, &state.replica).await {
                tracing::warn!(device = %name, "forgetting the link of a device that left: {e}");
            }
        })
    }

    fn output_stored(&self, state: &AppState, sessions: Vec<SessionId>) {
        crate::cluster::announce_output(state, sessions);
    }

    fn follow(&self, state: &AppState, hub: Arc<Hub>, session: SessionId, device: DeviceId) {
        crate::cluster::follow(state, hub, session, device);
    }

    fn attempts<'a>(&'a self, state: &'a AppState, key: &'a str) -> Pending<'a, Result<usize, StoreError>> {
        Box::pin(state.store.login_attempts(key, state.logins.window()))
    }

    fn count_attempt<'a>(
        &'a self,
        state: &'a AppState,
        keys: &'a [(&'a str, usize)],
    ) -> Pending<'a, Result<Result<Counted, Duration>, StoreError>> {
        Box::pin(async move { Ok(state.store.count_login_attempt(keys, state.logins.window()).await?.map(Counted::Shared)) })
    }
}

//! A server alone on its database: every viewer and every device link is here, so the
//! hubs hold the viewer counts and sign-in attempts are counted in memory (a restart
//! forgets them, which only ever lets someone in sooner).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use drover_core::{DeviceId, SessionId};
use drover_protocol::device::ServerMessage;
use drover_store::StoreError;

use super::{Pending, SendToDevice, Topology};
use crate::hub::Hub;
use crate::limits::Counted;
use crate::AppState;

/// The one server.
#[derive(Default)]
pub(crate) struct Alone {
    /// A count is read and sent under this, so two viewers' changes do not cross.
    telling: Mutex<()>,
}

impl Topology for Alone {
    fn start(&self, _state: &AppState) {}

    fn attached<'a>(&'a self, state: &'a AppState, session: SessionId) -> Pending<'a, Result<u32, StoreError>> {
        let here = state.hubs.get(session).map_or(0, |h| h.attached());
        Box::pin(async move { Ok(here) })
    }

    fn viewers_changed<'a>(&'a self, state: &'a AppState, hub: &'a Hub, session: SessionId, device: DeviceId) -> Pending<'a, ()> {
        Box::pin(async move {
            // A viewer leaving an ended session: its device no longer has it to tell.
            if hub.ended().is_none() {
                super::tell_viewers(state, device, &[session], false).await;
            }
        })
    }

    fn tell_viewers<'a>(
        &'a self,
        state: &'a AppState,
        _device: DeviceId,
        sessions: &'a [SessionId],
        _changed_only: bool,
        send: SendToDevice<'a>,
    ) -> Pending<'a, ()> {
        let _one = self.telling.lock().expect("telling lock");
        for &session in sessions {
            let interactive = state.hubs.get(session).map_or(0, |h| h.interactive());
            send(&ServerMessage::Viewers { session, interactive });
        }
        Box::pin(std::future::ready(()))
    }

    fn may_have_viewers(&self, hub: &Hub) -> bool {
        hub.interactive() > 0
    }

    fn linked<'a>(&'a self, _state: &'a AppState, _device: DeviceId, _name: &'a str) -> Pending<'a, ()> {
        Box::pin(std::future::ready(()))
    }

    fn unlinked<'a>(&'a self, _state: &'a AppState, _device: DeviceId, _name: &'a str) -> Pending<'a, ()> {
        Box::pin(std::future::ready(()))
    }

    fn output_stored(&self, _state: &AppState, _sessions: Vec<SessionId>) {}

    fn follow(&self, _state: &AppState, _hub: Arc<Hub>, _session: SessionId, _device: DeviceId) {}

    fn attempts<'a>(&'a self, state: &'a AppState, key: &'a str) -> Pending<'a, Result<usize, StoreError>> {
        let tried = state.logins.count(key, Instant::now());
        Box::pin(std::future::ready(Ok(tried)))
    }

    fn count_attempt<'a>(
        &'a self,
        state: &'a AppState,
        keys: &'a [(&'a str, usize)],
    ) -> Pending<'a, Result<Result<Counted, Duration>, StoreError>> {
        let counted = state.logins.attempt(keys, Instant::now()).map(Counted::Here);
        Box::pin(std::future::ready(Ok(counted)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn state() -> (AppState, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let store = drover_store::Store::open_sqlite(&dir.path().join("drover.db")).await.unwrap();
        let config = crate::ServerConfig { login_attempts: 2, ..crate::ServerConfig::default() };
        (AppState::new(store, drover_core::WorkspaceId::new(), config), dir)
    }

    #[tokio::test]
    async fn viewers_come_from_the_hub_and_the_shim_hears_only_of_those_who_can_type() {
        let (state, _dir) = state().await;
        let (session, device) = (SessionId::new(), DeviceId::new());
        let hub = state.hubs.get_or_create(session, 0, (80, 24));
        assert_eq!(state.topology.attached(&state, session).await.unwrap(), 0);
        assert!(!state.topology.may_have_viewers(&hub));
        let _typist = hub.join(true);
        let _watcher = hub.join(false);
        assert_eq!(state.topology.attached(&state, session).await.unwrap(), 2);
        assert!(state.topology.may_have_viewers(&hub));
        let told = Mutex::new(Vec::new());
        let send = |m: &ServerMessage| {
            told.lock().unwrap().push(m.clone());
            true
        };
        let other = SessionId::new();
        state.topology.tell_viewers(&state, device, &[session, other], false, &send).await;
        let told = told.into_inner().unwrap();
        assert!(matches!(told[0], ServerMessage::Viewers { session: s, interactive: 1 } if s == session), "{told:?}");
        assert!(matches!(told[1], ServerMessage::Viewers { session: s, interactive: 0 } if s == other), "{told:?}");
        assert_eq!(told.len(), 2);
    }

    #[tokio::test]
    async fn sign_in_attempts_are_counted_in_memory_up_to_the_limit() {
        let (state, _dir) = state().await;
        let keys = [("ip:127.0.0.1", 2)];
        assert!(state.topology.count_attempt(&state, &keys).await.unwrap().is_ok());
        assert_eq!(state.topology.attempts(&state, "ip:127.0.0.1").await.unwrap(), 1);
        let second = state.topology.count_attempt(&state, &keys).await.unwrap();
        assert!(matches!(second, Ok(Counted::Here(_))));
        let third = state.topology.count_attempt(&state, &keys).await.unwrap();
        assert!(third.is_err(), "a third attempt over a limit of two is refused");
        assert_eq!(state.topology.attempts(&state, "ip:127.0.0.1").await.unwrap(), 2);
    }
}

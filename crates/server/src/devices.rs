//! Connected devices and the requests waiting on their answers. A device linked to
//! another replica (PostgreSQL) is reached through that replica's mailbox
//! (`crate::cluster`): every method here works for it too, except the `_local` ones.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use axum::extract::ws::Message;
use drover_core::{DeviceId, SessionId};
use drover_protocol::device::{DeviceBinary, MergeResult, ServerMessage, Worktree};
use drover_protocol::shim::Snapshot;
use tokio::sync::{mpsc, oneshot};

/// The answer to audited input.
#[derive(Debug, Clone)]
pub enum Delivery {
    /// Written to the terminal.
    Delivered {
        /// Sent as a bracketed paste.
        bracketed_paste: bool,
        /// Output offset at that moment.
        offset: u64,
        /// µs since the session started.
        t_micros: u64,
    },
    /// Not written, and why.
    Failed(String),
}

struct Conn {
    epoch: u64,
    tx: mpsc::Sender<Message>,
}

/// Requests waiting on a device's answer, by request id.
struct Pending<T>(Mutex<HashMap<u64, (DeviceId, oneshot::Sender<T>)>>);

impl<T> Default for Pending<T> {
    fn default() -> Self {
        Pending(Mutex::new(HashMap::new()))
    }
}

impl<T> Pending<T> {
    fn wait(&self, req: u64, device: DeviceId) -> oneshot::Receiver<T> {
        let (tx, rx) = oneshot::channel();
        self.0.lock().expect("pending").insert(req, (device, tx));
        rx
    }

    fn forget(&self, req: u64) {
        self.0.lock().expect("pending").remove(&req);
    }

    /// Hands `answer` to whoever waits on `req`, if `from` is the device it was sent
    /// to: a device cannot answer another device's requests.
    fn resolve(&self, req: u64, from: DeviceId, answer: T) {
        let mut pending = self.0.lock().expect("pending");
        if pending.get(&req).is_some_and(|(device, _)| *device == from) {
            if let Some((_, tx)) = pending.remove(&req) {
                let _ = tx.send(answer);
            }
        }
    }

    /// Gives up on `req`: whoever waits on it hears "disconnected".
    fn fail(&self, req: u64, from: DeviceId) {
        let mut pending = self.0.lock().expect("pending");
        if pending.get(&req).is_some_and(|(device, _)| *device == from) {
            pending.remove(&req);
        }
    }

    /// Drops everything waiting on `device`: its answers will never come.
    fn drop_device(&self, device: DeviceId) {
        self.0.lock().expect("pending").retain(|_, (d, _)| *d != device);
    }
}

/// Why a request to a device has no answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoAnswer {
    /// The device is not connected: nothing was sent.
    NotConnected,
    /// The device disconnected before answering.
    Disconnected,
    /// The device did not answer in time.
    Timeout,
}

/// Where mail for other replicas goes: the store, and this replica's name.
struct Relay {
    store: drover_store::Store,
    replica: String,
}

/// The registry of connected devices.
#[derive(Default)]
pub struct Devices {
    conns: Mutex<HashMap<DeviceId, Conn>>,
    /// Devices linked to other replicas, with the replica.
    remote: Mutex<HashMap<DeviceId, String>>,
    relay: std::sync::OnceLock<Relay>,
    next: AtomicU64,
    deliveries: Pending<Delivery>,
    /// Messages relayed to another replica, waiting on word that they reached the link.
    sends: Pending<bool>,
    snapshots: Pending<Snapshot>,
    merges: Pending<MergeResult>,
    repo_checks: Pending<Option<String>>,
}

/// How long a message relayed to another replica may take to reach the device's link.
const RELAYED_SEND_TIMEOUT: Duration = Duration::from_secs(10);
/// A relayed request's answer is waited for this much longer than the device is: the
/// link's replica gives the device the whole timeout, and the answer comes back
/// through the database.
const RELAY_MARGIN: Duration = Duration::from_secs(2);

/// A device is not connected.
#[derive(Debug, Clone, Copy)]
pub struct NotConnected;

impl Devices {
    /// Registers a connection, replacing (and so closing) an older one; returns its epoch.
    pub fn connect(&self, id: DeviceId, tx: mpsc::Sender<Message>) -> u64 {
        let epoch = self.next.fetch_add(1, Ordering::Relaxed);
        self.conns.lock().expect("conns").insert(id, Conn { epoch, tx });
        epoch
    }

    /// Removes the connection if it is still the one registered at `epoch`; true if it
    /// was.
    pub fn disconnect(&self, id: DeviceId, epoch: u64) -> bool {
        let mut conns = self.conns.lock().expect("conns");
        let current = conns.get(&id).is_some_and(|c| c.epoch == epoch);
        if current {
            conns.remove(&id);
            // Pending answers from this device will never come: fail them now.
            self.deliveries.drop_device(id);
            self.snapshots.drop_device(id);
            self.merges.drop_device(id);
            self.repo_checks.drop_device(id);
        }
        current
    }

    /// Drops the device's link here (its credential was revoked): its messages stop,
    /// and its reconnection is refused.
    pub fn kick_local(&self, id: DeviceId) {
        self.conns.lock().expect("conns").remove(&id);
        self.deliveries.drop_device(id);
        self.snapshots.drop_device(id);
        self.merges.drop_device(id);
        self.repo_checks.drop_device(id);
    }

    /// Reaches devices linked to other replicas through the mailboxes in `store`.
    pub(crate) fn relay_through(&self, store: drover_store::Store, replica: String) {
        let _ = self.relay.set(Relay { store, replica });
    }

    /// Replaces what is known of devices linked to other replicas.
    pub(crate) fn set_remote(&self, links: HashMap<DeviceId, String>) {
        *self.remote.lock().expect("remote") = links;
    }

    /// The replica `id`'s link is on, when it is another one.
    pub(crate) fn remote_replica(&self, id: DeviceId) -> Option<String> {
        if self.is_local(id) {
            return None;
        }
        self.relay.get()?;
        self.remote.lock().expect("remote").get(&id).cloned()
    }

    /// Whether the device's link is on this server.
    pub fn is_local(&self, id: DeviceId) -> bool {
        self.conns.lock().expect("conns").contains_key(&id)
    }

    /// Whether the device is connected now (to this server or another replica).
    pub fn is_connected(&self, id: DeviceId) -> bool {
        self.is_local(id) || self.remote_replica(id).is_some()
    }

    fn sender(&self, id: DeviceId) -> Result<mpsc::Sender<Message>, NotConnected> {
        self.conns.lock().expect("conns").get(&id).map(|c| c.tx.clone()).ok_or(NotConnected)
    }

    /// Posts `m` to the replica `id` is linked to.
    async fn relay(&self, id: DeviceId, m: impl FnOnce(String) -> crate::cluster::Relayed) -> Result<(), NotConnected> {
        let (Some(relay), Some(replica)) = (self.relay.get(), self.remote_replica(id)) else { return Err(NotConnected) };
        if crate::cluster::post(&relay.store, &replica, &m(relay.replica.clone())).await {
            Ok(())
        } else {
            Err(NotConnected)
        }
    }

    /// Sends a JSON message to the device, in order with everything else sent to it.
    /// Through another replica, Ok means that replica handed it to the device's link.
    pub async fn send(&self, id: DeviceId, msg: &ServerMessage) -> Result<(), NotConnected> {
        match self.send_local(id, msg).await {
            Err(NotConnected) if self.remote_replica(id).is_some() => {
                let relayed = |from, req| crate::cluster::Relayed::Send { device: id, msg: msg.clone(), from, req };
                let local: Option<fn(u64) -> ServerMessage> = None;
                match self.request_via(&self.sends, id, local, relayed, RELAYED_SEND_TIMEOUT).await {
                    Ok(true) => Ok(()),
                    _ => Err(NotConnected),
                }
            }
            sent => sent,
        }
    }

    /// [`Devices::send`] to a device linked to this server.
    pub async fn send_local(&self, id: DeviceId, msg: &ServerMessage) -> Result<(), NotConnected> {
        let text = serde_json::to_string(msg).expect("server messages serialise");
        self.sender(id)?.send(Message::Text(text.into())).await.map_err(|_| NotConnected)
    }

    /// Sends `msg` to the device's link on this server if its queue has room, without
    /// waiting: for acknowledgements, each of which a later one (or the next link's
    /// welcome) supersedes, so the output writer never waits on one slow device. A
    /// device not linked here is skipped. False if it was not sent.
    pub fn post_local(&self, id: DeviceId, msg: &ServerMessage) -> bool {
        let Ok(tx) = self.sender(id) else { return false };
        let text = serde_json::to_string(msg).expect("server messages serialise");
        tx.try_send(Message::Text(text.into())).is_ok()
    }

    /// Sends keystrokes to a session on the device.
    pub async fn send_input(&self, id: DeviceId, session: SessionId, data: Vec<u8>) -> Result<(), NotConnected> {
        if !self.is_local(id) {
            let data = crate::cluster::input_body(&data);
            return self.relay(id, |_| crate::cluster::Relayed::Input { device: id, session, data }).await;
        }
        self.send_input_local(id, session, data).await
    }

    /// [`Devices::send_input`] to a device linked to this server.
    pub async fn send_input_local(&self, id: DeviceId, session: SessionId, data: Vec<u8>) -> Result<(), NotConnected> {
        let frame = DeviceBinary::Input { session, data }.encode();
        self.sender(id)?.send(Message::Binary(frame.into())).await.map_err(|_| NotConnected)
    }

    /// Drops the device's link wherever it is (its credential was revoked).
    pub async fn kick(&self, id: DeviceId) {
        if !self.is_local(id) {
            let _ = self.relay(id, |_| crate::cluster::Relayed::Kick { device: id }).await;
        }
        self.kick_local(id);
    }

    /// Hands a relayed answer to whoever waits on `req`.
    pub(crate) fn answered(&self, req: u64, from: DeviceId, answer: crate::cluster::Answer) {
        use crate::cluster::Answer;
        match answer {
            a @ Answer::Delivery { .. } => match crate::cluster::delivery_from(a) {
                Some(d) => self.deliveries.resolve(req, from, d),
                None => self.deliveries.fail(req, from),
            },
            a @ Answer::Snapshot { .. } => match crate::cluster::snapshot_from(a, req) {
                Some(s) => self.snapshots.resolve(req, from, s),
                None => self.snapshots.fail(req, from),
            },
            a @ Answer::Merge { .. } => match crate::cluster::merge_from(a) {
                Ok(r) => self.merges.resolve(req, from, r),
                Err(_) => self.merges.fail(req, from),
            },
            Answer::RepoCheck { problem } => self.repo_checks.resolve(req, from, problem),
            Answer::Sent { ok } => self.sends.resolve(req, from, ok),
            Answer::None => {
                self.sends.fail(req, from);
                self.deliveries.fail(req, from);
                self.snapshots.fail(req, from);
                self.merges.fail(req, from);
                self.repo_checks.fail(req, from);
            }
        }
    }

    fn req_id(&self) -> u64 {
        self.next.fetch_add(1, Ordering::Relaxed)
    }

    /// Sends `msg` (built with a fresh request id) and waits for its answer in `pending`;
    /// to a device linked to another replica, `relayed` (given this replica's name and
    /// the request id) goes to that replica's mailbox instead and the answer comes back
    /// by mail.
    async fn request<T>(
        &self,
        pending: &Pending<T>,
        id: DeviceId,
        msg: impl FnOnce(u64) -> ServerMessage,
        relayed: impl FnOnce(String, u64) -> crate::cluster::Relayed,
        timeout: Duration,
    ) -> Result<T, NoAnswer> {
        let local = self.is_local(id);
        self.request_via(pending, id, local.then_some(msg), relayed, timeout).await
    }

    /// [`Devices::request`], sent on the local link when `local` gives the message,
    /// else relayed.
    async fn request_via<T>(
        &self,
        pending: &Pending<T>,
        id: DeviceId,
        local: Option<impl FnOnce(u64) -> ServerMessage>,
        relayed: impl FnOnce(String, u64) -> crate::cluster::Relayed,
        timeout: Duration,
    ) -> Result<T, NoAnswer> {
        let req = self.req_id();
        let rx = pending.wait(req, id);
        let (sent, timeout) = match local {
            Some(msg) => (self.send_local(id, &msg(req)).await, timeout),
            None => (self.relay(id, |me| relayed(me, req)).await, timeout + RELAY_MARGIN),
        };
        if sent.is_err() {
            pending.forget(req);
            return Err(NoAnswer::NotConnected);
        }
        let answer = tokio::time::timeout(timeout, rx).await;
        pending.forget(req);
        match answer {
            Ok(Ok(a)) => Ok(a),
            Ok(Err(_)) => Err(NoAnswer::Disconnected),
            Err(_) => Err(NoAnswer::Timeout),
        }
    }

    /// Sends audited text and waits for the device's confirmation.
    pub async fn send_text(&self, id: DeviceId, session: SessionId, text: String, timeout: Duration) -> Result<Delivery, NoAnswer> {
        let timeout_ms = timeout.as_millis() as u64;
        let t = text.clone();
        self.request(
            &self.deliveries,
            id,
            |req| ServerMessage::SendText { session, req, text },
            |from, req| crate::cluster::Relayed::Text { device: id, session, text: t, timeout_ms, from, req },
            timeout,
        )
        .await
    }

    /// [`Devices::send_text`] to a device linked to this server.
    pub async fn send_text_local(&self, id: DeviceId, session: SessionId, text: String, timeout: Duration) -> Result<Delivery, NoAnswer> {
        if !self.is_local(id) {
            return Err(NoAnswer::NotConnected);
        }
        self.send_text(id, session, text, timeout).await
    }

    /// Resolves a pending delivery, answered by device `from`.
    pub fn delivered(&self, req: u64, from: DeviceId, d: Delivery) {
        self.deliveries.resolve(req, from, d);
    }

    /// Asks the device for a screen snapshot; None if it does not answer in time or
    /// disconnects first.
    pub async fn snapshot(&self, id: DeviceId, session: SessionId, timeout: Duration) -> Option<Snapshot> {
        let timeout_ms = timeout.as_millis() as u64;
        self.request(
            &self.snapshots,
            id,
            |req| ServerMessage::Snapshot { session, req },
            |from, req| crate::cluster::Relayed::Snapshot { device: id, session, timeout_ms, from, req },
            timeout,
        )
        .await
        .ok()
    }

    /// [`Devices::snapshot`] of a device linked to this server.
    pub async fn snapshot_local(&self, id: DeviceId, session: SessionId, timeout: Duration) -> Option<Snapshot> {
        if !self.is_local(id) {
            return None;
        }
        self.snapshot(id, session, timeout).await
    }

    /// Resolves a pending snapshot, answered by device `from`.
    pub fn snapshot_arrived(&self, from: DeviceId, snap: Snapshot) {
        self.snapshots.resolve(snap.req, from, snap);
    }

    /// Asks the device to merge a task's branch into its base branch and waits for
    /// the result.
    pub async fn merge(&self, id: DeviceId, worktree: Worktree, message: String, timeout: Duration) -> Result<MergeResult, NoAnswer> {
        let timeout_ms = timeout.as_millis() as u64;
        let (w, m) = (worktree.clone(), message.clone());
        self.request(
            &self.merges,
            id,
            |req| ServerMessage::Merge { req, worktree, message },
            |from, req| crate::cluster::Relayed::Merge { device: id, worktree: w, message: m, timeout_ms, from, req },
            timeout,
        )
        .await
    }

    /// [`Devices::merge`] on a device linked to this server.
    pub async fn merge_local(&self, id: DeviceId, worktree: Worktree, message: String, timeout: Duration) -> Result<MergeResult, NoAnswer> {
        if !self.is_local(id) {
            return Err(NoAnswer::NotConnected);
        }
        self.merge(id, worktree, message, timeout).await
    }

    /// Resolves a pending merge, answered by device `from`.
    pub fn merged(&self, req: u64, from: DeviceId, result: MergeResult) {
        self.merges.resolve(req, from, result);
    }

    /// Asks the device whether the clone at `path` is fit for tasks (exists, is a git
    /// repository, has branch `base`): Ok(None) when it is, Ok(Some(why)) when not.
    pub async fn check_repo(
        &self,
        id: DeviceId,
        path: String,
        base: Option<String>,
        timeout: Duration,
    ) -> Result<Option<String>, NoAnswer> {
        let timeout_ms = timeout.as_millis() as u64;
        let (p, b) = (path.clone(), base.clone());
        self.request(
            &self.repo_checks,
            id,
            |req| ServerMessage::CheckRepo { req, path, base },
            |from, req| crate::cluster::Relayed::CheckRepo { device: id, path: p, base: b, timeout_ms, from, req },
            timeout,
        )
        .await
    }

    /// [`Devices::check_repo`] on a device linked to this server.
    pub async fn check_repo_local(
        &self,
        id: DeviceId,
        path: String,
        base: Option<String>,
        timeout: Duration,
    ) -> Result<Option<String>, NoAnswer> {
        if !self.is_local(id) {
            return Err(NoAnswer::NotConnected);
        }
        self.check_repo(id, path, base, timeout).await
    }

    /// Resolves a pending clone check, answered by device `from`.
    pub fn repo_checked(&self, req: u64, from: DeviceId, problem: Option<String>) {
        self.repo_checks.resolve(req, from, problem);
    }
}

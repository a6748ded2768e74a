//! Connected devices and the requests waiting on their answers. Each device is reached
//! by a [`DeviceRoute`]: over its link on this server, or relayed through the replica
//! its link is on (PostgreSQL), by whatever [`Relay`] the server was given
//! (`crate::cluster`'s mailboxes). This file knows nothing of how mail travels: the
//! cluster depends on it, not the other way round.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
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
        /// Whether the terminal took it as a bracketed paste.
        bracketed_paste: bool,
        /// The session's output offset when it was written: its echo follows.
        offset: u64,
        /// When it was written, in µs since the session started.
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

    /// Requests waiting.
    fn len(&self) -> u64 {
        self.0.lock().expect("pending").len() as u64
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

#[cfg(test)]
mod tests;

/// A request for a device linked to another replica, as it travels there (the cluster
/// adds who sent it). Each with a `req` is answered with [`Answered`].
#[derive(Debug, Clone)]
pub(crate) enum Mail {
    /// Send `msg` to the device; answered [`Answered::Sent`] once it reached the link.
    Send { device: DeviceId, msg: ServerMessage, req: u64 },
    /// Keystrokes for a session on the device.
    Input { device: DeviceId, session: SessionId, data: Vec<u8> },
    /// Audited text; answered [`Answered::Delivery`].
    Text { device: DeviceId, session: SessionId, text: String, timeout: Duration, req: u64 },
    /// A screen snapshot; answered [`Answered::Snapshot`].
    Snapshot { device: DeviceId, session: SessionId, timeout: Duration, first: bool, req: u64 },
    /// A merge; answered [`Answered::Merge`].
    Merge { device: DeviceId, worktree: Worktree, message: String, timeout: Duration, req: u64 },
    /// A clone check; answered [`Answered::RepoCheck`].
    CheckRepo { device: DeviceId, path: String, base: Option<String>, timeout: Duration, req: u64 },
    /// Drop the device's link (its credential was revoked).
    Kick { device: DeviceId },
    /// The viewers of `session` here changed: tell the device how many can type now.
    Viewers { device: DeviceId, session: SessionId },
}

/// A relayed request's answer, back from the replica the device is linked to (None in
/// each: the device did not answer, or the answer did not decode).
#[derive(Debug)]
pub(crate) enum Answered {
    /// To [`Mail::Text`].
    Delivery(Option<Delivery>),
    /// To [`Mail::Snapshot`].
    Snapshot(Option<Snapshot>),
    /// To [`Mail::Merge`].
    Merge(Option<MergeResult>),
    /// To [`Mail::CheckRepo`]: why the clone is unfit, or None.
    RepoCheck(Option<String>),
    /// To [`Mail::Send`]: whether the message reached the device's link.
    Sent(bool),
    /// No answer came, whatever was asked.
    None,
}

/// The way to devices linked to other replicas: their mailboxes.
pub(crate) trait Relay: Send + Sync {
    /// Posts `mail` to `replica`; false if it could not be.
    fn post<'a>(&'a self, replica: &'a str, mail: Mail) -> Pin<Box<dyn Future<Output = bool> + Send + 'a>>;
}

/// How this server reaches one device: the one decision every operation on a device
/// starts from ([`Devices::route`]).
#[derive(Clone)]
pub(crate) enum DeviceRoute {
    /// Its link is on this server.
    Local(mpsc::Sender<Message>),
    /// Its link is on `replica`, reached through `relay`.
    Relayed { relay: Arc<dyn Relay>, replica: String },
}

impl DeviceRoute {
    /// The replica the device's link is on, when it is another one.
    pub(crate) fn replica(&self) -> Option<&str> {
        match self {
            DeviceRoute::Local(_) => None,
            DeviceRoute::Relayed { replica, .. } => Some(replica),
        }
    }

    /// Hands what `local` builds to the device's link here, or posts what `relayed`
    /// builds to its replica (only the one for this route is built).
    async fn deliver(&self, local: impl FnOnce() -> Message, relayed: impl FnOnce() -> Mail) -> Result<(), NotConnected> {
        match self {
            DeviceRoute::Local(tx) => tx.send(local()).await.map_err(|_| NotConnected),
            DeviceRoute::Relayed { relay, replica } => relay.post(replica, relayed()).await.then_some(()).ok_or(NotConnected),
        }
    }

    /// Posts `mail` to the device's replica; a device linked here takes none (Err).
    async fn post(&self, mail: Mail) -> Result<(), NotConnected> {
        match self {
            DeviceRoute::Local(_) => Err(NotConnected),
            DeviceRoute::Relayed { relay, replica } => relay.post(replica, mail).await.then_some(()).ok_or(NotConnected),
        }
    }

    /// The longest wait for an answer the device has `timeout` to give: a relayed
    /// answer comes back through the database.
    fn answer_within(&self, timeout: Duration) -> Duration {
        match self {
            DeviceRoute::Local(_) => timeout,
            DeviceRoute::Relayed { .. } => timeout + RELAY_MARGIN,
        }
    }
}

fn json(msg: &ServerMessage) -> Message {
    Message::Text(serde_json::to_string(msg).expect("server messages serialise").into())
}

/// What the registry holds now ([`Devices::census`]).
#[derive(Debug, Clone, Copy)]
pub struct DeviceCensus {
    /// Devices linked here.
    pub links: u64,
    /// Devices known to be linked to another replica.
    pub remote: u64,
    /// Requests to devices waiting on an answer.
    pub waiting: u64,
}

/// The registry of connected devices.
#[derive(Default)]
pub struct Devices {
    conns: Mutex<HashMap<DeviceId, Conn>>,
    /// Devices linked to other replicas, with the replica.
    remote: Mutex<HashMap<DeviceId, String>>,
    relay: std::sync::OnceLock<Arc<dyn Relay>>,
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
    /// What the registry holds now, for `/metrics`.
    pub fn census(&self) -> DeviceCensus {
        DeviceCensus {
            links: self.conns.lock().expect("conns").len() as u64,
            remote: self.remote.lock().expect("remote").len() as u64,
            waiting: self.deliveries.len() + self.sends.len() + self.snapshots.len() + self.merges.len() + self.repo_checks.len(),
        }
    }

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
            self.drop_pending(id);
        }
        current
    }

    fn drop_pending(&self, id: DeviceId) {
        self.deliveries.drop_device(id);
        self.snapshots.drop_device(id);
        self.merges.drop_device(id);
        self.repo_checks.drop_device(id);
    }

    /// Drops the device's link here (its credential was revoked): its messages stop,
    /// and its reconnection is refused.
    pub fn kick_local(&self, id: DeviceId) {
        self.conns.lock().expect("conns").remove(&id);
        self.drop_pending(id);
    }

    /// Reaches devices linked to other replicas through `relay`.
    pub(crate) fn relay_through(&self, relay: Arc<dyn Relay>) {
        let _ = self.relay.set(relay);
    }

    /// Replaces what is known of devices linked to other replicas.
    pub(crate) fn set_remote(&self, links: HashMap<DeviceId, String>) {
        *self.remote.lock().expect("remote") = links;
    }

    /// How the device is reached now: its link here first, else the replica its link
    /// is on (with a relay); None when it is not connected anywhere.
    pub(crate) fn route(&self, id: DeviceId) -> Option<DeviceRoute> {
        if let Some(tx) = self.local(id) {
            return Some(tx);
        }
        let relay = self.relay.get()?.clone();
        let replica = self.remote.lock().expect("remote").get(&id).cloned()?;
        Some(DeviceRoute::Relayed { relay, replica })
    }

    /// The device's route when its link is on this server: what mail from another
    /// replica is handed on by (it never relays further).
    pub(crate) fn local(&self, id: DeviceId) -> Option<DeviceRoute> {
        self.conns.lock().expect("conns").get(&id).map(|c| DeviceRoute::Local(c.tx.clone()))
    }

    /// The replica `id`'s link is on, when it is another one.
    pub(crate) fn remote_replica(&self, id: DeviceId) -> Option<String> {
        self.route(id)?.replica().map(str::to_string)
    }

    /// Whether the device's link is on this server.
    pub fn is_local(&self, id: DeviceId) -> bool {
        self.conns.lock().expect("conns").contains_key(&id)
    }

    /// Whether the device is connected now (to this server or another replica).
    pub fn is_connected(&self, id: DeviceId) -> bool {
        self.route(id).is_some()
    }

    /// Sends a JSON message to the device, in order with everything else sent to it.
    /// Through another replica, Ok means that replica handed it to the device's link.
    pub async fn send(&self, id: DeviceId, msg: &ServerMessage) -> Result<(), NotConnected> {
        self.send_by(self.route(id), id, msg).await
    }

    /// [`Devices::send`] over `route`.
    pub(crate) async fn send_by(&self, route: Option<DeviceRoute>, id: DeviceId, msg: &ServerMessage) -> Result<(), NotConnected> {
        match route.ok_or(NotConnected)? {
            DeviceRoute::Local(tx) => tx.send(json(msg)).await.map_err(|_| NotConnected),
            route @ DeviceRoute::Relayed { .. } => {
                // (Never built: a relayed route posts the mail.)
                let local = |_| msg.clone();
                let relayed = |req| Mail::Send { device: id, msg: msg.clone(), req };
                match self.ask(&self.sends, Some(route), id, local, relayed, RELAYED_SEND_TIMEOUT).await {
                    Ok(true) => Ok(()),
                    _ => Err(NotConnected),
                }
            }
        }
    }

    /// Sends `msg` to the device's link on this server if its queue has room, without
    /// waiting: for messages each of which a later one (or the next link's welcome)
    /// supersedes, such as viewer counts, so nobody waits on one slow device. A
    /// device not linked here is skipped. False if it was not sent.
    pub fn post_local(&self, id: DeviceId, msg: &ServerMessage) -> bool {
        match self.local(id) {
            Some(DeviceRoute::Local(tx)) => tx.try_send(json(msg)).is_ok(),
            _ => false,
        }
    }

    /// Sends keystrokes to a session on the device.
    pub async fn send_input(&self, id: DeviceId, session: SessionId, data: Vec<u8>) -> Result<(), NotConnected> {
        self.send_input_by(self.route(id), id, session, data).await
    }

    /// [`Devices::send_input`] over `route`.
    pub(crate) async fn send_input_by(
        &self,
        route: Option<DeviceRoute>,
        id: DeviceId,
        session: SessionId,
        data: Vec<u8>,
    ) -> Result<(), NotConnected> {
        match route.ok_or(NotConnected)? {
            DeviceRoute::Local(tx) => {
                let frame = DeviceBinary::Input { session, data }.encode();
                tx.send(Message::Binary(frame.into())).await.map_err(|_| NotConnected)
            }
            route @ DeviceRoute::Relayed { .. } => route.post(Mail::Input { device: id, session, data }).await,
        }
    }

    /// Drops the device's link wherever it is (its credential was revoked).
    pub async fn kick(&self, id: DeviceId) {
        if let Some(route) = self.route(id) {
            let _ = route.post(Mail::Kick { device: id }).await;
        }
        self.kick_local(id);
    }

    /// Has the viewers of `session` told to its device by the replica its link is on
    /// (a device linked here is told by `crate::viewers` directly); false if it is not
    /// connected elsewhere or the mail could not be posted.
    pub(crate) async fn relay_viewers(&self, id: DeviceId, session: SessionId) -> bool {
        match self.route(id) {
            Some(route) => route.post(Mail::Viewers { device: id, session }).await.is_ok(),
            None => false,
        }
    }

    /// Hands a relayed answer to whoever waits on `req`.
    pub(crate) fn answered(&self, req: u64, from: DeviceId, answer: Answered) {
        fn settle<T>(p: &Pending<T>, req: u64, from: DeviceId, answer: Option<T>) {
            match answer {
                Some(a) => p.resolve(req, from, a),
                None => p.fail(req, from),
            }
        }
        match answer {
            Answered::Delivery(d) => settle(&self.deliveries, req, from, d),
            Answered::Snapshot(s) => settle(&self.snapshots, req, from, s),
            Answered::Merge(m) => settle(&self.merges, req, from, m),
            Answered::RepoCheck(problem) => self.repo_checks.resolve(req, from, problem),
            Answered::Sent(ok) => self.sends.resolve(req, from, ok),
            Answered::None => {
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

    /// Sends a request over `route` (`local` builds, for a fresh request id, the
    /// message for a link here, `relayed` the mail for another replica) and waits for
    /// its answer in `pending`: `timeout` is the device's, the route adds its own delay.
    async fn ask<T>(
        &self,
        pending: &Pending<T>,
        route: Option<DeviceRoute>,
        id: DeviceId,
        local: impl FnOnce(u64) -> ServerMessage,
        relayed: impl FnOnce(u64) -> Mail,
        timeout: Duration,
    ) -> Result<T, NoAnswer> {
        let route = route.ok_or(NoAnswer::NotConnected)?;
        let req = self.req_id();
        let rx = pending.wait(req, id);
        if route.deliver(|| json(&local(req)), || relayed(req)).await.is_err() {
            pending.forget(req);
            return Err(NoAnswer::NotConnected);
        }
        let answer = tokio::time::timeout(route.answer_within(timeout), rx).await;
        pending.forget(req);
        match answer {
            Ok(Ok(a)) => Ok(a),
            Ok(Err(_)) => Err(NoAnswer::Disconnected),
            Err(_) => Err(NoAnswer::Timeout),
        }
    }

    /// Sends audited text and waits for the device's confirmation.
    pub async fn send_text(&self, id: DeviceId, session: SessionId, text: String, timeout: Duration) -> Result<Delivery, NoAnswer> {
        self.send_text_by(self.route(id), id, session, text, timeout).await
    }

    /// [`Devices::send_text`] over `route`.
    pub(crate) async fn send_text_by(
        &self,
        route: Option<DeviceRoute>,
        id: DeviceId,
        session: SessionId,
        text: String,
        timeout: Duration,
    ) -> Result<Delivery, NoAnswer> {
        let t = text.clone();
        let local = |req| ServerMessage::SendText { session, req, text };
        let relayed = |req| Mail::Text { device: id, session, text: t, timeout, req };
        self.ask(&self.deliveries, route, id, local, relayed, timeout).await
    }

    /// Resolves a pending delivery, answered by device `from`.
    pub fn delivered(&self, req: u64, from: DeviceId, d: Delivery) {
        self.deliveries.resolve(req, from, d);
    }

    /// Asks the device for a screen snapshot (`first`: a viewer's first screen, answered
    /// at once; a re-sync's may wait for the screen to catch up with a flood); None if it
    /// does not answer in time or disconnects first.
    pub async fn snapshot(&self, id: DeviceId, session: SessionId, timeout: Duration, first: bool) -> Option<Snapshot> {
        self.snapshot_by(self.route(id), id, session, timeout, first).await
    }

    /// [`Devices::snapshot`] over `route`.
    pub(crate) async fn snapshot_by(
        &self,
        route: Option<DeviceRoute>,
        id: DeviceId,
        session: SessionId,
        timeout: Duration,
        first: bool,
    ) -> Option<Snapshot> {
        let local = |req| ServerMessage::Snapshot { session, req, first };
        let relayed = |req| Mail::Snapshot { device: id, session, timeout, first, req };
        self.ask(&self.snapshots, route, id, local, relayed, timeout).await.ok()
    }

    /// Resolves a pending snapshot, answered by device `from`.
    pub fn snapshot_arrived(&self, from: DeviceId, snap: Snapshot) {
        self.snapshots.resolve(snap.req, from, snap);
    }

    /// Asks the device to merge a task's branch into its base branch and waits for
    /// the result.
    pub async fn merge(&self, id: DeviceId, worktree: Worktree, message: String, timeout: Duration) -> Result<MergeResult, NoAnswer> {
        self.merge_by(self.route(id), id, worktree, message, timeout).await
    }

    /// [`Devices::merge`] over `route`.
    pub(crate) async fn merge_by(
        &self,
        route: Option<DeviceRoute>,
        id: DeviceId,
        worktree: Worktree,
        message: String,
        timeout: Duration,
    ) -> Result<MergeResult, NoAnswer> {
        let (w, m) = (worktree.clone(), message.clone());
        let local = |req| ServerMessage::Merge { req, worktree, message };
        let relayed = |req| Mail::Merge { device: id, worktree: w, message: m, timeout, req };
        self.ask(&self.merges, route, id, local, relayed, timeout).await
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
        self.check_repo_by(self.route(id), id, path, base, timeout).await
    }

    /// [`Devices::check_repo`] over `route`.
    pub(crate) async fn check_repo_by(
        &self,
        route: Option<DeviceRoute>,
        id: DeviceId,
        path: String,
        base: Option<String>,
        timeout: Duration,
    ) -> Result<Option<String>, NoAnswer> {
        let (p, b) = (path.clone(), base.clone());
        let local = |req| ServerMessage::CheckRepo { req, path, base };
        let relayed = |req| Mail::CheckRepo { device: id, path: p, base: b, timeout, req };
        self.ask(&self.repo_checks, route, id, local, relayed, timeout).await
    }

    /// Resolves a pending clone check, answered by device `from`.
    pub fn repo_checked(&self, req: u64, from: DeviceId, problem: Option<String>) {
        self.repo_checks.resolve(req, from, problem);
    }
}

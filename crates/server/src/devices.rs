//! Connected devices and the requests waiting on their answers.

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

/// The registry of connected devices.
#[derive(Default)]
pub struct Devices {
    conns: Mutex<HashMap<DeviceId, Conn>>,
    next: AtomicU64,
    deliveries: Pending<Delivery>,
    snapshots: Pending<Snapshot>,
    merges: Pending<MergeResult>,
}

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

    /// Removes the connection if it is still the one registered at `epoch`.
    pub fn disconnect(&self, id: DeviceId, epoch: u64) {
        let mut conns = self.conns.lock().expect("conns");
        if conns.get(&id).is_some_and(|c| c.epoch == epoch) {
            conns.remove(&id);
            // Pending answers from this device will never come: fail them now.
            self.deliveries.drop_device(id);
            self.snapshots.drop_device(id);
            self.merges.drop_device(id);
        }
    }

    /// Drops the device's link (its credential was revoked): its messages stop, and its
    /// reconnection is refused.
    pub fn kick(&self, id: DeviceId) {
        self.conns.lock().expect("conns").remove(&id);
        self.deliveries.drop_device(id);
        self.snapshots.drop_device(id);
        self.merges.drop_device(id);
    }

    /// Whether the device is connected now.
    pub fn is_connected(&self, id: DeviceId) -> bool {
        self.conns.lock().expect("conns").contains_key(&id)
    }

    fn sender(&self, id: DeviceId) -> Result<mpsc::Sender<Message>, NotConnected> {
        self.conns.lock().expect("conns").get(&id).map(|c| c.tx.clone()).ok_or(NotConnected)
    }

    /// Sends a JSON message to the device, in order with everything else sent to it.
    pub async fn send(&self, id: DeviceId, msg: &ServerMessage) -> Result<(), NotConnected> {
        let text = serde_json::to_string(msg).expect("server messages serialise");
        self.sender(id)?.send(Message::Text(text.into())).await.map_err(|_| NotConnected)
    }

    /// Sends keystrokes to a session on the device.
    pub async fn send_input(&self, id: DeviceId, session: SessionId, data: Vec<u8>) -> Result<(), NotConnected> {
        let frame = DeviceBinary::Input { session, data }.encode();
        self.sender(id)?.send(Message::Binary(frame.into())).await.map_err(|_| NotConnected)
    }

    fn req_id(&self) -> u64 {
        self.next.fetch_add(1, Ordering::Relaxed)
    }

    /// Sends `msg` (built with a fresh request id) and waits for its answer in `pending`.
    async fn request<T>(
        &self,
        pending: &Pending<T>,
        id: DeviceId,
        msg: impl FnOnce(u64) -> ServerMessage,
        timeout: Duration,
    ) -> Result<T, NoAnswer> {
        let req = self.req_id();
        let rx = pending.wait(req, id);
        if self.send(id, &msg(req)).await.is_err() {
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
        self.request(&self.deliveries, id, |req| ServerMessage::SendText { session, req, text }, timeout).await
    }

    /// Resolves a pending delivery, answered by device `from`.
    pub fn delivered(&self, req: u64, from: DeviceId, d: Delivery) {
        self.deliveries.resolve(req, from, d);
    }

    /// Asks the device for a screen snapshot; None if it does not answer in time or
    /// disconnects first.
    pub async fn snapshot(&self, id: DeviceId, session: SessionId, timeout: Duration) -> Option<Snapshot> {
        self.request(&self.snapshots, id, |req| ServerMessage::Snapshot { session, req }, timeout).await.ok()
    }

    /// Resolves a pending snapshot, answered by device `from`.
    pub fn snapshot_arrived(&self, from: DeviceId, snap: Snapshot) {
        self.snapshots.resolve(snap.req, from, snap);
    }

    /// Asks the device to merge a task's branch into its base branch and waits for
    /// the result.
    pub async fn merge(&self, id: DeviceId, worktree: Worktree, message: String, timeout: Duration) -> Result<MergeResult, NoAnswer> {
        self.request(&self.merges, id, |req| ServerMessage::Merge { req, worktree, message }, timeout).await
    }

    /// Resolves a pending merge, answered by device `from`.
    pub fn merged(&self, req: u64, from: DeviceId, result: MergeResult) {
        self.merges.resolve(req, from, result);
    }
}

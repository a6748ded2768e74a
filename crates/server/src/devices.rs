//! Connected devices and the requests waiting on their answers.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use axum::extract::ws::Message;
use drover_core::{DeviceId, SessionId};
use drover_protocol::device::{DeviceBinary, ServerMessage};
use drover_protocol::shim::Snapshot;
use tokio::sync::{mpsc, oneshot};

/// Why audited input has no confirmation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoDelivery {
    /// The device is not connected: nothing was sent.
    NotConnected,
    /// The device disconnected before confirming: it may or may not have arrived.
    Disconnected,
    /// The device did not confirm in time: it may or may not have arrived.
    Timeout,
}

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

/// The registry of connected devices.
#[derive(Default)]
pub struct Devices {
    conns: Mutex<HashMap<DeviceId, Conn>>,
    next: AtomicU64,
    deliveries: Mutex<HashMap<u64, (DeviceId, oneshot::Sender<Delivery>)>>,
    snapshots: Mutex<HashMap<u64, (DeviceId, oneshot::Sender<Snapshot>)>>,
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
            // Pending confirmations from this device will never come: fail them now.
            self.deliveries.lock().expect("deliveries").retain(|_, (dev, _)| *dev != id);
            self.snapshots.lock().expect("snapshots").retain(|_, (dev, _)| *dev != id);
        }
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

    /// Sends audited text and waits for the device's confirmation.
    pub async fn send_text(&self, id: DeviceId, session: SessionId, text: String, timeout: Duration) -> Result<Delivery, NoDelivery> {
        let req = self.req_id();
        let (tx, rx) = oneshot::channel();
        self.deliveries.lock().expect("deliveries").insert(req, (id, tx));
        if self.send(id, &ServerMessage::SendText { session, req, text }).await.is_err() {
            self.deliveries.lock().expect("deliveries").remove(&req);
            return Err(NoDelivery::NotConnected);
        }
        let answer = tokio::time::timeout(timeout, rx).await;
        self.deliveries.lock().expect("deliveries").remove(&req);
        match answer {
            Ok(Ok(d)) => Ok(d),
            Ok(Err(_)) => Err(NoDelivery::Disconnected),
            Err(_) => Err(NoDelivery::Timeout),
        }
    }

    /// Resolves a pending delivery.
    pub fn delivered(&self, req: u64, d: Delivery) {
        if let Some((_, tx)) = self.deliveries.lock().expect("deliveries").remove(&req) {
            let _ = tx.send(d);
        }
    }

    /// Asks the device for a screen snapshot; None if it does not answer in time or
    /// disconnects first.
    pub async fn snapshot(&self, id: DeviceId, session: SessionId, timeout: Duration) -> Option<Snapshot> {
        let req = self.req_id();
        let (tx, rx) = oneshot::channel();
        self.snapshots.lock().expect("snapshots").insert(req, (id, tx));
        if self.send(id, &ServerMessage::Snapshot { session, req }).await.is_err() {
            self.snapshots.lock().expect("snapshots").remove(&req);
            return None;
        }
        let snap = tokio::time::timeout(timeout, rx).await.ok().and_then(Result::ok);
        self.snapshots.lock().expect("snapshots").remove(&req);
        snap
    }

    /// Resolves a pending snapshot.
    pub fn snapshot_arrived(&self, snap: Snapshot) {
        if let Some((_, tx)) = self.snapshots.lock().expect("snapshots").remove(&snap.req) {
            let _ = tx.send(snap);
        }
    }
}

//! Devices' heartbeats, written together. A heartbeat only moves a device's last
//! contact, which the stale monitor compares with a window of minutes, so the heartbeats
//! that arrive within a short period are written in one transaction: for a fleet, a
//! commit (and a sync) every period instead of one per heartbeat.
//!
//! The period is a sixteenth of the Device-silent window, at most a second, so a
//! heartbeat is always on record long before its absence could flag anything.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use drover_core::DeviceId;
use drover_store::Store;

/// The longest a heartbeat waits to be written.
const MAX_PERIOD: Duration = Duration::from_secs(1);

/// Devices heard from since the last write; the writer starts on first use.
#[derive(Default)]
pub(crate) struct ContactBook {
    heard: Arc<Mutex<HashSet<DeviceId>>>,
    writer: OnceLock<()>,
}

impl ContactBook {
    /// Notes that `device` reported in now; written within the period.
    pub(crate) fn heard(&self, store: &Store, silent_after: Duration, device: DeviceId) {
        self.heard.lock().expect("contact book lock").insert(device);
        self.writer.get_or_init(|| {
            let period = (silent_after / 16).clamp(Duration::from_millis(10), MAX_PERIOD);
            tokio::spawn(write(store.clone(), Arc::downgrade(&self.heard), period));
        });
    }
}

/// Writes what was heard every `period`, until the book is gone.
async fn write(store: Store, heard: std::sync::Weak<Mutex<HashSet<DeviceId>>>, period: Duration) {
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(book) = heard.upgrade() else { return };
        let devices: Vec<DeviceId> = book.lock().expect("contact book lock").drain().collect();
        drop(book);
        if devices.is_empty() {
            continue;
        }
        if let Err(e) = store.touch_devices(&devices).await {
            // Heard again soon enough; the next heartbeat tries again.
            tracing::warn!(devices = devices.len(), "recording heartbeats: {e}");
        }
    }
}

//! What this server holds in memory now, structure by structure: the counts a server
//! left running for months is watched by. Each follows the work held now (live
//! sessions, linked devices, attached viewers), never the work done, so after sessions
//! end and viewers leave every count returns to where it was. Served in `/metrics`
//! (`drover_live_items`), beside the process's resident memory and heap; the database's
//! write cache is kept sized to the live runs ([`spawn`]).

use std::time::Duration;

use crate::AppState;

/// How often the write cache is refitted and the counts logged (at debug level).
const EVERY: Duration = Duration::from_secs(30);

/// Every [`EVERY`]: sizes the database's write cache to the live runs here, and logs
/// the counts, the resident memory and the heap (`RUST_LOG=drover_server::live=debug`).
pub fn spawn(state: AppState) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let cache_kib = match state.store.fit_write_cache(state.hubs.count()).await {
                Ok(kib) => kib,
                Err(e) => {
                    tracing::warn!("sizing the database's write cache: {e}");
                    0
                }
            };
            // The counts look under every hub's lock: only when someone reads them.
            if !tracing::enabled!(tracing::Level::DEBUG) {
                continue;
            }
            let counts: Vec<String> = counts(&state).iter().map(|(k, v)| format!("{k}={v}")).collect();
            let mut heap = heap().map(|h| format!("heap_in_use={} heap_free={}", h.in_use, h.free)).unwrap_or_default();
            if let Some((sqlite, _)) = drover_store::sqlite_memory() {
                heap.push_str(&format!(" sqlite_in_use={sqlite}"));
            }
            tracing::debug!(rss = resident_bytes(), cache_kib, "live: {} {heap}", counts.join(" "));
        }
    });
}

/// One structure's count: its name in `drover_live_items{structure=…}`, and how many
/// items (or bytes, for the `*_bytes` ones) it holds.
pub type Count = (&'static str, u64);

/// Every live structure's count, in a fixed order.
pub fn counts(state: &AppState) -> Vec<Count> {
    let hubs = state.hubs.census();
    let devices = state.devices.census();
    let (watchers, mirrors) = state.cluster.census();
    let (told, unsaved) = state.viewers.census();
    vec![
        ("hubs", hubs.hubs),
        ("hub_viewers", hubs.viewers),
        ("hub_ring_bytes", hubs.ring_bytes),
        ("hub_ring_pieces", hubs.ring_pieces),
        ("device_links", devices.links),
        ("device_links_elsewhere", devices.remote),
        ("device_requests_waiting", devices.waiting),
        ("replica_watchers", watchers),
        ("replica_mirrors", mirrors),
        ("viewer_counts_told", told),
        ("viewer_counts_unsaved", unsaved),
        ("sign_in_keys", state.logins.keys()),
        ("tokens_touched", state.tokens_touched()),
        ("hand_offs", state.hand_offs.lock().expect("hand-offs lock").len() as u64),
        ("tasks", tokio::runtime::Handle::current().metrics().num_alive_tasks() as u64),
    ]
}

/// The process's resident memory, in bytes (None where `/proc` cannot tell).
pub fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf only reads a configuration value.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Some(pages * u64::try_from(page).ok()?)
}

/// The heap as its allocator sees it: bytes handed out and in use, and bytes it holds
/// free (resident or not). In use that stays flat while resident memory grows is
/// fragmentation; in use that grows is something kept.
#[derive(Debug, Clone, Copy)]
pub struct Heap {
    /// Bytes allocated and not yet freed.
    pub in_use: u64,
    /// Bytes the allocator holds free for reuse.
    pub free: u64,
}

/// Where [`heap`] reads from: set once by a binary whose global allocator is not the C
/// library's ([`read_heap_with`]).
static HEAP_READER: std::sync::OnceLock<fn() -> Option<Heap>> = std::sync::OnceLock::new();

/// Makes the heap figures (`drover_heap_bytes`, the soak's) read the heap through `reader`: for a binary
/// that sets its own global allocator. The first call wins.
pub fn read_heap_with(reader: fn() -> Option<Heap>) {
    let _ = HEAP_READER.set(reader);
}

/// The heap now: from the reader set by [`read_heap_with`], else glibc's `mallinfo2`
/// (None with another C library).
pub fn heap() -> Option<Heap> {
    if let Some(read) = HEAP_READER.get() {
        return read();
    }
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallinfo2 takes no arguments and only reads the allocator's totals.
        let m = unsafe { libc::mallinfo2() };
        Some(Heap { in_use: (m.uordblks + m.hblkhd) as u64, free: m.fordblks as u64 })
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        None
    }
}

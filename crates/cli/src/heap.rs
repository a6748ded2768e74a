//! Handing freed heap back to the system. glibc's allocator keeps what a long-running
//! process frees for reuse, spread over its per-thread arenas, and returns little of it
//! on its own: in a 60-minute soak the server's heap in use stayed flat (12.1 → 11.9 MB)
//! while what the allocator held free grew from 6 to 17 MB, and its RSS with it. So the
//! processes that run for months (`up`, `server`, `device`) trim it now and then.

use std::time::Duration;

/// How often the heap is trimmed.
const EVERY: Duration = Duration::from_secs(30);

/// Trims the heap every [`EVERY`] (the first time one period after the start), until the
/// runtime stops. Nothing to do with a C library other than glibc.
pub async fn trim_periodically() {
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + EVERY, EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        trim();
    }
}

/// Returns the free memory at the top of every arena and the whole free pages inside
/// them to the system.
fn trim() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim takes no pointers; it only walks the allocator's own free lists
    // under their locks.
    unsafe {
        libc::malloc_trim(0);
    }
}

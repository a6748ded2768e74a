//! The heap of every `drover` process: jemalloc, for the processes that run for months.
//! Under glibc's allocator the server's heap in use stayed flat through a 60-minute soak
//! (12.8 MB at minute 5 and at the end) while what the allocator held free grew from 8
//! to 17 MB, and its resident memory with it, despite a periodic `malloc_trim` and a
//! fixed mmap threshold: freed memory fragmented over its arenas. jemalloc keeps small
//! objects of one size together and hands back pages left unused for a few seconds.
//! It also serves C's `malloc` (SQLite's page caches), so one allocator's statistics
//! cover the whole heap (`drover_heap_bytes`).

use tikv_jemalloc_ctl::{background_thread, epoch, stats};

/// The allocator of every `drover` process.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// A C string pointer that may live in a `static`: it points at a literal.
#[repr(transparent)]
pub struct ConfString(*const std::ffi::c_char);

// SAFETY: the pointer is to a string literal, never written.
unsafe impl Sync for ConfString {}

/// jemalloc's settings, read as it starts (before `main`), under any `MALLOC_CONF` in the
/// environment (which wins, as for the shim: `drover_device::spawn`). Two arenas, not
/// four per core: a daemon's threads are mostly asleep, and freed memory spread over many
/// arenas is what grew the server's resident memory in the soak. Dirty pages are handed
/// back after a second and not kept lazily freed: with jemalloc's defaults the same
/// soak's server grew 1.15×, with these it stayed flat (README, benchmark section).
#[export_name = "malloc_conf"]
pub static MALLOC_CONF: ConfString = ConfString(c"narenas:2,dirty_decay_ms:1000,muzzy_decay_ms:0".as_ptr());

/// For the processes that run for months (`up`, `server`, `device`): pages freed are
/// handed back by jemalloc's own background thread as they age, not only when some
/// thread next allocates, so a quiet daemon shrinks too. The shim, which is idle most of
/// its life, does without that thread.
pub fn purge_in_background() {
    if let Err(e) = background_thread::write(true) {
        tracing::warn!("jemalloc's background purge could not start: {e}");
    }
}

/// How long a shim's jemalloc keeps a freed page for reuse while its session prints.
const SHIM_KEEPS_MS: isize = 1000;

/// For a shim (`drover_term::heap`): has jemalloc keep the pages freed for reuse
/// (`keep`), or hand back every free page now and each page as it is freed (not `keep`).
/// A shim has no background thread to hand pages back as they age.
pub fn keep_freed_pages(keep: bool) {
    let ms: isize = if keep { SHIM_KEEPS_MS } else { 0 };
    let arenas = tikv_jemalloc_ctl::arenas::narenas::read().unwrap_or(1);
    for arena in 0..arenas {
        let name = format!("arena.{arena}.dirty_decay_ms\0");
        // SAFETY: a `ssize_t` setting written by its NUL-terminated name.
        if let Err(e) = unsafe { tikv_jemalloc_ctl::raw::write(name.as_bytes(), ms) } {
            tracing::debug!(arena, "jemalloc's dirty_decay_ms not set: {e}");
        }
    }
    if !keep {
        // SAFETY: `arena.<all>.purge` reads and writes nothing (both pointers null,
        // lengths zero); the name is a NUL-terminated literal.
        let code = unsafe {
            tikv_jemalloc_sys::mallctl(c"arena.4096.purge".as_ptr(), std::ptr::null_mut(), std::ptr::null_mut(), std::ptr::null_mut(), 0)
        };
        if code != 0 {
            tracing::debug!(code, "jemalloc did not hand its free pages back");
        }
    }
}

/// The heap now, as jemalloc counts it: bytes allocated and in use, and what it holds
/// resident beyond them (free pages not yet handed back, partly used pages, metadata).
pub fn now() -> Option<drover_server::Heap> {
    // The statistics are a snapshot taken when the epoch advances.
    epoch::advance().ok()?;
    let allocated = stats::allocated::read().ok()? as u64;
    let resident = stats::resident::read().ok()? as u64;
    Some(drover_server::Heap { in_use: allocated, free: resident.saturating_sub(allocated) })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes jemalloc holds free and resident (dirty pages), over all arenas.
    fn dirty_bytes() -> usize {
        epoch::advance().unwrap();
        // SAFETY: a `size_t` statistic read by its NUL-terminated name.
        let pages = unsafe { tikv_jemalloc_ctl::raw::read::<usize>(b"stats.arenas.4096.pdirty\0") }.unwrap();
        // SAFETY: sysconf only reads a system setting.
        pages * unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize
    }

    /// Writes and frees 32 MiB in 16 KiB pieces (a shim's read buffers).
    fn churn() {
        let pieces: Vec<Vec<u8>> = (0..2048).map(|i| vec![i as u8; 16 * 1024]).collect();
        drop(pieces);
    }

    #[test]
    fn freed_pages_are_kept_for_reuse_or_handed_back_as_asked() {
        keep_freed_pages(true);
        churn();
        let kept = dirty_bytes();
        assert!(kept >= 16 << 20, "freed pages are kept: {kept} bytes");
        keep_freed_pages(false);
        let after = dirty_bytes();
        assert!(after < kept / 8, "handed back: {kept} bytes kept before, {after} after");
        churn();
        let now = dirty_bytes();
        assert!(now < kept / 8, "and handed back as they are freed: {now} bytes kept");
        keep_freed_pages(true);
    }
}

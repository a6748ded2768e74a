//! The shim's freed heap: kept for reuse while its session prints, handed back once it
//! is quiet.
//!
//! An idle shim's allocator hands back each page it frees at once, so an idle session
//! holds only what it uses. A flood, though, frees and allocates the screen's rows and
//! the recording's read buffers many times a second, and pages handed back at once are
//! faulted in again a moment later: while the session prints, freed pages are kept
//! for reuse, and as it goes quiet they are handed back and the allocator returns to
//! handing back at once. The binary picks the allocator and says how
//! ([`keep_freed_pages_with`]).

use std::sync::OnceLock;

/// How the allocator keeps freed pages (true) or hands them back (false): set once by
/// the binary.
static KEEP: OnceLock<fn(bool)> = OnceLock::new();

/// Makes a shim call `keep(true)` as its session starts printing, and `keep(false)` as it
/// goes quiet: `keep` should have the allocator keep the pages it frees for reuse, or
/// hand them back, those kept included. For a binary whose allocator can do both. Set
/// before any shim starts (shims forked later keep it); the first call wins.
pub fn keep_freed_pages_with(keep: fn(bool)) {
    let _ = KEEP.set(keep);
}

/// Keeps freed pages for reuse (true) or hands them back (false), if the binary said how.
pub(crate) fn keep_freed_pages(keep: bool) {
    if let Some(set) = KEEP.get() {
        set(keep);
    }
}

//! The seam between ingest and the store: exactly what ingest needs from it, so that its
//! logic is tested against a fake (`tests.rs`) as well as end to end.

use std::future::Future;

use drover_core::outcome::Ending;
use drover_core::{RunEnd, SessionId};
use drover_store::{Mark, RunTimes, SessionRow, Store, StoreError};

/// What ingest reads and writes: the session a report names, its end, its resizes.
pub(crate) trait IngestStore: Sync {
    /// The session a device's report names (None: no such session).
    fn session(&self, id: SessionId) -> impl Future<Output = Result<Option<SessionRow>, StoreError>> + Send;

    /// Stores the end of a live session as core decides it from `end` and what its row
    /// says under the write lock (`Store::end_session`); `reporter` saw the end. Returns
    /// the ending stored, or None (changing nothing) if the session had already ended.
    fn end_session(
        &self,
        id: SessionId,
        end: &RunEnd,
        times: RunTimes<'_>,
        final_offset: u64,
        reporter: &str,
    ) -> impl Future<Output = Result<Option<Ending>, StoreError>> + Send;

    /// Adds a mark (a resize) to the session's recording.
    fn add_mark(&self, id: SessionId, mark: &Mark) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Records the terminal's current size in the session's row.
    fn set_size(&self, id: SessionId, cols: u16, rows: u16) -> impl Future<Output = Result<(), StoreError>> + Send;
}

impl IngestStore for Store {
    fn session(&self, id: SessionId) -> impl Future<Output = Result<Option<SessionRow>, StoreError>> + Send {
        Store::session(self, id)
    }

    fn end_session(
        &self,
        id: SessionId,
        end: &RunEnd,
        times: RunTimes<'_>,
        final_offset: u64,
        reporter: &str,
    ) -> impl Future<Output = Result<Option<Ending>, StoreError>> + Send {
        Store::end_session(self, id, end, times, final_offset, reporter)
    }

    fn add_mark(&self, id: SessionId, mark: &Mark) -> impl Future<Output = Result<(), StoreError>> + Send {
        Store::add_mark(self, id, mark)
    }

    fn set_size(&self, id: SessionId, cols: u16, rows: u16) -> impl Future<Output = Result<(), StoreError>> + Send {
        Store::set_size(self, id, cols, rows)
    }
}

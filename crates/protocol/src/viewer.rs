//! Viewer (CLI `attach`, browser) ⇄ server, over the WebSocket at
//! `/api/v1/sessions/{id}/terminal` (`?read_only=true` to only watch;
//! `?cols=C&rows=R` to resize the session to the viewer's window on join; `?local=true`
//! when the viewer reads the bytes from the session's shim on its own machine, as
//! `drover session attach` does there: it is then sent events but no bytes).
//!
//! Server → viewer: binary frames are terminal bytes to write as they are (the first is
//! a screen snapshot, later ones follow on from it; a `resync` event is followed by a
//! fresh snapshot); text frames are JSON [`ViewerEvent`]s.
//! Viewer → server: binary frames are keystrokes (ignored for read-only viewers); text
//! frames are JSON [`ViewerCommand`]s.

use drover_core::{Outcome, SessionId};
use serde::{Deserialize, Serialize};

/// Events the server sends a viewer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ViewerEvent {
    /// First message.
    Hello {
        /// Which session the terminal shows.
        session: SessionId,
        /// Terminal size.
        cols: u16,
        /// Terminal size.
        rows: u16,
        /// Whether typing is ignored.
        read_only: bool,
    },
    /// The terminal was resized (by another viewer).
    Resize {
        /// The terminal's width, in columns.
        cols: u16,
        /// The terminal's height, in rows.
        rows: u16,
    },
    /// The viewer fell behind; a fresh snapshot follows.
    Resync,
    /// The session ended; the socket closes after this.
    Ended {
        /// The outcome.
        outcome: Outcome,
        /// Exit code, if any.
        exit_code: Option<i32>,
        /// Why it ended.
        reason: Option<String>,
    },
    /// Something went wrong for this viewer.
    Error {
        /// What, for a person.
        message: String,
    },
}

/// Commands a viewer sends.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ViewerCommand {
    /// The viewer's window changed size.
    Resize {
        /// The terminal's width, in columns.
        cols: u16,
        /// The terminal's height, in rows.
        rows: u16,
    },
    /// The viewer has fallen behind the bytes it was sent (a browser whose terminal parses
    /// slower than the program prints) and drops what it holds: the server answers, as for
    /// a viewer it finds lagging, with a `resync` event, a fresh snapshot and the bytes
    /// after it (at most one every [`RESYNC_EVERY_MS`]).
    Resync,
}

/// The least time between two re-syncs a viewer asks for, in ms; one asked for sooner
/// waits until then.
pub const RESYNC_EVERY_MS: u64 = 200;

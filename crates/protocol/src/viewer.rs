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
    /// The viewer is done with this many more of the terminal bytes it was sent (drawn,
    /// or dropped). Heeded when the terminal was opened with a `window`: the server sends
    /// at most that many bytes ahead of what the viewer is done with, and once it has
    /// caught up, a `resync` with a fresh screen in place of the output it held back.
    Consumed {
        /// Bytes, counted from the last `consumed`.
        bytes: u64,
    },
}

/// The least window a viewer may ask for, in bytes (a smaller one is raised to it).
pub const MIN_WINDOW: u64 = 64 * 1024;

/// The largest window a viewer may ask for, in bytes (a larger one is lowered to it).
pub const MAX_WINDOW: u64 = 16 * 1024 * 1024;

/// The least time between two re-syncs a viewer asks for, in ms; one asked for sooner
/// waits until then.
pub const RESYNC_EVERY_MS: u64 = 200;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_read_as_a_browser_writes_them() {
        let read = |s: &str| serde_json::from_str::<ViewerCommand>(s);
        assert_eq!(read(r#"{"type":"consumed","bytes":65536}"#).unwrap(), ViewerCommand::Consumed { bytes: 65536 });
        assert_eq!(read(r#"{"type":"resync"}"#).unwrap(), ViewerCommand::Resync);
        assert_eq!(read(r#"{"type":"resize","cols":80,"rows":24}"#).unwrap(), ViewerCommand::Resize { cols: 80, rows: 24 });
        assert!(read(r#"{"type":"consumed","bytes":-1}"#).is_err(), "a count below zero is refused");
        assert!(read(r#"{"type":"consumed"}"#).is_err(), "a count is required");
    }
}

//! Pure handling of a session's terminal output, with no PTY or process code: what the
//! server and the shim both need from the bytes.
//!
//! - [`text`], [`transcript`], [`asciicast`]: renderers of a stored stream for people
//!   and players.
//! - [`prompt`], [`queries`]: scanners for a program's own signals and questions.
//! - [`checkpoint`]: a screen's whole state at a point of its stream, to go on from.
//! - [`offscreen`]: how a flood's lines that scroll away unseen are skipped, same screen.
//! - [`redraw`]: the escape sequence that redraws a screen (a snapshot's bytes).
//! - [`ring`]: recent output kept in memory, addressed by stream offset.

pub mod asciicast;
mod bounded;
pub mod checkpoint;
pub mod offscreen;
pub mod prompt;
pub mod queries;
pub mod redraw;
pub mod ring;
pub mod text;
pub mod transcript;

//! Pure handling of a session's terminal output, with no PTY or process code: what the
//! server and the shim both need from the bytes.
//!
//! - [`text`], [`transcript`], [`asciicast`]: renderers of a stored stream for people
//!   and players.
//! - [`prompt`], [`queries`]: scanners for a program's own signals and questions.
//! - [`redraw`]: the escape sequence that redraws a screen (a snapshot's bytes).
//! - [`ring`]: recent output kept in memory, addressed by stream offset.

pub mod asciicast;
mod bounded;
pub mod prompt;
pub mod queries;
pub mod redraw;
pub mod ring;
pub mod text;
pub mod transcript;

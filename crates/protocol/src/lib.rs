//! The messages Drover's processes exchange, and how they are framed.
//!
//! Three links, each documented in its module:
//! - [`shim`]: device daemon ⇄ per-session shim, over a unix socket, length-prefixed frames;
//! - [`device`]: device daemon ⇄ server, over a WebSocket the device opens;
//! - [`viewer`]: viewer (CLI `attach`, browser) ⇄ server, over a WebSocket.
//!
//! The HTTP API's JSON bodies are not here: they are the contract in `drover-api`.
//!
//! Terminal bytes always travel in binary frames and carry their **offset** in the
//! session's output stream, so every hop can resume from the last offset stored.
//! Control messages are JSON. Everything a peer sends is untrusted: decoders return
//! [`FrameError`], never panic.

pub mod device;
pub mod frame;
pub mod shim;
pub mod viewer;

pub use frame::FrameError;

/// The protocol version a device announces in its hello; the server refuses others.
pub const PROTOCOL_VERSION: u32 = 1;

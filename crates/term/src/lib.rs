//! Drover's terminal layer: everything that touches a pseudo-terminal or its bytes.
//!
//! - [`pty`]: start a program in a PTY, as its own process group.
//! - [`confine`], [`tree`]: the sandbox a run enters, and its whole process tree.
//! - [`screen`]: the screen state kept beside the stream (snapshots, modes, cursor),
//!   packed while the session is quiet (`packed`), caught up past a flood's unseen lines
//!   without drawing them (`drover_render::offscreen`).
//! - [`shim`]: the per-session process that owns the PTY and outlives the device daemon.
//! - [`text`], [`transcript`], [`prompt`], [`queries`], [`asciicast`]: the pure renderers
//!   and scanners of terminal bytes, from `drover-render`.
//! - [`quiet`]: a unix stream the runtime wakes only for what arrives.
//! - [`dir`]: the layout of a session's directory, shared by the shim and the device.
//! - [`exec`], [`regions`]: a run's process from clone to exec, and the heap its
//!   namespace's init lets go of.
//! - [`heap`]: the shim's freed heap, handed back once its session is quiet.

pub mod confine;
pub mod contain;
pub mod dir;
pub mod exec;
pub mod heap;
mod packed;
pub mod pty;
pub mod quiet;
pub mod regions;
pub use drover_recording as recording;
pub use drover_render::{asciicast, prompt, queries, text, transcript};
pub mod screen;
pub mod shim;
pub mod tree;

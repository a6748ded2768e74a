//! The device daemon: one per machine. It opens a WebSocket to the server (so it works
//! behind NAT), starts a shim per session, forwards each session's output by offset,
//! carries input and commands to the shims, and on start re-adopts every shim that is
//! still running — the shims, not the daemon, own the sessions.

mod config;
pub mod confine;
mod evidence;
pub mod identity;
pub mod launcher;
mod link;
mod merge;
pub mod metrics;
mod session;
mod skills;
mod spawn;
pub mod usage;
mod worktree;

pub use config::{DeviceConfig, SandboxConfig, HEARTBEAT};
pub use launcher::ShimLauncher;
pub use link::run;
pub use spawn::connect_existing;
pub use worktree::GitDirs;

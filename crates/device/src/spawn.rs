//! Connecting to a shim's socket (shims are started by the launcher:
//! [`crate::launcher`]).

use std::time::{Duration, Instant};

use drover_protocol::frame::write_frame;
use drover_protocol::shim::{SessionSpec, ShimFrame, ShimRequest};
use drover_term::dir::SessionDir;
use tokio::net::UnixStream;

/// How long a new shim has to open its socket.
const SHIM_READY: Duration = Duration::from_secs(10);

/// Connects to a shim's socket, waiting up to [`SHIM_READY`] for it to appear.
pub async fn connect_new(dir: &SessionDir) -> std::io::Result<UnixStream> {
    let deadline = Instant::now() + SHIM_READY;
    loop {
        match UnixStream::connect(dir.socket()).await {
            Ok(s) => return authenticate(dir, s).await,
            Err(e) if Instant::now() >= deadline => return Err(e),
            Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
}

/// Connects to the socket of a shim that should already be running.
pub async fn connect_existing(dir: &SessionDir) -> Option<UnixStream> {
    authenticate(dir, UnixStream::connect(dir.socket()).await.ok()?).await.ok()
}

/// A new random link secret for a session's `spec.json`.
pub fn link_secret() -> String {
    use rand::distributions::Alphanumeric;
    use rand::Rng;
    rand::thread_rng().sample_iter(&Alphanumeric).take(32).map(char::from).collect()
}

/// Presents the session's link secret (from its `spec.json`, which only the device's
/// user outside any run can read) as the connection's first frame.
async fn authenticate(dir: &SessionDir, mut stream: UnixStream) -> std::io::Result<UnixStream> {
    // The secret goes only to a process of this user: a socket some other user put in
    // its place gets nothing.
    // SAFETY: getuid(2) cannot fail and touches no memory.
    let me = unsafe { libc::getuid() };
    if stream.peer_cred()?.uid() != me {
        return Err(std::io::Error::other("the shim's socket is held by another user"));
    }
    let spec: Option<SessionSpec> = std::fs::read(dir.spec()).ok().and_then(|b| serde_json::from_slice(&b).ok());
    if let Some(secret) = spec.and_then(|s| s.link_secret) {
        let frame = ShimFrame::Request(ShimRequest::Authenticate { secret }).encode();
        write_frame(&mut stream, &[&frame]).await.map_err(std::io::Error::other)?;
    }
    Ok(stream)
}

//! One session on this device: the link to its shim (or, when the shim is gone, its
//! files), forwarding output by offset and carrying commands in; its evidence of
//! progress is polled by [`crate::evidence`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use drover_core::{RunEnd, SessionId};
use drover_protocol::device::{DeviceBinary, DeviceMessage, SessionReport};
use drover_protocol::frame::{read_frame, write_frame};
use drover_protocol::shim::{ShimEvent, ShimExit, ShimFrame, ShimRequest};
use drover_term::dir::SessionDir;
use drover_term::recording::RecordingReader;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::UnixStream;
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};
use tokio_tungstenite::tungstenite::Message;

use crate::evidence::{Evidence, COMMIT_CHECK, USAGE_CHECK};
use crate::metrics::{DeviceMetrics, ShimGuard};

/// Output read from files per frame when the shim is gone.
const FILE_CHUNK: usize = 64 * 1024;
/// Output the daemon holds on its way to the server, across all its sessions: read from
/// shims (or files) and not yet written to the server's socket. Past it, sessions stop
/// reading their shims, which keep the rest (a shim's frame is up to 256 KiB, so a
/// queue counted in frames would let hundreds of sessions hold gigabytes).
pub const OUTPUT_BUDGET: usize = 8 * 1024 * 1024;
/// Frames a session's shim reader may hand its session ahead (each also within
/// [`OUTPUT_BUDGET`]).
const SHIM_FRAMES: usize = 4;

/// A message for the server, holding its share of [`OUTPUT_BUDGET`] until it is written.
pub struct Outgoing {
    /// What is sent.
    pub message: Message,
    /// The output budget its bytes take, given back when it is dropped.
    pub held: Option<OwnedSemaphorePermit>,
}

impl From<Message> for Outgoing {
    fn from(message: Message) -> Outgoing {
        Outgoing { message, held: None }
    }
}

/// The sending side of the current server connection.
pub type Uplink = mpsc::Sender<Outgoing>;

/// What the link asks of a session.
pub enum SessionCmd {
    /// A (new) server connection holds output up to `from`: send everything after it.
    Resume {
        /// Offset the server holds.
        from: u64,
        /// Where to send.
        uplink: Uplink,
    },
    /// Bytes for the program's terminal, as typed in a viewer.
    Input(Vec<u8>),
    /// A shim request (audited text, resize, stop, snapshot, viewers).
    Shim(ShimRequest),
    /// The server holds everything: stop if still running, clean up and end.
    Release,
}

/// How the link reaches a session task.
#[derive(Clone)]
pub struct SessionHandle {
    /// Commands in.
    pub tx: mpsc::Sender<SessionCmd>,
    report: Arc<Mutex<SessionReport>>,
}

impl SessionHandle {
    /// The session's state for the device's hello.
    pub fn report(&self) -> SessionReport {
        self.report.lock().expect("report lock").clone()
    }
}

/// Sessions on this device, and the output budget they share; cheap to clone.
#[derive(Clone)]
pub struct Registry {
    sessions: Arc<Mutex<HashMap<SessionId, SessionHandle>>>,
    budget: Arc<Semaphore>,
}

impl Registry {
    /// No sessions, and `budget` bytes of output they may hold in flight.
    pub fn new(budget: usize) -> Registry {
        Registry { sessions: Arc::default(), budget: Arc::new(Semaphore::new(budget)) }
    }

    /// The sessions, by id.
    pub fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<SessionId, SessionHandle>> {
        self.sessions.lock().expect("registry lock")
    }
}

/// `bytes` of output as permits of a budget (at least one, at most the whole budget).
fn permits(bytes: usize) -> u32 {
    bytes.clamp(1, OUTPUT_BUDGET) as u32
}

/// Starts the task for a session whose shim is `shim` (None: the shim is gone), counting
/// in `metrics`.
pub fn spawn_session(
    registry: Registry,
    metrics: &DeviceMetrics,
    id: SessionId,
    dir: SessionDir,
    shim: Option<UnixStream>,
) -> SessionHandle {
    let (tx, rx) = mpsc::channel(256);
    let report = Arc::new(Mutex::new(SessionReport { session: id, written: 0, running: shim.is_some() }));
    let handle = SessionHandle { tx, report: report.clone() };
    registry.lock().insert(id, handle.clone());
    let evidence = Evidence::read(&dir);
    let task = SessionTask {
        id,
        dir,
        report,
        uplink: None,
        expected: 0,
        exit: None,
        pid: None,
        started_at: None,
        evidence,
        ended_sent: false,
        resubscribing: false,
        metrics: metrics.clone(),
        budget: registry.budget.clone(),
    };
    // Inside the device's span (the caller's), and its own.
    let span = tracing::info_span!("session", session = %id);
    tokio::spawn(tracing::Instrument::instrument(
        async move {
            task.run(shim, rx).await;
            registry.lock().remove(&id);
        },
        span,
    ));
    handle
}

/// The link to a running shim. Frames are read by a task of their own and handed over
/// whole: a frame read must never be abandoned halfway (as a `select!` would), or the
/// stream loses its framing. Each frame holds its share of the output budget.
struct ShimLink {
    wr: OwnedWriteHalf,
    frames: mpsc::Receiver<(Vec<u8>, OwnedSemaphorePermit)>,
    reader: tokio::task::JoinHandle<()>,
    /// Counted in `drover_device_shims` while it lives.
    _counted: ShimGuard,
}

impl ShimLink {
    fn new(mut rd: OwnedReadHalf, wr: OwnedWriteHalf, counted: ShimGuard, budget: Arc<Semaphore>) -> ShimLink {
        let (tx, frames) = mpsc::channel(SHIM_FRAMES);
        let reader = tokio::spawn(async move {
            while let Ok(Some(frame)) = read_frame(&mut rd).await {
                let Ok(held) = budget.clone().acquire_many_owned(permits(frame.len())).await else { return };
                if tx.send((frame, held)).await.is_err() {
                    return;
                }
            }
        });
        ShimLink { wr, frames, reader, _counted: counted }
    }
}

impl Drop for ShimLink {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

struct SessionTask {
    id: SessionId,
    dir: SessionDir,
    report: Arc<Mutex<SessionReport>>,
    uplink: Option<Uplink>,
    expected: u64,
    exit: Option<ShimExit>,
    pid: Option<u32>,
    started_at: Option<String>,
    /// New commits and usage, polled beside the output.
    evidence: Evidence,
    ended_sent: bool,
    /// After a re-subscription: output frames of the old subscription may still be on
    /// their way and must not be taken for the new one's (they would skip bytes).
    resubscribing: bool,
    metrics: DeviceMetrics,
    /// The device's output budget, shared by its sessions.
    budget: Arc<Semaphore>,
}

impl SessionTask {
    async fn run(mut self, shim: Option<UnixStream>, mut rx: mpsc::Receiver<SessionCmd>) {
        let mut link = match shim {
            Some(s) => self.open(s).await,
            None => None,
        };
        if link.is_none() {
            self.collect_exit();
        }
        let mut commits = tokio::time::interval(COMMIT_CHECK);
        commits.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut usage = tokio::time::interval(USAGE_CHECK);
        usage.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let frame = async {
                match link.as_mut() {
                    Some(l) => l.frames.recv().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = commits.tick(), if self.evidence.follows_commits() && self.exit.is_none() => self.check_commits().await,
                _ = usage.tick(), if self.started_at.is_some() && self.exit.is_none() => self.check_usage().await,
                cmd = rx.recv() => {
                    let Some(cmd) = cmd else { return };
                    if self.command(cmd, &mut link).await {
                        return;
                    }
                }
                frame = frame => match frame {
                    Some((f, held)) => self.on_shim_frame(f.into(), held).await,
                    None => {
                        link = None;
                        self.collect_exit();
                        self.replay_files().await;
                    }
                },
            }
        }
    }

    /// Reads the shim's hello; None if the shim does not answer properly.
    async fn open(&mut self, s: UnixStream) -> Option<ShimLink> {
        let (mut rd, wr) = s.into_split();
        let frame = read_frame(&mut rd).await.ok()??;
        match ShimFrame::decode_from_shim(&frame).ok()? {
            ShimFrame::Event(ShimEvent::Hello { pid, written, exit, started_at, .. }) => {
                self.pid = pid;
                self.started_at = pid.map(|_| started_at);
                self.exit = exit;
                let mut r = self.report.lock().expect("report lock");
                r.written = written;
                r.running = self.exit.is_none();
                Some(ShimLink::new(rd, wr, self.metrics.shim(), self.budget.clone()))
            }
            _ => None,
        }
    }

    fn collect_exit(&mut self) {
        if self.exit.is_none() {
            self.exit = self.dir.read_exit();
        }
        let written = std::fs::metadata(self.dir.output()).map(|m| m.len()).unwrap_or(0);
        let mut r = self.report.lock().expect("report lock");
        r.written = written;
        r.running = false;
    }

    /// Handles a command; true when the task should end.
    async fn command(&mut self, cmd: SessionCmd, link: &mut Option<ShimLink>) -> bool {
        match cmd {
            SessionCmd::Resume { from, uplink } => {
                self.uplink = Some(uplink);
                self.expected = from;
                self.ended_sent = false;
                self.resubscribing = link.is_some();
                match link.as_mut() {
                    Some(ShimLink { wr, .. }) => {
                        if let (Some(pid), None) = (self.pid, &self.exit) {
                            let cwd = self.evidence.cwd().to_string();
                            self.send(DeviceMessage::Started { session: self.id, pid, cwd }).await;
                        }
                        let req = ShimFrame::Request(ShimRequest::Subscribe { from_offset: from }).encode();
                        if write_frame(wr, &[&req]).await.is_err() {
                            *link = None;
                            self.collect_exit();
                            self.replay_files().await;
                        }
                    }
                    None => self.replay_files().await,
                }
                false
            }
            SessionCmd::Input(bytes) => {
                if let Some(ShimLink { wr, .. }) = link.as_mut() {
                    let _ = write_frame(wr, &[&ShimFrame::Input(bytes).encode()]).await;
                }
                false
            }
            SessionCmd::Shim(req) => {
                let text_req = match &req {
                    ShimRequest::SendText { req, .. } => Some(*req),
                    _ => None,
                };
                let sent = match link.as_mut() {
                    Some(ShimLink { wr, .. }) => write_frame(wr, &[&ShimFrame::Request(req).encode()]).await.is_ok(),
                    None => false,
                };
                if !sent {
                    let reason = "the session's process has ended".to_string();
                    self.send(DeviceMessage::Failed { session: self.id, req: text_req, reason }).await;
                }
                false
            }
            SessionCmd::Release => {
                if let Some(ShimLink { wr, .. }) = link.as_mut() {
                    if self.exit.is_none() {
                        let stop = ShimFrame::Request(ShimRequest::Stop { grace_ms: 2000 }).encode();
                        let _ = write_frame(wr, &[&stop]).await;
                    }
                    let _ = write_frame(wr, &[&ShimFrame::Request(ShimRequest::Release).encode()]).await;
                }
                if self.exit.is_some() || link.is_none() {
                    let _ = std::fs::remove_dir_all(self.dir.root());
                }
                true
            }
        }
    }

    /// Handles a frame from the shim; `held` is its share of the output budget, given
    /// back once it is written to the server (or dropped).
    async fn on_shim_frame(&mut self, frame: Bytes, held: OwnedSemaphorePermit) {
        let Ok(frame) = ShimFrame::decode_shared_from_shim(&frame) else {
            tracing::warn!(session = %self.id, "undecodable frame from shim");
            return;
        };
        let id = self.id;
        match frame {
            ShimFrame::Output { offset, t_micros, data } => self.output(offset, t_micros, data, Some(held)).await,
            ShimFrame::Snapshot(snapshot) => {
                self.send_binary(DeviceBinary::Snapshot { session: id, snapshot }, Some(held)).await;
            }
            ShimFrame::Event(ev) => {
                let msg = match ev {
                    // The device never hands the shim a terminal.
                    ShimEvent::Hello { .. } | ShimEvent::TerminalReleased { .. } => return,
                    ShimEvent::Subscribed { .. } => {
                        self.resubscribing = false;
                        // An end held back during the resubscribe, with nothing left to send.
                        if self.exit.as_ref().is_some_and(|e| self.expected >= e.final_offset) && !self.ended_sent {
                            self.send_end().await;
                        }
                        return;
                    }
                    ShimEvent::Delivered { req, bracketed_paste, offset, t_micros } => {
                        DeviceMessage::Delivered { session: id, req, bracketed_paste, offset, t_micros }
                    }
                    ShimEvent::NotDelivered { req, reason } => DeviceMessage::Failed { session: id, req: Some(req), reason },
                    ShimEvent::Resized { t_micros, cols, rows } => DeviceMessage::Resized { session: id, t_micros, cols, rows },
                    ShimEvent::RecordingError { message } => DeviceMessage::RecordingError { session: id, message },
                    ShimEvent::Exited(exit) => {
                        // An end reported before the server has all the output (an old
                        // subscription's, during a resubscribe) waits for the bytes: the
                        // server refuses output once a run has ended.
                        let caught_up = !self.resubscribing && self.expected >= exit.final_offset;
                        self.exit = Some(exit);
                        self.report.lock().expect("report lock").running = false;
                        if caught_up {
                            self.send_end().await;
                        }
                        return;
                    }
                };
                self.send(msg).await;
            }
            ShimFrame::Input(_) | ShimFrame::Request(_) => {}
        }
    }

    /// Forwards output, dropping what the server already has and trimming overlaps.
    async fn output(&mut self, offset: u64, t_micros: u64, data: Bytes, held: Option<OwnedSemaphorePermit>) {
        if self.resubscribing {
            if offset > self.expected {
                // The old subscription's, ahead of where the server stands: the new one
                // sends these bytes in order.
                return;
            }
            // Contiguous with what the server holds: correct whichever subscription sent it.
            self.resubscribing = false;
        }
        let end = offset + data.len() as u64;
        if end <= self.expected {
            return;
        }
        if self.ended_sent {
            // The end told the server where the output stops: these bytes are past it.
            tracing::warn!(session = %self.id, "output at {offset}..{end} came after the run's end was reported");
        }
        let (offset, data) = match offset < self.expected {
            true => (self.expected, data.slice((self.expected - offset) as usize..)),
            false => (offset, data),
        };
        self.expected = offset + data.len() as u64;
        {
            let mut r = self.report.lock().expect("report lock");
            r.written = r.written.max(self.expected);
        }
        if self.uplink.is_some() {
            self.metrics.forwarded(data.len());
        }
        self.send_binary(DeviceBinary::Output { session: self.id, offset, t_micros, data }, held).await;
        // An end held back for these bytes goes once they are all sent.
        if self.exit.as_ref().is_some_and(|e| self.expected >= e.final_offset) && !self.ended_sent {
            self.send_end().await;
        }
    }

    /// With the shim gone: sends what the files hold after `expected`, then the end.
    async fn replay_files(&mut self) {
        if self.uplink.is_none() {
            return;
        }
        if let Ok(reader) = RecordingReader::open(&self.dir.output(), &self.dir.index()) {
            while let Ok(Some(chunk)) = reader.read_chunk(self.expected, FILE_CHUNK) {
                let before = self.expected;
                let Ok(held) = self.budget.clone().acquire_many_owned(permits(chunk.data.len())).await else { break };
                self.output(chunk.offset, chunk.t_micros, chunk.data.into(), Some(held)).await;
                if self.expected == before || self.uplink.is_none() {
                    break;
                }
            }
        }
        self.send_end().await;
    }

    /// Reports the run's usage when it changed.
    async fn check_usage(&mut self) {
        let Some(since) = self.started_at.clone() else { return };
        let Some(report) = self.evidence.unsent_usage(&since).await else { return };
        if self.uplink.is_some() {
            self.send(DeviceMessage::Usage { session: self.id, usage: report.clone() }).await;
            if self.uplink.is_some() {
                self.evidence.usage_delivered(report);
            }
        }
    }

    /// Reports a new HEAD in the run's worktree (evidence of progress).
    async fn check_commits(&mut self) {
        if let Some((head, subject)) = self.evidence.new_commit().await {
            self.send(DeviceMessage::Commit { session: self.id, head, subject }).await;
        }
    }

    async fn send_end(&mut self) {
        if self.ended_sent || self.uplink.is_none() {
            return;
        }
        // Commits made, and usage recorded, just before the end count too.
        self.check_commits().await;
        if self.started_at.is_some() {
            self.check_usage().await;
        }
        let (end, ended_at, final_offset) = match &self.exit {
            Some(exit) => {
                let end = match (&exit.start_error, exit.status) {
                    (Some(reason), _) => RunEnd::StartFailed { reason: reason.clone() },
                    (None, Some(status)) => RunEnd::Exited { status, stop_requested: exit.stop_requested },
                    (None, None) => RunEnd::Lost { reason: "the session's process ended without an exit status".into() },
                };
                (end, exit.ended_at.clone(), exit.final_offset.max(self.expected))
            }
            None => (
                RunEnd::Lost {
                    reason: "the session's process was gone when the device looked for it (the machine may have restarted)".into(),
                },
                chrono::Utc::now().to_rfc3339(),
                self.expected,
            ),
        };
        self.ended_sent = true;
        tracing::info!(bytes = final_offset, "run ended: {end:?}");
        let started_at = self.started_at.clone();
        self.send(DeviceMessage::Ended { session: self.id, end, started_at, ended_at, final_offset }).await;
    }

    async fn send(&mut self, msg: DeviceMessage) {
        let text = serde_json::to_string(&msg).expect("device messages serialise");
        self.push(Message::Text(text.into()).into()).await;
    }

    async fn send_binary(&mut self, frame: DeviceBinary, held: Option<OwnedSemaphorePermit>) {
        self.push(Outgoing { message: Message::Binary(frame.encode().into()), held }).await;
    }

    async fn push(&mut self, msg: Outgoing) {
        if let Some(up) = &self.uplink {
            if up.send(msg).await.is_err() {
                self.uplink = None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Waits (up to 10 s) until `ready` holds.
    async fn until(mut ready: impl FnMut() -> bool) {
        for _ in 0..1000 {
            if ready() {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        panic!("never happened");
    }

    #[tokio::test]
    async fn a_shim_is_read_no_further_ahead_than_the_output_budget() {
        let (mut shim, ours) = UnixStream::pair().unwrap();
        let (rd, wr) = ours.into_split();
        // Room for two 4 KiB frames and a half.
        let budget = Arc::new(Semaphore::new(10 * 1024));
        let mut link = ShimLink::new(rd, wr, DeviceMetrics::default().shim(), budget.clone());
        tokio::spawn(async move {
            for _ in 0..20 {
                write_frame(&mut shim, &[&[7u8; 4096]]).await.unwrap();
            }
            // Kept open: the reader waits on the budget, not on the end.
            std::future::pending::<()>().await;
        });
        until(|| budget.available_permits() < 4096).await;
        // A frame counted as a frame, not in bytes, would let more through meanwhile.
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        assert_eq!(link.frames.len(), 2, "two frames within the budget, the third waits");
        // A frame written to the server gives its share back, and one more is read.
        let (frame, held) = link.frames.recv().await.unwrap();
        assert_eq!(frame.len(), 4096);
        drop(held);
        until(|| link.frames.len() == 2).await;
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        // The fourth waits, holding the 2 KiB left toward its 4.
        assert_eq!((link.frames.len(), budget.available_permits()), (2, 0));
    }
}

//! One device connection to the shim: hello, then requests in, output and events out.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use drover_protocol::frame::{read_frame, write_frame};
use drover_protocol::shim::{output_header, ShimEvent, ShimFrame, ShimRequest, Snapshot};
use tokio::io::{AsyncWriteExt, BufWriter};
use tokio::net::UnixStream;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use super::state::Next;
use super::terminal::{self, Ended, Take};
use super::{child, Shared};
use crate::quiet::{QuietRead, QuietStream, QuietWrite};

/// Largest output frame sent to the device.
const MAX_OUTPUT_FRAME: usize = 256 * 1024;
/// Frames queued for the socket before senders wait.
const OUT_QUEUE: usize = 64;

enum Out {
    Output {
        offset: u64,
        t_micros: u64,
        data: Bytes,
    },
    Frame(Vec<u8>),
    /// The last word of the output followed since [`Owed::follow`] returned the number
    /// (`Exited`, or the terminal let go): once written, the connection is owed nothing.
    End(Vec<u8>, u64),
}

/// Whether a connection is owed the output up to its end, counted in
/// [`Shared::following`] while it is.
struct Owed {
    shared: Arc<Shared>,
    owed: std::sync::atomic::AtomicBool,
    /// How many times the connection has started following.
    follows: std::sync::atomic::AtomicU64,
}

impl Owed {
    /// The connection follows the output (again); the number its end will carry.
    fn follow(&self) -> u64 {
        let follow = self.follows.fetch_add(1, Ordering::AcqRel) + 1;
        if !self.owed.swap(true, Ordering::AcqRel) {
            self.shared.following.fetch_add(1, Ordering::AcqRel);
        }
        follow
    }

    /// The end of follow `of` was written (an end of a follow since replaced settles
    /// nothing), or, with None, the connection closed.
    fn settle(&self, of: Option<u64>) {
        if of.is_some_and(|of| of != self.follows.load(Ordering::Acquire)) {
            return;
        }
        if self.owed.swap(false, Ordering::AcqRel) {
            self.shared.following.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// Largest first frame read from a connection that has not yet shown the secret.
const MAX_SECRET_FRAME: usize = 256;

/// How long a new connection has to present the link secret.
const AUTHENTICATE_WITHIN: Duration = Duration::from_secs(5);

/// Reads the connection's first frame: it must be the spec's link secret.
async fn authenticate(shared: &Shared, rd: &mut QuietRead) -> Result<(), String> {
    let Some(want) = shared.spec.link_secret.as_deref() else { return Ok(()) };
    let read = async {
        use tokio::io::AsyncReadExt;
        let mut len = [0u8; 4];
        rd.read_exact(&mut len).await?;
        let len = u32::from_be_bytes(len) as usize;
        if len > MAX_SECRET_FRAME {
            return Err(std::io::Error::other(format!("a first frame of {len} bytes is no secret")));
        }
        let mut frame = vec![0u8; len];
        rd.read_exact(&mut frame).await?;
        Ok(frame)
    };
    let frame = match tokio::time::timeout(AUTHENTICATE_WITHIN, read).await {
        Err(_) => return Err("no secret within 5 s".into()),
        Ok(Err(e)) => return Err(e.to_string()),
        Ok(Ok(f)) => f,
    };
    match ShimFrame::decode_from_device(&frame) {
        Ok(ShimFrame::Request(ShimRequest::Authenticate { secret })) if same(secret.as_bytes(), want.as_bytes()) => Ok(()),
        _ => Err("the first frame was not the link secret".into()),
    }
}

/// Compares two secrets in time that does not depend on where they differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// How a connection follows the output: a forwarder sends it over the connection, or
/// writes it to the terminal the connection handed over.
#[derive(Default)]
struct Following {
    task: Option<JoinHandle<()>>,
    /// Hands back the terminal the task took, if it did.
    releaser: Option<oneshot::Sender<()>>,
}

impl Following {
    fn start(&mut self, task: JoinHandle<()>, releaser: Option<oneshot::Sender<()>>) {
        self.stop();
        (self.task, self.releaser) = (Some(task), releaser);
    }

    fn stop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
        self.releaser = None;
    }

    fn release(&mut self) {
        if let Some(release) = self.releaser.take() {
            let _ = release.send(());
        }
    }
}

/// The connection's two halves, once it has shown the secret.
async fn accept(shared: &Shared, stream: UnixStream) -> Option<(QuietRead, QuietWrite)> {
    let (mut rd, wr) = match QuietStream::new(stream) {
        Ok(s) => s.into_split(),
        Err(e) => {
            tracing::warn!("could not watch a connection to the shim's socket: {e}");
            return None;
        }
    };
    if let Err(why) = authenticate(shared, &mut rd).await {
        tracing::warn!("refused a connection to the shim's socket: {why}");
        return None;
    }
    Some((rd, wr))
}

/// Serves one connected device until it disconnects.
pub fn serve_client(shared: Arc<Shared>, stream: UnixStream) {
    tokio::spawn(async move {
        let Some((mut rd, wr)) = accept(&shared, stream).await else { return };
        shared.clients.fetch_add(1, Ordering::AcqRel);
        let (tx, rx) = mpsc::channel::<Out>(OUT_QUEUE);
        let owed = Arc::new(Owed { shared: shared.clone(), owed: false.into(), follows: 0.into() });
        let writer = tokio::spawn(write_loop(wr, rx, owed.clone()));
        let _ = tx.send(Out::Frame(ShimFrame::Event(hello(&shared)).encode())).await;
        let mut following = Following::default();
        loop {
            let frame = match read_frame(&mut rd).await {
                Ok(Some(f)) => f,
                Ok(None) => break,
                Err(e) => {
                    tracing::warn!("device link: {e}");
                    break;
                }
            };
            match ShimFrame::decode_from_device(&frame) {
                Ok(ShimFrame::Input(bytes)) => {
                    if let Err(e) = shared.queue_input(bytes, false) {
                        tracing::debug!("input dropped: {e}");
                    }
                }
                Ok(ShimFrame::Request(ShimRequest::Subscribe { from_offset })) => {
                    following.stop();
                    // Marks where the old subscription's output ends in the stream.
                    let marker = ShimFrame::Event(ShimEvent::Subscribed { from_offset }).encode();
                    if tx.send(Out::Frame(marker)).await.is_err() {
                        break;
                    }
                    let follow = owed.follow();
                    following.start(tokio::spawn(forward(shared.clone(), tx.clone(), from_offset, follow)), None);
                }
                // A snapshot waits for the screen worker to catch up: answer it on the
                // side so input, stop and release are not held up behind it.
                Ok(ShimFrame::Request(ShimRequest::Snapshot { req, first })) => {
                    let (shared, tx) = (shared.clone(), tx.clone());
                    tokio::spawn(async move { handle(&shared, &tx, ShimRequest::Snapshot { req, first }).await });
                }
                Ok(ShimFrame::Request(ShimRequest::TakeTerminal { from_offset, read_only, detach_key })) => {
                    let Some(tty) = rd.take_fd() else {
                        tracing::warn!("device link: a terminal was offered without its descriptor; closing");
                        break;
                    };
                    let (release, released) = oneshot::channel();
                    let follow = owed.follow();
                    let take = Take { from_offset, read_only, detach_key };
                    let task = tokio::spawn(take_terminal(shared.clone(), tx.clone(), tty, take, (released, follow)));
                    following.start(task, Some(release));
                }
                Ok(ShimFrame::Request(ShimRequest::ReleaseTerminal)) => following.release(),
                Ok(ShimFrame::Request(ShimRequest::Authenticate { .. })) => {}
                Ok(ShimFrame::Request(req)) => handle(&shared, &tx, req).await,
                Ok(_) | Err(_) => {
                    tracing::warn!("device link: unexpected frame; closing");
                    break;
                }
            }
        }
        following.stop();
        drop(tx);
        let _ = writer.await;
        shared.clients.fetch_sub(1, Ordering::AcqRel);
    });
}

fn hello(shared: &Shared) -> ShimEvent {
    let (cols, rows) = *shared.size.lock().expect("size lock");
    ShimEvent::Hello {
        session: shared.spec.session,
        pid: *shared.pid.lock().expect("pid lock"),
        cols,
        rows,
        written: shared.out.lock().expect("out lock").written,
        started_at: shared.started_at.clone(),
        exit: shared.exit(),
        terminal: true,
    }
}

async fn handle(shared: &Arc<Shared>, tx: &mpsc::Sender<Out>, req: ShimRequest) {
    let reply = match req {
        ShimRequest::Subscribe { .. } => None,
        ShimRequest::Resize { cols, rows } => {
            // Told before the program can see the new size, so the recording has the
            // resize ahead of anything drawn for it and of the end, should it exit at once.
            let resized = ShimFrame::Event(ShimEvent::Resized { t_micros: shared.now_micros(), cols, rows });
            let _ = tx.send(Out::Frame(resized.encode())).await;
            // The screen model too, where the stream stands before the terminal changes.
            shared.screen.resize(cols, rows);
            let done = shared.master.lock().expect("master lock").as_ref().map(|m| m.resize(cols, rows));
            if let Some(Err(e)) = done {
                tracing::warn!("resize failed: {e}");
            }
            *shared.size.lock().expect("size lock") = (cols, rows);
            None
        }
        ShimRequest::SendText { req, text } => match send_text(shared, req, &text).await {
            // Queued in order here; its delivery is awaited on the side, so a program that
            // does not read holds up neither this link nor the Stop behind it.
            Queued::Waiting { written, delivered } => {
                let tx = tx.clone();
                tokio::spawn(async move {
                    let event = match written.await {
                        Ok(Ok(())) => delivered,
                        Ok(Err(e)) => ShimEvent::NotDelivered { req, reason: format!("could not write to the terminal: {e}") },
                        Err(_) => ShimEvent::NotDelivered { req, reason: "the program has ended".into() },
                    };
                    let _ = tx.send(Out::Frame(ShimFrame::Event(event).encode())).await;
                });
                None
            }
            Queued::Answered(event) => Some(ShimFrame::Event(event)),
        },
        ShimRequest::Stop { grace_ms } => {
            child::stop(shared.clone(), Duration::from_millis(grace_ms));
            None
        }
        ShimRequest::Snapshot { req, first } => if first { shared.screen.snapshot_now().await } else { shared.screen.snapshot().await }
            .map(|s| ShimFrame::Snapshot(Snapshot { req, offset: s.offset, cols: s.cols, rows: s.rows, data: s.data })),
        ShimRequest::Viewers { interactive } => {
            shared.interactive_viewers.store(interactive, Ordering::Release);
            None
        }
        ShimRequest::Release => {
            shared.released.notify_one();
            None
        }
        ShimRequest::Authenticate { .. } | ShimRequest::TakeTerminal { .. } | ShimRequest::ReleaseTerminal => None,
    };
    if let Some(frame) = reply {
        let _ = tx.send(Out::Frame(frame.encode())).await;
    }
}

/// Serves the terminal `tty` (see [`terminal`]), then tells the connection why it no
/// longer does.
async fn take_terminal(
    shared: Arc<Shared>,
    tx: mpsc::Sender<Out>,
    tty: std::os::fd::OwnedFd,
    take: Take,
    (released, follow): (oneshot::Receiver<()>, u64),
) {
    let event = match terminal::serve(&shared, tty, take, released).await {
        Ended::Exited(exit) => ShimEvent::Exited(exit),
        Ended::Detached => ShimEvent::TerminalReleased { detached: true },
        Ended::Released => ShimEvent::TerminalReleased { detached: false },
        Ended::Failed(why) => {
            tracing::warn!("a viewer's terminal: {why}");
            ShimEvent::TerminalReleased { detached: false }
        }
    };
    let _ = tx.send(Out::End(ShimFrame::Event(event).encode(), follow)).await;
}

/// Text to send, once queued for the program.
enum Queued {
    /// Queued: `delivered` is the event to send once `written` says it was written.
    Waiting { written: tokio::sync::oneshot::Receiver<std::io::Result<()>>, delivered: ShimEvent },
    /// Not queued: the answer now.
    Answered(ShimEvent),
}

async fn send_text(shared: &Shared, req: u64, text: &str) -> Queued {
    if shared.exit().is_some() {
        return Queued::Answered(ShimEvent::NotDelivered { req, reason: "the session has ended".into() });
    }
    let bracketed_paste = shared.screen.modes().await.map(|m| m.bracketed_paste).unwrap_or(false);
    let bytes = match drover_core::input::encode(text, bracketed_paste) {
        Ok(b) => b,
        Err(e) => return Queued::Answered(ShimEvent::NotDelivered { req, reason: e.to_string() }),
    };
    let offset = shared.out.lock().expect("out lock").written;
    let t_micros = shared.now_micros();
    match shared.queue_input(bytes, true) {
        Ok(Some(written)) => Queued::Waiting { written, delivered: ShimEvent::Delivered { req, bracketed_paste, offset, t_micros } },
        Ok(None) => Queued::Answered(ShimEvent::Delivered { req, bracketed_paste, offset, t_micros }),
        Err(e) => Queued::Answered(ShimEvent::NotDelivered { req, reason: format!("could not write to the terminal: {e}") }),
    }
}

/// Sends output from `next` on, then the exit (the end of `follow`), waking whenever
/// something changes.
async fn forward(shared: Arc<Shared>, tx: mpsc::Sender<Out>, mut next: u64, follow: u64) {
    let mut changed = shared.changed.subscribe();
    let mut exit_sent = false;
    let mut error_sent = false;
    loop {
        changed.borrow_and_update();
        match shared.next_output(next, MAX_OUTPUT_FRAME) {
            Next::Data(piece) => {
                next = piece.offset + piece.data.len() as u64;
                if tx.send(Out::Output { offset: piece.offset, t_micros: piece.t_micros, data: piece.data }).await.is_err() {
                    return;
                }
                continue;
            }
            Next::Gap(to) => {
                tracing::warn!("output {next}..{to} is no longer available");
                next = to;
                continue;
            }
            Next::Wait => {}
        }
        if !error_sent {
            let failed = shared.out.lock().expect("out lock").failed.clone();
            if let Some(message) = failed {
                error_sent = true;
                let _ = tx.send(Out::Frame(ShimFrame::Event(ShimEvent::RecordingError { message }).encode())).await;
            }
        }
        if !exit_sent {
            if let Some(exit) = shared.exit() {
                if next >= exit.final_offset {
                    exit_sent = true;
                    let _ = tx.send(Out::End(ShimFrame::Event(ShimEvent::Exited(exit)).encode(), follow)).await;
                }
            }
        }
        if changed.changed().await.is_err() {
            return;
        }
    }
}

async fn write_loop(wr: QuietWrite, rx: mpsc::Receiver<Out>, owed: Arc<Owed>) {
    let _ = write_all(BufWriter::with_capacity(128 * 1024, wr), rx, &owed).await;
    owed.settle(None);
}

/// Writes what is queued until the connection or the queue closes.
async fn write_all(mut wr: BufWriter<QuietWrite>, mut rx: mpsc::Receiver<Out>, owed: &Owed) -> std::io::Result<()> {
    while let Some(item) = rx.recv().await {
        let res = match &item {
            Out::Output { offset, t_micros, data } => write_frame(&mut wr, &[&output_header(*offset, *t_micros), data]).await,
            Out::Frame(f) | Out::End(f, _) => write_frame(&mut wr, &[f]).await,
        };
        res.map_err(std::io::Error::other)?;
        if let Out::End(_, follow) = item {
            wr.flush().await?;
            owed.settle(Some(follow));
        } else if rx.is_empty() {
            wr.flush().await?;
        }
    }
    wr.flush().await
}

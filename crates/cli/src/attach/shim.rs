//! The local path of `drover session attach`: when the session runs on this machine,
//! under this user, attach goes straight to its shim, as `tmux attach` goes to its own
//! server: it hands the shim its terminal, or, when that cannot be, takes the bytes from
//! the shim's socket and sends the keys there. The server still opens the
//! terminal: it decides who may drop in, counts the viewer, resizes the session, says how
//! it ended and closes the terminal when the right is revoked, and attach then drops this
//! connection too. It grants nothing the operating system does not already give this
//! user, who can read the session's link secret and reach its socket anyway.

use std::os::fd::BorrowedFd;
use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use drover_core::SessionId;
use drover_protocol::frame::{write_frame, FrameReader};
use drover_protocol::shim::{ShimEvent, ShimFrame, ShimRequest};
use drover_term::dir::SessionDir;
use drover_term::quiet::{QuietRead, QuietStream, QuietWrite};

/// How long the shim has to say hello and to answer a snapshot.
const ANSWER_WITHIN: Duration = Duration::from_secs(2);
/// How long the first screen waits for the session to take the size attach asked for.
const SIZE_WITHIN: Duration = Duration::from_secs(1);

/// What the shim sends a local view.
#[derive(Debug)]
pub enum ShimOut {
    /// Terminal bytes, following on from what came before.
    Bytes(Bytes),
    /// The program ended and every byte it wrote has come.
    Exited,
    /// The connection to the shim closed without the end: why.
    Lost(String),
    /// The shim no longer touches the terminal it took: the detach key was typed
    /// (`detached`), or it could not use the terminal or was asked to let go.
    Released {
        /// The detach key was typed.
        detached: bool,
    },
}

/// A view of a session straight from its shim: its output comes over the connection
/// ([`ShimView::follow`]), read where it is used rather than by a task of its own, or the
/// shim takes this terminal and writes it there itself ([`ShimView::hand_terminal`]), as
/// `tmux attach` hands its terminal to the tmux server, so a keystroke and its echo wake
/// only the shim.
pub struct ShimView {
    wr: QuietWrite,
    frames: FrameReader<QuietRead>,
    /// The screen to draw first, until it is taken.
    screen: Option<Bytes>,
    /// Where the screen stands in the output.
    offset: u64,
    /// The shim can take a terminal.
    takes_terminal: bool,
    /// The shim has this terminal now.
    holds_terminal: bool,
    /// The end was handed on: nothing follows it.
    ended: bool,
}

/// Where a device on this machine (`drover up`'s own, or a `drover device` daemon's)
/// serves a session now: its directories that hold the shim's socket.
pub struct Served {
    session: SessionId,
    dirs: Vec<SessionDir>,
}

/// Where session `id` is served on this machine, if it looks served here (its shim's
/// socket is there): then attach asks the server for the local path.
pub fn served_here(home: &Path, id: &str) -> Option<Served> {
    let session: SessionId = id.parse().ok()?;
    let dirs: Vec<SessionDir> = ["device", "device-daemon"]
        .iter()
        .map(|device| SessionDir::new(home.join(device).join("sessions").join(session.to_string())))
        .filter(|dir| dir.socket().exists())
        .collect();
    (!dirs.is_empty()).then_some(Served { session, dirs })
}

impl ShimView {
    /// Opens a view of the session `served` here from its shim, if it runs under this
    /// user; the first thing it hands on is the screen to draw. `size` is the size attach
    /// asked the server for; the first screen waits (briefly) for it.
    pub async fn open(served: &Served, size: Option<(u16, u16)>) -> Option<ShimView> {
        let id = served.session;
        for dir in &served.dirs {
            match tokio::time::timeout(ANSWER_WITHIN * 2, Self::open_in(dir, id, size)).await {
                Ok(Ok(opened)) => return Some(opened),
                Ok(Err(why)) => tracing::debug!("no local view of {id} in {}: {why}", dir.root().display()),
                Err(_) => tracing::debug!("no local view of {id} in {}: the shim did not answer", dir.root().display()),
            }
        }
        None
    }

    async fn open_in(dir: &SessionDir, id: SessionId, size: Option<(u16, u16)>) -> Result<ShimView, String> {
        let stream = drover_device::connect_existing(dir).await.ok_or("its socket refused the connection")?;
        // Watched for reading only: the shim reading a keystroke does not wake attach.
        let (rd, mut wr) = QuietStream::new(stream).map_err(|e| format!("cannot watch its socket: {e}"))?.into_split();
        let mut rd = FrameReader::new(rd);
        let takes_terminal = match next_frame(&mut rd).await? {
            ShimFrame::Event(ShimEvent::Hello { session, exit: None, terminal, .. }) if session == id => terminal,
            ShimFrame::Event(ShimEvent::Hello { exit: Some(_), .. }) => return Err("the session has ended".into()),
            other => return Err(format!("not the session's shim: {other:?}")),
        };
        let snapshot = first_screen(&mut rd, &mut wr, size).await?;
        Ok(ShimView {
            wr,
            frames: rd,
            screen: Some(snapshot.data.into()),
            offset: snapshot.offset,
            takes_terminal,
            holds_terminal: false,
            ended: false,
        })
    }

    /// The screen to draw before anything else (once).
    pub fn take_screen(&mut self) -> Option<Bytes> {
        self.screen.take()
    }

    /// Whether the shim can take a terminal.
    pub fn takes_terminal(&self) -> bool {
        self.takes_terminal
    }

    /// Whether the shim has this terminal now.
    pub fn holds_terminal(&self) -> bool {
        self.holds_terminal && !self.ended
    }

    /// Asks for the output after the screen over this connection.
    pub async fn follow(&mut self) -> Result<(), String> {
        send(&mut self.wr, ShimFrame::Request(ShimRequest::Subscribe { from_offset: self.offset })).await
    }

    /// Hands the terminal `tty` (raw, its screen drawn) to the shim, which writes the
    /// output after the screen to it and sends the program the keys typed there, until
    /// `detach_key`, [`ShimView::release`] or the end.
    pub async fn hand_terminal(&mut self, tty: BorrowedFd<'_>, read_only: bool, detach_key: u8) -> Result<(), String> {
        let take = ShimFrame::Request(ShimRequest::TakeTerminal { from_offset: self.offset, read_only, detach_key });
        self.wr.send_frame_with_fd(&take.encode(), tty).await.map_err(|e| format!("handing the terminal to the shim: {e}"))?;
        self.holds_terminal = true;
        Ok(())
    }

    /// Takes the terminal back from the shim: once this returns, the shim no longer
    /// touches it (or, after [`ANSWER_WITHIN`] without its word, this end of the
    /// connection is shut, which ends its hold as it reads the end, and this view with it).
    pub async fn release(&mut self) {
        if !self.holds_terminal() {
            return;
        }
        let _ = send(&mut self.wr, ShimFrame::Request(ShimRequest::ReleaseTerminal)).await;
        let until = tokio::time::Instant::now() + ANSWER_WITHIN;
        while !self.ended {
            if tokio::time::timeout_at(until, self.next()).await.is_err() {
                use tokio::io::AsyncWriteExt;
                let _ = self.wr.shutdown().await;
                self.ended = true;
            }
        }
        self.holds_terminal = false;
    }

    /// Sends keystrokes to the program.
    pub async fn send_keys(&mut self, keys: Vec<u8>) -> Result<(), String> {
        send(&mut self.wr, ShimFrame::Input(keys)).await
    }

    /// Whether the end, or the connection's loss, was handed on: nothing follows it.
    pub fn done(&self) -> bool {
        self.ended
    }

    /// The next thing the shim sends (cancel-safe). After the end, the terminal's
    /// release or the connection's loss, it waits for ever.
    pub async fn next(&mut self) -> ShimOut {
        if self.ended {
            return std::future::pending().await;
        }
        let out = loop {
            break match self.frames.next().await {
                Ok(Some(frame)) => match ShimFrame::decode_shared_from_shim(&frame) {
                    Ok(ShimFrame::Output { data, .. }) => ShimOut::Bytes(data),
                    Ok(ShimFrame::Event(ShimEvent::Exited(_))) => ShimOut::Exited,
                    Ok(ShimFrame::Event(ShimEvent::TerminalReleased { detached })) => ShimOut::Released { detached },
                    Ok(_) => continue,
                    // As the device does: a shim of another build may send more.
                    Err(e) => {
                        tracing::debug!("skipped a frame from the shim: {e}");
                        continue;
                    }
                },
                Ok(None) => ShimOut::Lost("the shim closed the connection".into()),
                Err(e) => ShimOut::Lost(format!("reading from the shim: {e}")),
            };
        };
        self.ended = !matches!(out, ShimOut::Bytes(_));
        out
    }
}

/// The session's screen once it has the size asked for (or, after [`SIZE_WITHIN`], as
/// it is): the server resizes the session on attach, through the device, and a screen
/// drawn for the old size would be drawn over at once.
async fn first_screen(
    rd: &mut FrameReader<QuietRead>,
    wr: &mut QuietWrite,
    size: Option<(u16, u16)>,
) -> Result<drover_protocol::shim::Snapshot, String> {
    let give_up = tokio::time::Instant::now() + SIZE_WITHIN;
    for req in 1.. {
        send(wr, ShimFrame::Request(ShimRequest::Snapshot { req, first: true })).await?;
        let snapshot = loop {
            match next_frame(rd).await? {
                ShimFrame::Snapshot(s) if s.req == req => break s,
                _ => {}
            }
        };
        let sized = size.is_none_or(|(c, r)| (snapshot.cols, snapshot.rows) == (c, r));
        if sized || tokio::time::Instant::now() >= give_up {
            return Ok(snapshot);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    unreachable!("request ids do not run out")
}

/// The next frame from the shim, within [`ANSWER_WITHIN`].
async fn next_frame(rd: &mut FrameReader<QuietRead>) -> Result<ShimFrame, String> {
    match tokio::time::timeout(ANSWER_WITHIN, rd.next()).await {
        Err(_) => Err("the shim did not answer".into()),
        Ok(Err(e)) => Err(e.to_string()),
        Ok(Ok(None)) => Err("the shim closed the connection".into()),
        Ok(Ok(Some(f))) => ShimFrame::decode_shared_from_shim(&f).map_err(|e| e.to_string()),
    }
}

async fn send(wr: &mut QuietWrite, frame: ShimFrame) -> Result<(), String> {
    write_frame(wr, &[&frame.encode()]).await.map_err(|e| format!("writing to the shim: {e}"))
}

//! `drover session attach`: this terminal becomes a view of the session. Output is
//! written as it comes (a snapshot first); keystrokes go straight to the program and are
//! not audited; window resizes follow; Ctrl-] detaches and leaves the session running.
//! When the session runs on this machine under this user, its bytes and keys take the
//! local path ([`shim`]); the server still opens, checks and ends the terminal.
//!
//! A dropped connection (the server restarting) is retried with backoff, as the web
//! terminal does: a status shows on the bottom row meanwhile, and once connected again
//! the server's fresh snapshot repaints the screen, so nothing is lost or doubled.

use std::io::IsTerminal;
use std::io::Write;
use std::os::fd::{AsFd, AsRawFd};
use std::process::ExitCode;

use anyhow::{anyhow, bail, Result};
use drover_api::ErrorBody;
use drover_protocol::viewer::{ViewerCommand, ViewerEvent};
use futures_util::{SinkExt, StreamExt};
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncReadExt, Interest};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::{self, Message};

use crate::client::{seg, Attempt, Client};
use crate::reconnect::{Backoff, Place, Status};

mod shim;
use shim::{ShimOut, ShimView};

/// The key that detaches: Ctrl-] (0x1d), as in telnet.
pub const DETACH_KEY: u8 = 0x1d;

/// Puts the terminal back as it was (cooked mode, main screen, cursor, no mouse modes).
const RESTORE: &[u8] = b"\x1b[0m\x1b[?1049l\x1b[?25h\x1b[?2004l\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1006l\x1b[?1l\x1b>";

type Socket = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

struct RawMode(bool);

impl Drop for RawMode {
    fn drop(&mut self) {
        if self.0 {
            let _ = crossterm::terminal::disable_raw_mode();
        }
    }
}

/// How a connection to the session came to an end.
enum End {
    /// For good: the message to print.
    Done(String),
    /// The connection dropped: why.
    Lost(String),
}

/// This terminal's side: its size, keystrokes and window changes.
struct Local {
    tty: bool,
    read_only: bool,
    /// Drover's home, where the local path looks for the session (None: never local).
    home: Option<std::path::PathBuf>,
    /// A shim could not use this terminal: later views follow over the connection.
    lend_failed: bool,
    stdout: std::io::Stdout,
    keys: Keys,
    winch: tokio::signal::unix::Signal,
}

impl Local {
    /// The window size to ask for, when this is a terminal that reports one (a terminal
    /// that reports 0x0, e.g. under `script`, keeps the session's size).
    fn size(&self) -> Option<(u16, u16)> {
        if !self.tty {
            return None;
        }
        crossterm::terminal::size().ok().filter(|(c, r)| *c >= 2 && *r >= 1)
    }
}

/// Keystrokes from stdin.
struct Keys {
    stdin: Stdin,
    buf: Vec<u8>,
    open: bool,
}

/// Where keystrokes are read from.
enum Stdin {
    /// A terminal, watched by the runtime: a key wakes the task that sends it, with no
    /// thread between.
    Tty(AsyncFd<std::io::Stdin>),
    /// Anything else, read on tokio's blocking threads.
    Other(tokio::io::Stdin),
    /// The terminal, not watched while the shim has it (no key wakes attach then).
    Lent,
}

impl Stdin {
    fn new() -> Stdin {
        if std::io::stdin().is_terminal() {
            // SAFETY: descriptor 0 stays open for as long as the process runs.
            if let Ok(fd) = unsafe { AsyncFd::register_with_interest(std::io::stdin(), Interest::READABLE) } {
                return Stdin::Tty(fd);
            }
        }
        Stdin::Other(tokio::io::stdin())
    }

    /// Reads what was typed (cancel-safe).
    async fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let fd = match self {
            Stdin::Other(stdin) => return stdin.read(buf).await,
            Stdin::Lent => return std::future::pending().await,
            Stdin::Tty(fd) => fd,
        };
        loop {
            let mut ready = fd.readable().await?;
            if let Ok(read) = ready.try_io(|stdin| read_waiting(stdin.get_ref(), buf)) {
                return read;
            }
        }
    }
}

/// Reads what is waiting on the terminal `stdin` without blocking, though the terminal
/// stays blocking (the shell shares it): as many bytes as it says it holds, or the end
/// once it says it has hung up; `WouldBlock` when it holds none (another reader of the
/// same terminal took them).
fn read_waiting(stdin: &std::io::Stdin, buf: &mut [u8]) -> std::io::Result<usize> {
    let fd = stdin.as_raw_fd();
    let mut poll = [nix::poll::PollFd::new(stdin.as_fd(), nix::poll::PollFlags::POLLIN)];
    if nix::poll::poll(&mut poll, nix::poll::PollTimeout::ZERO)? == 0 {
        return Err(std::io::ErrorKind::WouldBlock.into());
    }
    let ended = poll[0].revents().is_some_and(|r| r.intersects(nix::poll::PollFlags::POLLHUP | nix::poll::PollFlags::POLLERR));
    let mut waiting: libc::c_int = 0;
    // SAFETY: FIONREAD writes one int, the count of bytes waiting, into `waiting`.
    if unsafe { libc::ioctl(fd, libc::FIONREAD, &mut waiting) } == -1 {
        return Err(std::io::Error::last_os_error());
    }
    let take = match (usize::try_from(waiting).unwrap_or(0), ended) {
        (0, false) => return Err(std::io::ErrorKind::WouldBlock.into()),
        (0, true) => buf.len(),
        (n, _) => n.min(buf.len()),
    };
    nix::unistd::read(fd, &mut buf[..take]).map_err(std::io::Error::from)
}

impl Keys {
    /// Stops reading the terminal while the shim has it; false if this is not a
    /// terminal watched by the runtime (then it is not lent).
    fn lend(&mut self) -> bool {
        match self.stdin {
            Stdin::Tty(_) => {
                self.stdin = Stdin::Lent;
                true
            }
            Stdin::Lent => true,
            Stdin::Other(_) => false,
        }
    }

    /// Reads the terminal again once the shim has let go of it.
    fn take_back(&mut self) {
        if matches!(self.stdin, Stdin::Lent) {
            self.stdin = Stdin::new();
        }
    }

    /// Reads keystrokes: the keys to send (before any detach key) and whether to detach;
    /// None once stdin is closed.
    async fn read(&mut self) -> Option<(Vec<u8>, bool)> {
        match self.stdin.read(&mut self.buf).await {
            Ok(0) | Err(_) => {
                self.open = false;
                None
            }
            Ok(n) => {
                let input = &self.buf[..n];
                Some(match input.iter().position(|b| *b == DETACH_KEY) {
                    Some(i) => (input[..i].to_vec(), true),
                    None => (input.to_vec(), false),
                })
            }
        }
    }
}

/// One connection to the session: the server's terminal socket and, on the local path,
/// the session's shim, which then carries the bytes and keys.
struct Conn {
    ws: Socket,
    shim: Option<ShimView>,
}

/// Attaches to the session `id`; `via_server` keeps the bytes on the server's path even
/// when the session runs here.
pub async fn attach(client: &Client, id: &str, read_only: bool, via_server: bool) -> Result<ExitCode> {
    let tty = std::io::stdin().is_terminal() && std::io::stdout().is_terminal();
    let winch = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::window_change())?;
    let keys = Keys { stdin: Stdin::new(), buf: vec![0u8; 8192], open: true };
    let home = if via_server { None } else { crate::home::home().ok() };
    let mut local = Local { tty, read_only, home, lend_failed: false, stdout: std::io::stdout(), keys, winch };
    // The first connection is not retried: nothing to reattach to yet.
    let mut conn = open(client, id, &local).await.map_err(|e| match e {
        Attempt::Retry(why) => anyhow!("cannot reach the Drover server at {} ({why}): is `drover up` running?", client.url),
        Attempt::Fail(e) => e,
    })?;
    if tty {
        eprint!("[attached to {id}{}; detach with Ctrl-]]\r\n", if read_only { ", read-only" } else { "" });
    }
    let raw = RawMode(tty && crossterm::terminal::enable_raw_mode().is_ok());
    let ending = follow(client, id, &mut local, &mut conn).await;
    if tty {
        local.stdout.write_all(RESTORE)?;
    }
    local.stdout.flush()?;
    drop(raw);
    match ending {
        Ok(message) => {
            eprintln!("\r\n{message}");
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            eprint!("\r\n");
            Err(e)
        }
    }
}

/// Follows the session across reconnects until it ends, the viewer detaches, or the
/// server cannot be reached again.
async fn follow(client: &Client, id: &str, local: &mut Local, conn: &mut Conn) -> Result<String> {
    let rows = local.size().map(|(_, r)| r).unwrap_or(24);
    let mut status = Status::new(if local.tty { Place::BottomRow(rows) } else { Place::Line });
    let mut backoff = Backoff::default();
    loop {
        let mut why = match session(id, local, conn).await? {
            End::Done(message) => return Ok(message),
            End::Lost(why) => why,
        };
        loop {
            let Some(delay) = backoff.failed() else {
                bail!("lost the connection to {id} and could not reconnect: {why}");
            };
            status.reconnecting(&why, backoff.attempt(), delay);
            if wait_or_detach(local, delay).await {
                status.connected();
                return Ok(detached(id));
            }
            match open(client, id, local).await {
                Ok(again) => {
                    *conn = again;
                    backoff.reset();
                    status.connected();
                    break;
                }
                Err(Attempt::Retry(w)) => why = w,
                Err(Attempt::Fail(e)) => {
                    status.connected();
                    bail!("could not reattach to {id}: {e}");
                }
            }
        }
    }
}

/// Waits `delay`, dropping keystrokes (there is nowhere to send them); true if the
/// detach key was pressed meanwhile.
async fn wait_or_detach(local: &mut Local, delay: std::time::Duration) -> bool {
    let sleep = tokio::time::sleep(delay);
    tokio::pin!(sleep);
    loop {
        tokio::select! {
            _ = &mut sleep => return false,
            keys = local.keys.read(), if local.keys.open => {
                if keys.is_some_and(|(_, detach)| detach) {
                    return true;
                }
            }
        }
    }
}

fn detached(id: &str) -> String {
    format!("[detached from {id}; it keeps running — `drover session attach {id}` to return]")
}

/// Opens the session's terminal: the server's socket, then, when the session runs here,
/// its shim (a shim that cannot be had after all leaves the server's path).
async fn open(client: &Client, id: &str, local: &Local) -> Result<Conn, Attempt> {
    let size = local.size().filter(|_| !local.read_only);
    let Some(served) = local.home.as_deref().and_then(|home| shim::served_here(home, id)) else {
        return Ok(Conn { ws: connect(client, id, local.read_only, size, false).await?, shim: None });
    };
    let mut ws = connect(client, id, local.read_only, size, true).await?;
    match ShimView::open(&served, size).await {
        Some(view) => Ok(Conn { ws, shim: Some(view) }),
        None => {
            let _ = ws.close(None).await;
            Ok(Conn { ws: connect(client, id, local.read_only, size, false).await?, shim: None })
        }
    }
}

/// Opens the terminal socket, asking for `size`; `local`: the bytes come from the shim.
async fn connect(client: &Client, id: &str, read_only: bool, size: Option<(u16, u16)>, local: bool) -> Result<Socket, Attempt> {
    let mut url = client.ws_url(&format!("/api/v1/sessions/{}/terminal?read_only={read_only}&local={local}", seg(id)));
    if let Some((c, r)) = size {
        url.push_str(&format!("&cols={c}&rows={r}"));
    }
    let fail = |e: anyhow::Error| Attempt::Fail(e);
    let mut request = url.as_str().into_client_request().map_err(|e| fail(e.into()))?;
    let bearer = format!("Bearer {}", client.token).parse().map_err(|_| fail(anyhow!("the token is not a valid header value")))?;
    request.headers_mut().insert("authorization", bearer);
    let connector = tokio_tungstenite::Connector::Rustls(crate::client::tls_config().map_err(fail)?);
    match tokio_tungstenite::connect_async_tls_with_config(request, None, true, Some(connector)).await {
        Ok((ws, _)) => Ok(ws),
        Err(tungstenite::Error::Http(resp)) if resp.status().is_server_error() => {
            Err(Attempt::Retry(format!("the server answered {}", resp.status())))
        }
        Err(tungstenite::Error::Http(resp)) => {
            let body = resp.body().as_deref().unwrap_or_default();
            Err(fail(match serde_json::from_slice::<ErrorBody>(body) {
                Ok(b) => anyhow!(b.error),
                Err(_) => anyhow!("the server refused to attach: HTTP {}", resp.status()),
            }))
        }
        // A certificate problem (however the socket layer wraps it) will not go away by
        // retrying: say what is wrong at once.
        Err(e) => match drover_tls::explain::tls_problem(&e) {
            Some(_) => Err(fail(crate::client::unreachable(&client.url, &e))),
            None => Err(Attempt::Retry(crate::client::connection_trouble(&e))),
        },
    }
}

/// How long, at a session's end, attach waits for more of the shim's last output (once
/// the server said it ended) or for the server's word (once the shim's connection closed).
const LAST_OUTPUT_WITHIN: std::time::Duration = std::time::Duration::from_secs(2);

/// How long, at a session's end, attach waits for the shim that has the terminal to
/// write the rest of the output to it (a slow terminal takes its time).
const TERMINAL_TAIL_WITHIN: std::time::Duration = std::time::Duration::from_secs(15);

/// One connection's life. On the local path, the shim's view is started first (the
/// screen drawn, then the terminal handed to the shim, or its output followed here), and
/// the terminal is taken back from the shim before anything else is written to it.
async fn session(id: &str, local: &mut Local, conn: &mut Conn) -> Result<End> {
    let started = match conn.shim.as_mut() {
        Some(view) => start_view(local, view).await,
        None => Ok(()),
    };
    let end = match started {
        Ok(()) => serve(id, local, conn).await,
        Err(why) => Ok(End::Lost(why)),
    };
    if let Some(view) = conn.shim.as_mut() {
        view.release().await;
    }
    local.keys.take_back();
    end
}

/// Draws the shim's first screen, then hands it this terminal when it can take it (the
/// one terminal attach reads and writes, raw), or asks for the output over the
/// connection.
async fn start_view(local: &mut Local, view: &mut ShimView) -> Result<(), String> {
    if let Some(screen) = view.take_screen() {
        write_out(local, &screen).map_err(|e| e.to_string())?;
    }
    let terminal = match local.tty && !local.lend_failed && view.takes_terminal() {
        true => terminal_for_the_shim(),
        false => None,
    };
    let Some(terminal) = terminal.filter(|_| local.keys.lend()) else { return view.follow().await };
    view.hand_terminal(terminal.as_fd(), local.read_only, DETACH_KEY).await
}

/// This terminal opened again for the shim (its own open file, which it makes
/// non-blocking), when attach's input and output are that one terminal.
fn terminal_for_the_shim() -> Option<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let device = |fd: std::os::fd::BorrowedFd<'_>| nix::sys::stat::fstat(fd.as_raw_fd()).ok().map(|st| st.st_rdev);
    let (input, output) = (device(std::io::stdin().as_fd()), device(std::io::stdout().as_fd()));
    if input.is_none() || input != output {
        return None;
    }
    let opened = std::fs::OpenOptions::new().read(true).write(true).custom_flags(libc::O_NOCTTY | libc::O_NONBLOCK).open("/proc/self/fd/0");
    match opened {
        Ok(file) if file.is_terminal() => Some(file),
        Ok(_) => None,
        Err(e) => {
            tracing::debug!("the terminal cannot be opened again for the shim ({e}); its output comes over the socket");
            None
        }
    }
}

/// Output to the terminal, keys and resizes to the session, until the connection ends.
async fn serve(id: &str, local: &mut Local, conn: &mut Conn) -> Result<End> {
    let Conn { ws, shim } = conn;
    loop {
        tokio::select! {
            msg = ws.next() => match msg {
                // On the local path the shim has the bytes: the server sends none.
                Some(Ok(Message::Binary(b))) if shim.is_none() => write_out(local, &b)?,
                Some(Ok(Message::Text(t))) => match serde_json::from_str::<ViewerEvent>(&t) {
                    Ok(ViewerEvent::Ended { outcome, exit_code, reason }) => {
                        if let Some(view) = shim.as_mut() {
                            last_output(local, view).await?;
                        }
                        return Ok(End::Done(ended(id, outcome, exit_code, reason)));
                    }
                    Ok(ViewerEvent::Error { message }) => eprint!("\r\n[drover: {}]\r\n", crate::table::sanitize(&message)),
                    Ok(_) | Err(_) => {}
                },
                Some(Ok(Message::Close(_))) | None => return Ok(End::Lost("the server closed the connection".into())),
                Some(Err(e)) => return Ok(End::Lost(crate::client::connection_trouble(&e))),
                Some(Ok(_)) => {}
            },
            out = async { shim.as_mut().expect("on the local path").next().await }, if shim.is_some() => match out {
                ShimOut::Bytes(b) => write_out(local, &b)?,
                // Everything is on screen: the server says how it ended.
                ShimOut::Exited => {}
                ShimOut::Lost(why) => return Ok(shim_gone(id, ws, why).await),
                ShimOut::Released { detached: true } => {
                    let _ = ws.send(Message::Close(None)).await;
                    return Ok(End::Done(detached(id)));
                }
                ShimOut::Released { detached: false } => {
                    local.lend_failed = true;
                    return Ok(End::Lost("the session's shim could not use this terminal".into()));
                }
            },
            keys = local.keys.read(), if local.keys.open => {
                let Some((keys, detach)) = keys else { continue };
                if !local.read_only && !keys.is_empty() {
                    let sent = match shim.as_mut() {
                        Some(view) => view.send_keys(keys).await.is_ok(),
                        None => ws.send(Message::Binary(keys.into())).await.is_ok(),
                    };
                    if !sent {
                        return Ok(End::Lost("the connection dropped while sending keys".into()));
                    }
                }
                if detach {
                    let _ = ws.send(Message::Close(None)).await;
                    return Ok(End::Done(detached(id)));
                }
            }
            _ = local.winch.recv() => {
                if let (Ok((cols @ 2.., rows @ 1..)), false) = (crossterm::terminal::size(), local.read_only) {
                    let cmd = serde_json::to_string(&ViewerCommand::Resize { cols, rows })?;
                    if ws.send(Message::Text(cmd.into())).await.is_err() {
                        return Ok(End::Lost("the connection dropped while resizing".into()));
                    }
                }
            }
        }
    }
}

/// Writes session output to the terminal; a blocking write is the natural backpressure.
fn write_out(local: &mut Local, bytes: &[u8]) -> Result<()> {
    local.stdout.write_all(bytes)?;
    local.stdout.flush()?;
    Ok(())
}

/// Writes what the shim still has before the end, however long a slow terminal takes
/// to show it, as long as the shim keeps sending (it stops for [`LAST_OUTPUT_WITHIN`]
/// only if it is gone).
async fn last_output(local: &mut Local, view: &mut ShimView) -> Result<()> {
    // The shim writes to a terminal it has with no word until the end.
    let within = if view.holds_terminal() { TERMINAL_TAIL_WITHIN } else { LAST_OUTPUT_WITHIN };
    while !view.done() {
        match tokio::time::timeout(within, view.next()).await {
            Ok(ShimOut::Bytes(b)) => write_out(local, &b)?,
            _ => break,
        }
    }
    Ok(())
}

/// The shim's connection closed before its end: when the session has just ended (a
/// released shim exits at once), the server says so in a moment, and that is the end
/// rather than a connection to retry.
async fn shim_gone(id: &str, ws: &mut Socket, why: String) -> End {
    let until = tokio::time::Instant::now() + LAST_OUTPUT_WITHIN;
    while let Ok(Some(Ok(msg))) = tokio::time::timeout_at(until, ws.next()).await {
        if let Message::Text(t) = msg {
            if let Ok(ViewerEvent::Ended { outcome, exit_code, reason }) = serde_json::from_str::<ViewerEvent>(&t) {
                return End::Done(ended(id, outcome, exit_code, reason));
            }
        }
    }
    End::Lost(why)
}

/// What attach prints when the session ended.
fn ended(id: &str, outcome: drover_core::Outcome, exit_code: Option<i32>, reason: Option<String>) -> String {
    let code = exit_code.map(|c| format!(", exit code {c}")).unwrap_or_default();
    let why = reason.map(|r| format!(": {r}")).unwrap_or_default();
    crate::table::sanitize(&format!("[session {id} ended: {outcome}{code}{why}]"))
}

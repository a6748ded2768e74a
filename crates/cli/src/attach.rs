//! `drover session attach`: this terminal becomes a view of the session. Output is
//! written as it comes (a snapshot first); keystrokes go straight to the program and are
//! not audited; window resizes follow; Ctrl-] detaches and leaves the session running.

use std::io::IsTerminal;
use std::process::ExitCode;

use anyhow::{anyhow, bail, Result};
use drover_protocol::api::ErrorBody;
use drover_protocol::viewer::{ViewerCommand, ViewerEvent};
use futures_util::{SinkExt, StreamExt};
use std::io::Write;

use tokio::io::AsyncReadExt;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;

use crate::client::{seg, Client};

/// The key that detaches: Ctrl-] (0x1d), as in telnet.
pub const DETACH_KEY: u8 = 0x1d;

/// Puts the terminal back as it was (cooked mode, main screen, cursor, no mouse modes).
const RESTORE: &[u8] = b"\x1b[0m\x1b[?1049l\x1b[?25h\x1b[?2004l\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1006l\x1b[?1l\x1b>";

struct RawMode(bool);

impl Drop for RawMode {
    fn drop(&mut self) {
        if self.0 {
            let _ = crossterm::terminal::disable_raw_mode();
        }
    }
}

/// Attaches to the session `id`.
pub async fn attach(client: &Client, id: &str, read_only: bool) -> Result<ExitCode> {
    let tty = std::io::stdin().is_terminal() && std::io::stdout().is_terminal();
    // A terminal that reports no size (0x0, e.g. under `script`) keeps the session's size.
    let size = if tty { crossterm::terminal::size().ok().filter(|(c, r)| *c >= 2 && *r >= 1) } else { None };
    let mut url = client.ws_url(&format!("/api/v1/sessions/{}/terminal?read_only={read_only}", seg(id)));
    if let (Some((c, r)), false) = (size, read_only) {
        url.push_str(&format!("&cols={c}&rows={r}"));
    }
    let mut request = url.as_str().into_client_request()?;
    request.headers_mut().insert("authorization", format!("Bearer {}", client.token).parse()?);
    let connector = tokio_tungstenite::Connector::Rustls(crate::client::tls_config()?);
    let (ws, _) = tokio_tungstenite::connect_async_tls_with_config(request, None, true, Some(connector)).await.map_err(|e| match e {
        tokio_tungstenite::tungstenite::Error::Http(resp) => {
            let body = resp.body().as_deref().unwrap_or_default();
            match serde_json::from_slice::<ErrorBody>(body) {
                Ok(b) => anyhow!(b.error),
                Err(_) => anyhow!("the server refused to attach: HTTP {}", resp.status()),
            }
        }
        e @ (tokio_tungstenite::tungstenite::Error::Io(_) | tokio_tungstenite::tungstenite::Error::Tls(_)) => {
            crate::client::unreachable(&client.url, &e)
        }
        e => anyhow!("cannot attach: {e}"),
    })?;
    let (mut sink, mut stream) = ws.split();
    if tty {
        eprint!("[attached to {id}{}; detach with Ctrl-]]\r\n", if read_only { ", read-only" } else { "" });
    }
    let _raw = RawMode(tty && crossterm::terminal::enable_raw_mode().is_ok());
    // Terminal output is written straight from this task: a blocking write to the terminal
    // is the natural backpressure, and it saves a thread hand-off per frame.
    let mut stdout = std::io::stdout();
    let mut stdin = tokio::io::stdin();
    let mut buf = vec![0u8; 8192];
    let mut stdin_open = true;
    let mut winch = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::window_change())?;
    let ending = loop {
        tokio::select! {
            msg = stream.next() => match msg {
                Some(Ok(Message::Binary(b))) => {
                    stdout.write_all(&b)?;
                    stdout.flush()?;
                }
                Some(Ok(Message::Text(t))) => match serde_json::from_str::<ViewerEvent>(&t) {
                    Ok(ViewerEvent::Ended { outcome, exit_code, reason }) => {
                        let code = exit_code.map(|c| format!(", exit code {c}")).unwrap_or_default();
                        let why = reason.map(|r| format!(": {r}")).unwrap_or_default();
                        break format!("[session {id} ended: {outcome}{code}{why}]");
                    }
                    Ok(ViewerEvent::Error { message }) => eprint!("\r\n[drover: {message}]\r\n"),
                    Ok(_) => {}
                    Err(_) => {}
                },
                Some(Ok(Message::Close(_))) | None => break format!("[the server closed the connection to {id}]"),
                Some(Err(e)) => break format!("[connection to {id} lost: {e}]"),
                Some(Ok(_)) => {}
            },
            n = stdin.read(&mut buf), if stdin_open => match n {
                Ok(0) | Err(_) => stdin_open = false,
                Ok(n) => {
                    let input = &buf[..n];
                    let (keys, detach) = match input.iter().position(|b| *b == DETACH_KEY) {
                        Some(i) => (&input[..i], true),
                        None => (input, false),
                    };
                    if !read_only && !keys.is_empty() {
                        sink.send(Message::Binary(keys.to_vec().into())).await?;
                    }
                    if detach {
                        let _ = sink.send(Message::Close(None)).await;
                        break format!("[detached from {id}; it keeps running — `drover session attach {id}` to return]");
                    }
                }
            },
            _ = winch.recv() => {
                if let (Ok((cols @ 2.., rows @ 1..)), false) = (crossterm::terminal::size(), read_only) {
                    let cmd = serde_json::to_string(&ViewerCommand::Resize { cols, rows })?;
                    sink.send(Message::Text(cmd.into())).await?;
                }
            }
        }
    };
    if tty {
        stdout.write_all(RESTORE)?;
    }
    stdout.flush()?;
    drop(_raw);
    eprintln!("\r\n{ending}");
    if ending.contains("connection") && ending.contains("lost") {
        bail!("the connection to the server was lost");
    }
    Ok(ExitCode::SUCCESS)
}

//! `drover session tail`: what a run showed, as lines a person reads (rendered through a
//! screen model: the lines that scrolled off its screen, then the screen as it was
//! left); `--raw` gives the bytes as they are.
//!
//! `--follow` renders here, from the raw stream by offset: a line is printed once it is
//! settled — when it scrolls off the top of the screen, or, once the program has been
//! quiet for [`SETTLE`], when the cursor has moved below it — and never again; the
//! screen as left is printed when the session ends. A dropped connection (the server
//! restarting) is retried with backoff from the same offset, so nothing is lost or
//! printed twice.

use std::time::Duration;

use anyhow::{bail, Result};
use drover_api::{SessionText, SessionView};
use drover_term::transcript::Transcript;
use tokio::io::AsyncWriteExt;

use crate::client::{seg, Attempt, Client};
use crate::reconnect::{Backoff, Place, Status};
use crate::table::sanitize;

/// Quiet this long and a follower prints the rows above the cursor.
pub const SETTLE: Duration = Duration::from_secs(1);

/// Runs the tail.
pub async fn tail(client: &Client, id: &str, lines: usize, follow: bool, json: bool) -> Result<()> {
    if follow {
        return Follower::new(client, id, json).run(lines).await;
    }
    let text: SessionText = client.get(&format!("/api/v1/sessions/{}/text?lines={lines}", seg(id))).await?;
    let mut out = tokio::io::stdout();
    emit(&mut out, &text.lines, json).await
}

/// One piece of the output stream.
struct Piece {
    bytes: Vec<u8>,
    next: u64,
    live: bool,
    /// The terminal's size when these bytes were written (servers before this said none).
    size: Option<(u16, u16)>,
}

impl Piece {
    /// Feeds the piece to `screen`, resized first to the size it was written at.
    fn render(&self, screen: &mut Transcript) -> Vec<String> {
        let mut lines = match self.size {
            Some((cols, rows)) if (cols, rows) != screen.size() => screen.resize(cols, rows),
            _ => Vec::new(),
        };
        lines.extend(screen.feed(&self.bytes));
        lines
    }
}

/// Reads the raw stream from `offset`, waiting up to `wait` for output; retries what is
/// worth retrying (with `status` shown) until it gets an answer.
async fn read(client: &Client, id: &str, offset: u64, wait: Duration, backoff: &mut Backoff, status: &mut Status) -> Result<Piece> {
    let path = format!("/api/v1/sessions/{}/output?from={offset}&wait_ms={}", seg(id), wait.as_millis());
    loop {
        let got = match client.get_retryable(&path).await {
            Ok(resp) => {
                let next: u64 = header(&resp, "x-drover-offset").and_then(|v| v.parse().ok()).unwrap_or(offset);
                let live = header(&resp, "x-drover-outcome").is_some_and(|o| o == "starting" || o == "running");
                let size = header(&resp, "x-drover-size").and_then(|v| {
                    let (c, r) = v.split_once('x')?;
                    Some((c.parse().ok()?, r.parse().ok()?))
                });
                resp.bytes()
                    .await
                    .map(|b| Piece { bytes: b.to_vec(), next, live, size })
                    .map_err(|e| Attempt::Retry(crate::client::connection_trouble(&e)))
            }
            Err(e) => Err(e),
        };
        match got {
            Ok(piece) => {
                backoff.reset();
                status.connected();
                return Ok(piece);
            }
            Err(Attempt::Fail(e)) => return Err(e),
            Err(Attempt::Retry(why)) => match backoff.failed() {
                Some(delay) => {
                    status.reconnecting(&why, backoff.attempt(), delay);
                    tokio::time::sleep(delay).await;
                }
                None => bail!("lost the connection to the server at {} and could not reconnect: {why}", client.url),
            },
        }
    }
}

/// A `--follow` in progress.
struct Follower<'a> {
    client: &'a Client,
    id: &'a str,
    json: bool,
    backoff: Backoff,
    status: Status,
    out: tokio::io::Stdout,
}

impl<'a> Follower<'a> {
    fn new(client: &'a Client, id: &'a str, json: bool) -> Follower<'a> {
        Follower { client, id, json, backoff: Backoff::default(), status: Status::new(Place::Line), out: tokio::io::stdout() }
    }

    /// Catches up (printing the last `lines` settled lines), then follows to the end.
    async fn run(mut self, lines: usize) -> Result<()> {
        let s: SessionView = self.client.get(&format!("/api/v1/sessions/{}", seg(self.id))).await?;
        let mut screen = Transcript::new(s.cols, s.rows);
        let mut offset = 0;
        // Catching up: what is stored now, without waiting; only its last lines print.
        let mut backlog = Vec::new();
        loop {
            let piece = read(self.client, self.id, offset, Duration::ZERO, &mut self.backoff, &mut self.status).await?;
            backlog.extend(piece.render(&mut screen));
            offset = piece.next;
            if piece.bytes.is_empty() {
                if !piece.live {
                    backlog.extend(screen.finish());
                    return self.print_last(backlog, lines).await;
                }
                backlog.extend(screen.settle());
                break;
            }
        }
        self.print_last(backlog, lines).await?;
        loop {
            let piece = read(self.client, self.id, offset, SETTLE, &mut self.backoff, &mut self.status).await?;
            offset = piece.next;
            let mut settled = piece.render(&mut screen);
            if piece.bytes.is_empty() {
                if !piece.live {
                    settled.extend(screen.finish());
                    return emit(&mut self.out, &settled, self.json).await;
                }
                settled.extend(screen.settle());
            }
            emit(&mut self.out, &settled, self.json).await?;
        }
    }

    async fn print_last(&mut self, mut lines: Vec<String>, n: usize) -> Result<()> {
        lines.drain(..lines.len().saturating_sub(n));
        emit(&mut self.out, &lines, self.json).await
    }
}

/// Writes the raw output stream from offset 0 (following it with `follow`, across
/// reconnects).
pub async fn raw(client: &Client, id: &str, follow: bool) -> Result<()> {
    let (mut backoff, mut status) = (Backoff::default(), Status::new(Place::Line));
    let mut out = tokio::io::stdout();
    let mut offset = 0u64;
    loop {
        let wait = if follow { Duration::from_secs(25) } else { Duration::ZERO };
        let piece = read(client, id, offset, wait, &mut backoff, &mut status).await?;
        out.write_all(&piece.bytes).await?;
        out.flush().await?;
        offset = piece.next;
        if piece.bytes.is_empty() && (!follow || !piece.live) {
            return Ok(());
        }
    }
}

fn header(resp: &reqwest::Response, name: &str) -> Option<String> {
    resp.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_string)
}

async fn emit(out: &mut tokio::io::Stdout, lines: &[String], json: bool) -> Result<()> {
    for line in lines {
        let text = if json { serde_json::to_string(line)? } else { sanitize(line) };
        out.write_all(text.as_bytes()).await?;
        out.write_all(b"\n").await?;
    }
    out.flush().await?;
    Ok(())
}

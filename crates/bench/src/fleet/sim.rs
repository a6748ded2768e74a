//! The simulated devices of the fleet run: the real device protocol over their own WebSockets.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use drover_core::{ExitStatus, RunEnd, SessionId};
use drover_protocol::device::{DeviceBinary, DeviceMessage, MergeResult, ServerMessage};
use drover_protocol::shim::Snapshot;
use drover_protocol::PROTOCOL_VERSION;
use futures_util::{SinkExt, StreamExt};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;

use super::{HEARTBEAT, LINE_BYTES, LINE_EVERY, SESSIONS_PER_DEVICE};

/// What the simulated devices did, summed.
#[derive(Default)]
pub(super) struct Counters {
    /// Whether live sessions print.
    pub(super) output_on: AtomicBool,
    pub(super) connected: AtomicUsize,
    pub(super) heartbeats: AtomicU64,
    pub(super) frames: AtomicU64,
    pub(super) bytes_sent: AtomicU64,
    pub(super) links_lost: AtomicU64,
    pub(super) ended_by_server: AtomicU64,
    pub(super) notes: Mutex<Vec<String>>,
}

impl Counters {
    pub(super) fn note(&self, what: String) {
        let mut n = self.notes.lock().expect("notes lock");
        if n.len() < 10 {
            n.push(what);
        }
    }

    pub(super) fn notes(&self) -> Vec<String> {
        self.notes.lock().expect("notes lock").clone()
    }
}

/// A simulated session on a device.
pub(super) struct SimSession {
    pub(super) id: SessionId,
    pub(super) offset: u64,
    pub(super) lines: u64,
    pub(super) started: Instant,
    pub(super) started_at: String,
    pub(super) cols: u16,
    pub(super) rows: u16,
    pub(super) ended: bool,
}

pub(super) type Sink =
    futures_util::stream::SplitSink<tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>, Message>;

/// One simulated device for as long as its link lasts; a lost link is counted.
pub(super) async fn device(url: String, name: String, token: String, index: usize, c: Arc<Counters>) {
    if let Err(e) = device_link(&url, &name, &token, index, &c).await {
        c.links_lost.fetch_add(1, Relaxed);
        c.note(format!("{name}: {e:#}"));
    }
}

pub(super) async fn send(sink: &mut Sink, msg: &DeviceMessage) -> Result<()> {
    sink.send(Message::Text(serde_json::to_string(msg)?.into())).await?;
    Ok(())
}

/// The device link as `drover_device::link` speaks it: hello, the welcome, then
/// heartbeats, output and answers to the server's messages.
pub(super) async fn device_link(url: &str, name: &str, token: &str, index: usize, c: &Counters) -> Result<()> {
    let mut request = url.into_client_request()?;
    request.headers_mut().insert("authorization", format!("Bearer {token}").parse()?);
    // A small read buffer, as the server's: the library's default (zero-filled, so all
    // of it touched) would cost the simulator 128 KiB a device.
    let config = tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default().read_buffer_size(4096);
    let (ws, _) = tokio_tungstenite::connect_async_with_config(request, Some(config), true).await?;
    let (mut sink, mut stream) = ws.split();
    let hello = DeviceMessage::Hello {
        version: PROTOCOL_VERSION,
        name: name.to_string(),
        slots: SESSIONS_PER_DEVICE as u32,
        sessions: Vec::new(),
        sandbox: None,
    };
    send(&mut sink, &hello).await?;
    match tokio::time::timeout(Duration::from_secs(30), stream.next()).await {
        Ok(Some(Ok(Message::Text(t)))) => match serde_json::from_str::<ServerMessage>(&t)? {
            ServerMessage::Welcome { .. } => {}
            ServerMessage::Refused { reason } => bail!("refused: {reason}"),
            other => bail!("expected a welcome, got {other:?}"),
        },
        other => bail!("no welcome: {other:?}"),
    }
    c.connected.fetch_add(1, Relaxed);
    // Devices of a real fleet connect at unrelated times, so their heartbeats and lines
    // are spread over the interval rather than in step.
    let spread = |every: Duration| every.mul_f64(((index * 7919) % 1000) as f64 / 1000.0);
    let start = tokio::time::Instant::now();
    let mut heartbeat = tokio::time::interval_at(start + HEARTBEAT + spread(HEARTBEAT), HEARTBEAT);
    let tick = LINE_EVERY / SESSIONS_PER_DEVICE as u32;
    let mut output = tokio::time::interval_at(start + spread(tick), tick);
    output.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut sessions: Vec<SimSession> = Vec::new();
    let mut slot = 0usize;
    loop {
        tokio::select! {
            _ = heartbeat.tick() => {
                send(&mut sink, &DeviceMessage::Heartbeat).await?;
                c.heartbeats.fetch_add(1, Relaxed);
            }
            _ = output.tick() => {
                slot = (slot + 1) % SESSIONS_PER_DEVICE;
                if c.output_on.load(Relaxed) {
                    if let Some(s) = sessions.get_mut(slot).filter(|s| !s.ended) {
                        sink.send(next_line(name, slot, s)).await?;
                        c.frames.fetch_add(1, Relaxed);
                        c.bytes_sent.fetch_add(LINE_BYTES as u64, Relaxed);
                    }
                }
            }
            msg = stream.next() => match msg {
                Some(Ok(Message::Text(t))) => {
                    let m = serde_json::from_str::<ServerMessage>(&t).context("undecodable message from the server")?;
                    answer(&mut sink, &mut sessions, m, c).await?;
                }
                Some(Ok(Message::Binary(b))) => match DeviceBinary::decode(&b) {
                    Ok(DeviceBinary::Input { .. }) => {}
                    _ => bail!("unexpected binary frame from the server"),
                },
                Some(Ok(Message::Close(_))) | None => bail!("the server closed the link"),
                Some(Ok(_)) => {}
                Some(Err(e)) => bail!("link lost: {e}"),
            },
        }
    }
}

/// The session's next line of output, as an output frame at its offset.
pub(super) fn next_line(device: &str, slot: usize, s: &mut SimSession) -> Message {
    s.lines += 1;
    let mut line = format!("[{device} #{slot}] step {}: compiled module {} of 400, 0 warnings ", s.lines, s.lines % 400);
    line.truncate(LINE_BYTES - 2);
    while line.len() < LINE_BYTES - 2 {
        line.push('.');
    }
    line.push_str("\r\n");
    let frame = DeviceBinary::Output {
        session: s.id,
        offset: s.offset,
        t_micros: s.started.elapsed().as_micros() as u64,
        data: line.into_bytes().into(),
    };
    s.offset += LINE_BYTES as u64;
    Message::Binary(frame.encode().into())
}

/// Answers one message from the server as the device daemon would, with fake sessions.
pub(super) async fn answer(sink: &mut Sink, sessions: &mut Vec<SimSession>, m: ServerMessage, c: &Counters) -> Result<()> {
    let failed = |session, req, what: &str| DeviceMessage::Failed {
        session,
        req,
        reason: format!("session {session} is not on this device ({what})"),
    };
    match m {
        ServerMessage::Start { spec, .. } => {
            if sessions.iter().any(|s| s.id == spec.session) {
                return Ok(());
            }
            sessions.push(SimSession {
                id: spec.session,
                offset: 0,
                lines: 0,
                started: Instant::now(),
                started_at: chrono::Utc::now().to_rfc3339(),
                cols: spec.cols,
                rows: spec.rows,
                ended: false,
            });
            let cwd = if spec.cwd.is_empty() { "/home/sim".to_string() } else { spec.cwd };
            let pid = 10_000 + (spec.session.uuid().as_u128() % 1_000_000) as u32;
            send(sink, &DeviceMessage::Started { session: spec.session, pid, cwd }).await?;
        }
        // No longer sent by the server (a device resumes from the welcome's offsets).
        ServerMessage::Ack { .. } => {}
        ServerMessage::Stop { session, .. } => match sessions.iter_mut().find(|s| s.id == session) {
            Some(s) if !s.ended => {
                s.ended = true;
                c.ended_by_server.fetch_add(1, Relaxed);
                let end = RunEnd::Exited { status: ExitStatus { code: None, signal: Some(libc::SIGTERM) }, stop_requested: true };
                let ended_at = chrono::Utc::now().to_rfc3339();
                let msg = DeviceMessage::Ended { session, end, started_at: Some(s.started_at.clone()), ended_at, final_offset: s.offset };
                send(sink, &msg).await?;
            }
            Some(_) => {}
            None => send(sink, &failed(session, None, "stop")).await?,
        },
        ServerMessage::Release { session } => {
            if sessions.iter().any(|s| s.id == session && !s.ended) {
                c.ended_by_server.fetch_add(1, Relaxed);
            }
            sessions.retain(|s| s.id != session);
        }
        ServerMessage::Snapshot { session, req, .. } => match sessions.iter().find(|s| s.id == session) {
            Some(s) => {
                let snapshot = Snapshot { req, offset: s.offset, cols: s.cols, rows: s.rows, data: b"\x1b[H\x1b[2J".to_vec() };
                sink.send(Message::Binary(DeviceBinary::Snapshot { session, snapshot }.encode().into())).await?;
            }
            None => send(sink, &failed(session, None, "snapshot")).await?,
        },
        ServerMessage::SendText { session, req, .. } => match sessions.iter().find(|s| s.id == session) {
            Some(s) => {
                let t_micros = s.started.elapsed().as_micros() as u64;
                send(sink, &DeviceMessage::Delivered { session, req, bracketed_paste: false, offset: s.offset, t_micros }).await?;
            }
            None => send(sink, &failed(session, Some(req), "text")).await?,
        },
        ServerMessage::Resize { session, cols, rows } => {
            if let Some(s) = sessions.iter_mut().find(|s| s.id == session) {
                (s.cols, s.rows) = (cols, rows);
                let t_micros = s.started.elapsed().as_micros() as u64;
                send(sink, &DeviceMessage::Resized { session, t_micros, cols, rows }).await?;
            }
        }
        ServerMessage::Merge { req, .. } => {
            let result = MergeResult::Refused { reason: "a simulated device has no repositories".into() };
            send(sink, &DeviceMessage::Merged { req, result }).await?;
        }
        ServerMessage::Prepare { sandbox, .. } => {
            let problem = Some("a simulated device has no repositories".to_string());
            send(sink, &DeviceMessage::Prepared { sandbox, problem }).await?;
        }
        ServerMessage::CheckRepo { req, .. } => {
            let problem = Some("a simulated device has no repositories".to_string());
            send(sink, &DeviceMessage::RepoChecked { req, problem }).await?;
        }
        ServerMessage::Refused { reason } => bail!("refused: {reason}"),
        ServerMessage::Welcome { .. }
        | ServerMessage::Prices { .. }
        | ServerMessage::Viewers { .. }
        | ServerMessage::RemoveWorktree { .. } => {}
    }
    Ok(())
}

//! The WebSocket a device daemon opens to `/api/v1/device/connect`.
//!
//! Hello → Welcome (with, per live session, the offset the server holds, so the device
//! resumes each stream exactly there) → messages both ways. Output goes to the session's
//! hub at once (live viewers) and to the output writer (durable; a new link resumes from what is stored);
//! events that must follow it (an end, a resize) go through the ingest task.

use std::time::Duration;

use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::ws::{Message, WebSocket};
use axum::extract::{State, WebSocketUpgrade};
use axum::response::Response;
use drover_core::{DeviceId, RunEnd, SessionId, WorkspaceId};
use drover_protocol::device::{DeviceBinary, DeviceMessage, ServerMessage};
use drover_protocol::PROTOCOL_VERSION;
use drover_store::{OutputChunk, Principal, SessionRow};
use futures_util::{SinkExt, StreamExt};
use tokio::sync::mpsc;
use tracing::Instrument;

use crate::auth::Caller;
use crate::devices::Delivery;
use crate::ingest::{self, Item};
use crate::link_guard::{Admit, Gate};
use crate::writer::{Link, LinkOutput};
use crate::{ApiError, AppState};

/// How long a device has to say hello.
const HELLO_TIMEOUT: Duration = Duration::from_secs(10);
/// Messages queued for a device before senders wait.
const DOWNLINK_QUEUE: usize = 1024;
/// Messages written to a device together at most before they are flushed.
const DOWNLINK_FLUSH: usize = 64;

/// The device link's read buffer. The WebSocket library zero-fills its whole read
/// buffer before every read, so its larger default cost a fleet of quiet devices more
/// in `memset` (and RSS: all of it is touched, per link) than their output did; larger
/// frames take a few reads.
const LINK_READ_BUFFER: usize = 4 * 1024;

/// `GET /api/v1/device/connect` (WebSocket), device credentials only.
pub async fn connect(
    State(state): State<AppState>,
    caller: Caller,
    ws: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Result<Response, ApiError> {
    let Principal::Device { workspace, id, name } = caller.0 else {
        return Err(ApiError::Forbidden("only a device credential can open the device link".into()));
    };
    let ws = ws.map_err(|e| ApiError::BadRequest(format!("the device link is a WebSocket: {e}")))?;
    // Everything logged for this link is in its `device` span (inside the `http` span of
    // the request that opened it).
    let span = tracing::info_span!("device", device = %name);
    Ok(ws.max_message_size(32 << 20).read_buffer_size(LINK_READ_BUFFER).on_upgrade(move |socket| {
        async move {
            let _open = state.metrics.socket(crate::metrics::Socket::Device);
            if let Err(e) = run(state, workspace, id, name.clone(), socket).await {
                tracing::warn!(device = %name, "device link ended: {e}");
            }
        }
        .instrument(span)
    }))
}

type Sink = futures_util::stream::SplitSink<WebSocket, Message>;
type Stream = futures_util::stream::SplitStream<WebSocket>;

/// What a device said in its hello that the link goes on with.
struct Hello {
    slots: u32,
    /// The sessions it still runs.
    sessions: Vec<SessionId>,
    /// What it can offer to confine a run (JSON), if it said.
    sandbox: Option<String>,
}

async fn run(state: AppState, workspace: WorkspaceId, device: DeviceId, name: String, socket: WebSocket) -> Result<(), String> {
    let (mut sink, mut stream) = socket.split();
    let hello = hello(&mut sink, &mut stream, &name).await?;
    record_device(&state, workspace, device, &name, &hello).await?;
    let (gate, resume, release) = reconcile(&state, device, &name, &hello.sessions).await?;
    let resumed: Vec<SessionId> = resume.iter().map(|(s, _)| *s).collect();
    let welcome = ServerMessage::Welcome { name: name.clone(), resume, release };
    sink.send(text(&welcome)).await.map_err(|e| e.to_string())?;
    let (down_tx, down_rx) = mpsc::channel::<Message>(DOWNLINK_QUEUE);
    let epoch = open(&state, workspace, device, &name, &resumed, down_tx).await;
    let writer = tokio::spawn(downlink(sink, down_rx));
    let result = serve(&state, device, &name, epoch, gate, stream).await;
    writer.abort();
    tracing::info!(device = %name, "device disconnected");
    result
}

/// A server message as a text frame.
fn text(m: &ServerMessage) -> Message {
    Message::Text(serde_json::to_string(m).expect("server messages serialise").into())
}

/// Reads the device's hello, and refuses a device that speaks another protocol version
/// or says another name than its credential's.
async fn hello(sink: &mut Sink, stream: &mut Stream, name: &str) -> Result<Hello, String> {
    let hello = tokio::time::timeout(HELLO_TIMEOUT, stream.next()).await.map_err(|_| "no hello".to_string())?;
    let Some(Ok(Message::Text(text))) = hello else { return Err("the first message was not a hello".into()) };
    let Ok(DeviceMessage::Hello { version, name: said, slots, sessions, sandbox }) = serde_json::from_str::<DeviceMessage>(&text) else {
        return Err("the first message was not a hello".into());
    };
    let refusal = if version != PROTOCOL_VERSION {
        Some(format!("protocol version {version} is not supported (this server speaks {PROTOCOL_VERSION}); upgrade drover on one side"))
    } else if said != name {
        Some(format!("this credential belongs to device `{name}`, not `{said}`"))
    } else {
        None
    };
    if let Some(reason) = refusal {
        let _ = sink.send(self::text(&ServerMessage::Refused { reason })).await;
        return Err("refused".into());
    }
    let sandbox = sandbox.map(|o| serde_json::to_string(&o).expect("an offer serialises"));
    Ok(Hello { slots, sessions: sessions.iter().map(|r| r.session).collect(), sandbox })
}

/// Stores what the hello said of the device, and that it reported in.
async fn record_device(state: &AppState, workspace: WorkspaceId, device: DeviceId, name: &str, hello: &Hello) -> Result<(), String> {
    // A daemon started without --slots says 0: the slots registered with `device add` stand.
    if hello.slots > 0 {
        state.store.upsert_device(workspace, name, hello.slots).await.map_err(|e| e.to_string())?;
    }
    state.store.set_device_sandbox(device, hello.sandbox.as_deref()).await.map_err(|e| e.to_string())?;
    state.store.touch_devices(&[device]).await.map_err(|e| e.to_string())
}

/// What the server expects, against what the device reports: the sessions it resumes
/// (with the offset held of each) and those it releases; a live session it did not
/// report is lost.
async fn reconcile(
    state: &AppState,
    device: DeviceId,
    name: &str,
    reported: &[SessionId],
) -> Result<(Gate, Vec<(SessionId, u64)>, Vec<SessionId>), String> {
    let live = state.store.live_sessions_on(device).await.map_err(|e| e.to_string())?;
    let mut resume = Vec::new();
    let mut gate = Gate::new(device, name);
    for row in &live {
        if reported.contains(&row.id) {
            resume.push((row.id, row.output_bytes));
            gate.resumed(row.id, row.output_bytes, &row.created_at);
            state.hubs.get_or_create(row.id, row.output_bytes, (row.cols, row.rows));
            // The device reported in: a Device silent flag no longer stands.
            if row.stale_flag == Some(drover_core::liveness::StaleFlag::DeviceSilent) {
                let _ = state.store.set_stale_flag(row.id, None).await;
            }
        } else {
            let end = RunEnd::DeviceLost { reason: "the device came back online without reporting this session".into() };
            let _ = ingest::end_session(state, device, name, row.id, &ingest::EndReport::now(end, row.output_bytes)).await;
        }
    }
    let release = reported.iter().copied().filter(|s| !resume.iter().any(|(id, _)| id == s)).collect();
    Ok((gate, resume, release))
}

/// Opens the link for messages to the device (after its welcome); returns its epoch.
async fn open(
    state: &AppState,
    workspace: WorkspaceId,
    device: DeviceId,
    name: &str,
    resumed: &[SessionId],
    down_tx: mpsc::Sender<Message>,
) -> u64 {
    // What the shims were last told of their viewers may be out of date (some came or
    // went while the device was away): they are told again before anything else can
    // reach the device.
    if !resumed.is_empty() {
        let send = |m: &ServerMessage| down_tx.try_send(text(m)).is_ok();
        state.topology.tell_viewers(state, device, resumed, false, &send).await;
    }
    let epoch = state.devices.connect(device, down_tx);
    state.topology.linked(state, device, name).await;
    tracing::info!(device = %name, "device connected");
    // The workspace's own prices, for the usage the device reads.
    if let Ok(overrides) = state.store.workspace_prices(workspace).await {
        let _ = state.devices.send(device, &ServerMessage::Prices { overrides }).await;
    }
    // A run marked lost while this handshake was under way was resumed above: its lease
    // is gone, so it is stopped now that messages can reach the device.
    for session in resumed {
        if state.store.session(*session).await.ok().flatten().is_some_and(|r| !r.outcome.is_live()) {
            let _ = state.devices.send(device, &ServerMessage::Release { session: *session }).await;
        }
    }
    // Stages waiting for this device (or any device) may start now.
    state.scheduler.notify_one();
    epoch
}

/// Writes messages to the device: what is queued together goes out in one write.
async fn downlink(mut sink: Sink, mut down_rx: mpsc::Receiver<Message>) {
    'link: while let Some(m) = down_rx.recv().await {
        let mut next = Some(m);
        let mut fed = 0;
        while let Some(m) = next.take() {
            let closing = matches!(m, Message::Close(_));
            if sink.feed(m).await.is_err() || closing {
                break 'link;
            }
            fed += 1;
            next = if fed < DOWNLINK_FLUSH { down_rx.try_recv().ok() } else { None };
        }
        if sink.flush().await.is_err() {
            break;
        }
    }
    let _ = sink.close().await;
}

/// Reads the link until it ends, then closes it: its output and events are seen to
/// their end before the writer forgets the link.
async fn serve(state: &AppState, device: DeviceId, name: &str, epoch: u64, mut gate: Gate, mut stream: Stream) -> Result<(), String> {
    let output = LinkOutput::new(Link { device, epoch });
    let link = output.link();
    let (ingest_tx, ingest_rx) = mpsc::channel(ingest::INGEST_QUEUE);
    let ingest = tokio::spawn(ingest::run(state.clone(), link, name.to_string(), ingest_rx).in_current_span());
    let result = read_loop(state, &output, &mut gate, &mut stream, &ingest_tx).await;
    state.output.closed(state, link).await;
    if state.devices.disconnect(device, epoch) {
        state.topology.unlinked(state, device, name).await;
    }
    drop(ingest_tx);
    let _ = ingest.await;
    state.output.forget(state, link).await;
    result
}

async fn read_loop(
    state: &AppState,
    output: &LinkOutput,
    gate: &mut Gate,
    stream: &mut Stream,
    ingest: &mpsc::Sender<Item>,
) -> Result<(), String> {
    while let Some(msg) = stream.next().await {
        let msg = msg.map_err(|e| e.to_string())?;
        match msg {
            Message::Binary(b) => match DeviceBinary::decode_shared(&b) {
                Ok(DeviceBinary::Output { session, offset, t_micros, data }) => {
                    if gate.admit_output(state, session, offset, data.len() as u64).await? == Admit::Drop {
                        continue;
                    }
                    // The frame is shared, not copied: by the hub and by the store's chunk.
                    let chunk = OutputChunk { session, offset, t_micros, data: data.clone() };
                    if let Some(hub) = state.hubs.get(session) {
                        hub.publish(offset, data);
                    }
                    state.output.store(state, output, chunk).await.map_err(|_| "the output writer stopped")?;
                }
                Ok(DeviceBinary::Snapshot { session, snapshot }) => {
                    if gate.admit(state, session).await? == Admit::Take {
                        state.devices.snapshot_arrived(output.link().device, snapshot)
                    }
                }
                Ok(DeviceBinary::Input { .. }) | Err(_) => return Err("unexpected binary frame".into()),
            },
            Message::Text(t) => match serde_json::from_str::<DeviceMessage>(&t) {
                Ok(m) => {
                    if let Some(session) = m.session() {
                        if gate.admit(state, session).await? == Admit::Drop {
                            continue;
                        }
                    }
                    let ended = match &m {
                        DeviceMessage::Ended { session, .. } => Some(*session),
                        _ => None,
                    };
                    let span = match m.session() {
                        Some(session) => tracing::info_span!("session", %session),
                        None => tracing::Span::none(),
                    };
                    message(state, output.link().device, m, ingest).instrument(span).await?;
                    if let Some(session) = ended {
                        gate.ended(session);
                    }
                }
                Err(e) => return Err(format!("undecodable message: {e}")),
            },
            Message::Close(_) => return Ok(()),
            Message::Ping(_) | Message::Pong(_) => {}
        }
    }
    Ok(())
}

async fn message(state: &AppState, device: DeviceId, m: DeviceMessage, ingest: &mpsc::Sender<Item>) -> Result<(), String> {
    match m {
        DeviceMessage::Hello { .. } => return Err("a second hello".into()),
        DeviceMessage::Started { session, pid, cwd } => started(state, device, session, pid, &cwd).await,
        DeviceMessage::Ended { session, end, started_at, ended_at, final_offset } => {
            let report = ingest::EndReport { end: end.as_device_reported(), started_at, ended_at, final_offset };
            ingest.send(Item::Ended { session, report }).await.map_err(|_| "ingest stopped")?;
        }
        DeviceMessage::Resized { session, t_micros, cols, rows } => {
            ingest.send(Item::Resized { session, t_micros, cols, rows }).await.map_err(|_| "ingest stopped")?;
        }
        DeviceMessage::Delivered { req, bracketed_paste, offset, t_micros, .. } => {
            state.devices.delivered(req, device, Delivery::Delivered { bracketed_paste, offset, t_micros });
        }
        DeviceMessage::Merged { req, result } => state.devices.merged(req, device, result),
        DeviceMessage::RepoChecked { req, problem } => state.devices.repo_checked(req, device, problem),
        DeviceMessage::Prepared { sandbox, problem } => crate::tasks::prepared(state, device, sandbox, problem).await,
        DeviceMessage::Failed { req, reason, session } => match req {
            Some(req) => state.devices.delivered(req, device, Delivery::Failed(reason)),
            None => tracing::warn!(%session, "device: {reason}"),
        },
        DeviceMessage::RecordingError { session, message } => recording_error(state, session, message).await,
        DeviceMessage::Heartbeat => state.contact.heard(&state.store, state.config.liveness.device_silent_after, device),
        DeviceMessage::Skills { session, skills } => {
            if own_session(state, device, session).await.is_some() {
                let json = serde_json::to_string(&skills).expect("skill reports serialise");
                if let Err(e) = state.store.set_session_skills(session, &json).await {
                    tracing::warn!(%session, "recording skills: {e}");
                }
            }
        }
        DeviceMessage::Usage { session, usage } => {
            // Spend is a fact even for a run whose lease is gone: it is recorded.
            if own_session(state, device, session).await.is_some() {
                record_usage(state, session, &usage).await;
            }
        }
        DeviceMessage::Commit { session, head, subject } => commit(state, device, session, head, subject).await,
    }
    Ok(())
}

/// The session, if it exists and runs on `device` (a device speaks only for its own).
async fn own_session(state: &AppState, device: DeviceId, session: SessionId) -> Option<SessionRow> {
    state.store.session(session).await.ok().flatten().filter(|r| r.device == device)
}

/// A run's program started: it is running (or, its lease gone meanwhile, released).
async fn started(state: &AppState, device: DeviceId, session: SessionId, pid: u32, cwd: &str) {
    let Some(row) = own_session(state, device, session).await else { return };
    if !row.outcome.is_live() {
        let _ = state.devices.send(device, &ServerMessage::Release { session }).await;
        return;
    }
    let _ = state.store.mark_running(session, pid, cwd).await;
    let hub = state.hubs.get_or_create(session, row.output_bytes, (row.cols, row.rows));
    // A viewer who came while the device was still preparing the run was counted
    // before its shim existed: the shim hears of them now.
    if state.topology.may_have_viewers(&hub) {
        let state = state.clone();
        tokio::spawn(async move { crate::topology::tell_viewers(&state, device, &[session], false).await });
    }
}

/// Records that a session's recording could not be written, in its activity.
async fn recording_error(state: &AppState, session: SessionId, message: String) {
    let Some(row) = state.store.session(session).await.ok().flatten() else { return };
    let event = drover_store::NewEvent {
        workspace: row.workspace,
        session: Some(session),
        task: None,
        kind: drover_core::activity::EventKind::RecordingError,
        actor: format!("device {}", row.device_name),
        detail: serde_json::json!({ "message": message }),
    };
    let _ = state.store.record_event(&event).await;
}

/// Records a run's usage report and enforces the spend caps it may have reached.
async fn record_usage(state: &AppState, session: SessionId, usage: &drover_protocol::device::UsageReport) {
    let routes: Vec<drover_store::RouteChange> = usage
        .route_changes
        .iter()
        .map(|c| drover_store::RouteChange { from: c.from.clone(), to: c.to.clone(), at: c.at.clone() })
        .collect();
    let json = serde_json::to_string(usage).expect("a usage report serialises");
    match state.store.record_usage(session, &json, usage.cost, usage.unpriced_turns, &routes).await {
        Err(e) => tracing::warn!(%session, "recording usage: {e}"),
        Ok(recorded) => {
            if let Some(recorded) = recorded {
                count_spend(state, &recorded, usage);
            }
            if let Err(e) = crate::spend::enforce(state, session).await {
                tracing::warn!(%session, "checking spend caps: {e}");
            }
        }
    }
}

/// Adds what a run's usage report says it spent since its last one to the spend
/// counter, per model.
fn count_spend(state: &AppState, recorded: &drover_store::RecordedUsage, usage: &drover_protocol::device::UsageReport) {
    for (model, nano) in crate::metrics::spent_since(recorded.previous.as_deref(), usage) {
        state.metrics.spent(recorded.agent.as_deref(), model, nano);
    }
}

/// Records a commit a run made, in its activity; a lost run's is refused and the run
/// stopped.
async fn commit(state: &AppState, device: DeviceId, session: SessionId, head: String, subject: String) {
    let Some(row) = own_session(state, device, session).await else { return };
    if row.outcome == drover_core::Outcome::Lost {
        // A run whose lease is gone: its evidence is refused, and it is stopped.
        let _ = state.devices.send(device, &ServerMessage::Release { session: row.id }).await;
        return;
    }
    let actor = row.agent_name.as_deref().map(|a| format!("agent {a}")).unwrap_or_else(|| format!("device {}", row.device_name));
    let event = drover_store::NewEvent {
        workspace: row.workspace,
        session: Some(session),
        task: None,
        kind: drover_core::activity::EventKind::Commit,
        actor,
        detail: serde_json::json!({ "head": head, "subject": subject }),
    };
    if let Err(e) = state.store.record_event(&event).await {
        tracing::warn!(%session, "recording a commit: {e}");
    }
}

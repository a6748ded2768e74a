//! The live terminal WebSocket (`/api/v1/sessions/{id}/terminal`): a snapshot first,
//! then live bytes; keystrokes and resizes back. Keystrokes typed here are not audited.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::ws::{Message, WebSocket};
use axum::extract::{Path, Query, State, WebSocketUpgrade};
use axum::response::Response;
use drover_core::{DeviceId, SessionId};
use drover_protocol::device::ServerMessage;
use drover_protocol::viewer::{ViewerCommand, ViewerEvent, MAX_WINDOW, MIN_WINDOW};
use futures_util::{SinkExt, StreamExt};
use serde::Deserialize;

use crate::auth::Caller;
use crate::hub::{Hub, Joined, NoResync, ViewerOut};
use crate::screens::{self, ScreenError, ScreenPoint};
use crate::{ApiError, AppState};

/// Snapshot attempts before falling back to rebuilding the screen from stored output.
const SNAPSHOT_TRIES: usize = 3;
/// How long after a re-sync that left a viewer off the live stream it is tried again.
const RESYNC_RETRY: std::time::Duration = std::time::Duration::from_secs(1);
/// The most recent stored output the fallback screen is rebuilt from when no checkpoint
/// is near enough yet: never the whole stream (DESIGN.md), so its cost does not grow with
/// the session's age.
const FALLBACK_REPLAY_BYTES: u64 = 2 * 1024 * 1024;
/// Most stored output sent to catch a re-synced viewer up before taking a new snapshot.
const MAX_REPLAY_BYTES: usize = 8 * 1024 * 1024;

type Sink = futures_util::stream::SplitSink<WebSocket, Message>;
/// What the viewer sends, as the loop reads it.
type Source = futures_util::stream::SplitStream<WebSocket>;

/// Query parameters of the terminal socket.
#[derive(Debug, Deserialize)]
pub struct TerminalParams {
    /// Only watch: keystrokes and resizes are ignored.
    #[serde(default)]
    pub read_only: bool,
    /// Resize the session to these columns on join.
    pub cols: Option<u32>,
    /// Resize the session to these rows on join.
    pub rows: Option<u32>,
    /// The viewer takes the bytes from the session's shim on its own machine (`drover
    /// session attach` where the session runs): it is counted, checked and told of
    /// resizes and the end as any viewer, but sent no bytes.
    #[serde(default)]
    pub local: bool,
    /// Bytes the viewer may be sent ahead of what it has said it is done with
    /// (`consumed` commands; 64 KiB to 16 MiB): beyond it, output is held back, and once
    /// the viewer has caught up it gets a fresh screen in place of what it missed. For a
    /// viewer that may draw slower than a program prints (a browser): it then takes in
    /// only what it can show, and a flood costs neither it nor the server more.
    pub window: Option<u64>,
}

/// `GET /api/v1/sessions/{id}/terminal` (WebSocket).
pub async fn terminal(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    Query(params): Query<TerminalParams>,
    ws: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Result<Response, ApiError> {
    let (row, _) = crate::api::sessions::load_for_drop_in(&state, &caller, &id).await?;
    let ws = ws.map_err(|e| ApiError::BadRequest(format!("the terminal is a WebSocket: {e}")))?;
    if !row.outcome.is_live() {
        return Err(ended(&row));
    }
    let size = match (params.cols, params.rows) {
        (Some(c), Some(r)) if !params.read_only => {
            Some(drover_core::names::check_size(c, r).map_err(|e| ApiError::BadRequest(e.to_string()))?)
        }
        _ => None,
    };
    let hub = state.hubs.get_or_create(row.id, row.output_bytes, (row.cols, row.rows));
    // The session may have ended since it was read, its hub let go: one made now would
    // never end. So it is read again with the hub in place: an end stored after this
    // finds the hub; one stored before is told to it here, and the hub let go.
    if let Some(now) = state.store.session(row.id).await?.filter(|r| !r.outcome.is_live()) {
        hub.end(ViewerEvent::Ended { outcome: now.outcome, exit_code: now.exit_code, reason: now.reason.clone() });
        state.hubs.remove_if(row.id, &hub);
        return Err(ended(&now));
    }
    // Its device linked to another replica: follow its output here.
    state.topology.follow(&state, hub.clone(), row.id, row.device);
    let device = row.device;
    let credential = caller.1.clone();
    let operator = row.operator;
    Ok(ws.max_message_size(VIEWER_MESSAGE_MAX).max_frame_size(VIEWER_MESSAGE_MAX).on_upgrade(move |socket| async move {
        let _open = state.metrics.socket(crate::metrics::Socket::Viewer);
        let viewer = Viewer {
            state,
            hub,
            session: row.id,
            device,
            interactive: !params.read_only,
            local: params.local,
            window: params.window.map(|w| w.clamp(MIN_WINDOW, MAX_WINDOW)),
            sent: AtomicU64::new(0),
            done: AtomicU64::new(0),
            credential,
            operator,
            undelivered_told: Default::default(),
            asked_meanwhile: Default::default(),
        };
        viewer.run(socket, size).await;
    }))
}

/// Why an ended session's terminal cannot be opened, and what to use instead.
fn ended(row: &drover_store::SessionRow) -> ApiError {
    ApiError::Conflict(format!(
        "session {} has ended ({}); it can no longer be attached — use `drover session tail {}` or `export` to see what it printed",
        row.id, row.outcome, row.id
    ))
}

struct Viewer {
    state: AppState,
    hub: Arc<Hub>,
    session: SessionId,
    device: DeviceId,
    interactive: bool,
    /// Sent no bytes: the viewer reads them from the shim ([`TerminalParams::local`]).
    /// Its place in the hub then stays lagging, so no output is queued for it.
    local: bool,
    /// Bytes it may be sent ahead of what it is done with ([`TerminalParams::window`]).
    window: Option<u64>,
    /// Terminal bytes sent to it so far.
    sent: AtomicU64,
    /// Of those, the bytes it has said it is done with.
    done: AtomicU64,
    /// The credential the terminal was opened with, and the session's operator: checked
    /// again every [`RECHECK`], so a revoked sign-in or a lost role closes the terminal.
    credential: crate::auth::Credential,
    operator: Option<drover_core::MemberId>,
    /// When the viewer was last told that its keystrokes could not be delivered.
    undelivered_told: std::sync::Mutex<Option<tokio::time::Instant>>,
    /// The viewer asked for a re-sync while one was under way: it gets another after.
    asked_meanwhile: std::sync::atomic::AtomicBool,
}

/// At most how often a viewer is told that what it types is not delivered.
const UNDELIVERED_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

/// How often an open terminal makes sure its output is followed when its device's link
/// is on another replica.
const FOLLOW_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// The largest message a viewer may send (keystrokes, a paste, a resize): a larger one
/// closes the terminal with 1009 (message too big); the Send box is the path for more.
const VIEWER_MESSAGE_MAX: usize = 1 << 20;

/// The largest message of output sent to a viewer with a window: it is sent past its
/// window by at most this much.
const WINDOW_PIECE: usize = 64 * 1024;

/// The least time between two re-syncs a viewer asks for.
const RESYNC_EVERY: std::time::Duration = std::time::Duration::from_millis(drover_protocol::viewer::RESYNC_EVERY_MS);

/// When a re-sync asked for now may begin: at once, or [`RESYNC_EVERY`] after the last
/// one began.
fn resync_due(last: Option<tokio::time::Instant>) -> tokio::time::Instant {
    let now = tokio::time::Instant::now();
    last.map_or(now, |t| (t + RESYNC_EVERY).max(now))
}

/// What the viewer's loop does after a message from the viewer.
enum Next {
    /// Reads on.
    Read,
    /// Re-syncs the viewer (it asked).
    Resync,
    /// The viewer is done with this many more bytes.
    Consumed(u64),
    /// Closes the terminal.
    Close,
}

/// How often an open terminal checks that its viewer may still drop in.
const RECHECK: std::time::Duration = std::time::Duration::from_secs(5);

impl Viewer {
    /// Why the viewer may no longer drop in, if they may not (a store failure keeps the
    /// terminal open: it is checked again shortly).
    async fn revoked(&self) -> Option<String> {
        let principal = match crate::auth::current_principal(&self.state.store, &self.credential).await {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!("rechecking a terminal viewer: {e}");
                return None;
            }
        };
        let Some(principal) = principal else { return Some("auth expired: the sign-in or token was revoked or has expired".into()) };
        let caller = crate::auth::Caller(principal, self.credential.clone());
        (!caller.may_drop_in_run(self.operator)).then(|| "no permission: you may no longer drop in to this session".into())
    }

    async fn run(self, socket: WebSocket, size: Option<(u16, u16)>) {
        let (mut sink, mut stream) = socket.split();
        let Some(Joined { id, lag, mut rx, queued }) = self.join(size, &mut sink).await else { return };
        let mut first = true;
        // When a re-sync could not put the viewer back on the live stream: when to try again.
        let mut retry: Option<tokio::time::Instant> = None;
        // When the viewer's last re-sync began.
        let mut last_resync: Option<tokio::time::Instant> = None;
        let mut recheck = tokio::time::interval_at(tokio::time::Instant::now() + RECHECK, RECHECK);
        // With replicas, the device's link can move away from this one while the viewer
        // watches: then its output is followed here from the database.
        let mut refollow = tokio::time::interval(FOLLOW_EVERY);
        // Whether output is held back for the viewer (its window is full).
        let mut held = false;
        loop {
            tokio::select! {
                _ = refollow.tick() => {
                    self.state.topology.follow(&self.state, self.hub.clone(), self.session, self.device);
                }
                _ = self.access_check_due(&mut recheck) => {
                    if self.refused(&mut sink).await {
                        break;
                    }
                }
                _ = lag.notified(), if !self.local => {
                    last_resync = Some(tokio::time::Instant::now());
                    held = false;
                    while rx.try_recv().is_ok() {}
                    match self.catch_up(id, std::mem::take(&mut first), &mut sink, &mut stream).await {
                        // The screen and what followed it filled the window.
                        Ok(true) if self.window_full() => held = self.hold_back(id),
                        Ok(true) => {}
                        // Still off the live stream, which will not tell it again.
                        Ok(false) => retry = Some(tokio::time::Instant::now() + RESYNC_RETRY),
                        Err(_) => break,
                    }
                    // Asked for again while that one was under way: one more, in its turn.
                    if self.asked_meanwhile.swap(false, Ordering::AcqRel) {
                        retry = retry.or(Some(resync_due(last_resync)));
                    }
                }
                _ = async { tokio::time::sleep_until(retry.unwrap_or_else(tokio::time::Instant::now)).await }, if retry.is_some() => {
                    retry = None;
                    lag.notify_one();
                }
                out = rx.recv() => match out {
                    Some(ViewerOut::Bytes(b)) => {
                        queued.fetch_sub(b.len(), Ordering::AcqRel);
                        // Held back: a fresh screen takes its place once the viewer caught up.
                        if held { continue; }
                        match self.send_within_window(b, &mut sink).await {
                            Ok(true) => {}
                            Ok(false) => held = self.hold_back(id),
                            Err(_) => break,
                        }
                    }
                    Some(ViewerOut::Event(e)) => {
                        let ended = matches!(e, ViewerEvent::Ended { .. });
                        // A viewer waiting for a re-sync gets the last screen before the end.
                        if ended && (retry.is_some() || held) && self.catch_up(id, false, &mut sink, &mut stream).await.is_err() { break; }
                        if send_event(&mut sink, &e).await.is_err() || ended { break; }
                    }
                    None => {
                        if (retry.is_some() || held) && self.catch_up(id, false, &mut sink, &mut stream).await.is_err() { break; }
                        if let Some(e) = self.hub.ended() { let _ = send_event(&mut sink, &e).await; }
                        break;
                    }
                },
                // Nothing the viewer sends is taken in before its first screen: the
                // program's answer to a key (a terminal query above all) must follow
                // that screen as bytes the viewer's terminal sees, not be folded into it.
                msg = stream.next(), if self.local || !first => match self.on_message(id, msg, &mut sink).await {
                    Next::Read => {}
                    Next::Close => break,
                    // Caught up to half its window: a fresh screen and the live stream
                    // again, at most one re-sync per RESYNC_EVERY (a viewer that cannot
                    // keep up shows a flood as a few screens a second, not all of it).
                    Next::Consumed(bytes) => {
                        if self.consumed(bytes) && held {
                            retry = retry.or(Some(resync_due(last_resync)));
                        }
                    }
                    // However often it asks, one re-sync per RESYNC_EVERY at most; one
                    // already due (asked for, or a retry after a failed one) answers it.
                    Next::Resync => {
                        retry = retry.or(Some(resync_due(last_resync)));
                    }
                },
            }
        }
        self.hub.leave(id);
        self.viewers_changed().await;
        let _ = sink.close().await;
    }

    /// Joins the hub (at `size`, if asked) and says hello; None when the viewer is gone.
    async fn join(&self, size: Option<(u16, u16)>, sink: &mut Sink) -> Option<Joined> {
        if let Some((cols, rows)) = size {
            self.resize(cols, rows, None).await;
        }
        // Joined (and the device told) before the hello: once a viewer is attached, the
        // shim knows whether someone can type.
        let joined = self.hub.join(self.interactive);
        self.viewers_changed().await;
        let (cols, rows) = self.hub.size();
        let hello = ViewerEvent::Hello { session: self.session, cols, rows, read_only: !self.interactive };
        if send_event(sink, &hello).await.is_err() {
            self.hub.leave(joined.id);
            self.viewers_changed().await;
            return None;
        }
        Some(joined)
    }

    /// Re-syncs the viewer from a fresh snapshot: on joining (`first`), or after it fell
    /// behind, when it is told so first. False when it is not back on the live stream.
    async fn catch_up(&self, id: u64, first: bool, sink: &mut Sink, source: &mut Source) -> Result<bool, axum::Error> {
        if !first {
            tracing::debug!(session = %self.session, viewer = id, "viewer fell behind; re-syncing from a snapshot");
            send_event(sink, &ViewerEvent::Resync).await?;
        }
        let t0 = std::time::Instant::now();
        let synced = self.resync(id, sink, source, first).await?;
        tracing::debug!(session = %self.session, viewer = id, took = ?t0.elapsed(), synced, "viewer re-synced");
        Ok(synced)
    }

    /// Whether to tell the viewer now that its keystrokes were dropped: at most once per
    /// [`UNDELIVERED_EVERY`], so a viewer typing on is not flooded.
    fn tell_undelivered(&self) -> bool {
        let mut told = self.undelivered_told.lock().expect("undelivered lock");
        let now = tokio::time::Instant::now();
        if told.is_some_and(|t| now < t + UNDELIVERED_EVERY) {
            return false;
        }
        *told = Some(now);
        true
    }

    /// Handles what the viewer sent: keystrokes, a resize, a request to re-sync, or the
    /// end.
    async fn on_message(&self, id: u64, msg: Option<Result<Message, axum::Error>>, sink: &mut Sink) -> Next {
        match msg {
            Some(Ok(Message::Binary(b))) => {
                if self.interactive
                    && self.state.devices.send_input(self.device, self.session, b.to_vec()).await.is_err()
                    && self.tell_undelivered()
                {
                    let message = "what you typed was not delivered: the session's device is not connected (keys are not \
                                   kept; type again once it is back)";
                    let _ = send_event(sink, &ViewerEvent::Error { message: message.into() }).await;
                }
            }
            Some(Ok(Message::Text(t))) => match serde_json::from_str::<ViewerCommand>(&t) {
                Ok(ViewerCommand::Resize { cols, rows }) if self.interactive => {
                    if let Ok((c, r)) = drover_core::names::check_size(cols.into(), rows.into()) {
                        self.resize(c, r, Some(id)).await;
                    }
                }
                Ok(ViewerCommand::Resync) if !self.local => return Next::Resync,
                Ok(ViewerCommand::Resync) => {}
                Ok(ViewerCommand::Consumed { bytes }) => return Next::Consumed(bytes),
                Ok(ViewerCommand::Resize { .. }) => {}
                Err(e) => {
                    let _ = send_event(sink, &ViewerEvent::Error { message: format!("unknown command: {e}") }).await;
                }
            },
            Some(Err(e)) if e.to_string().contains("too long") => {
                // Said with the standard code, so the client knows why.
                let reason = format!("message too big: at most {VIEWER_MESSAGE_MAX} bytes per message");
                let frame = axum::extract::ws::CloseFrame { code: axum::extract::ws::close_code::SIZE, reason: reason.into() };
                let _ = sink.send(Message::Close(Some(frame))).await;
                return Next::Close;
            }
            Some(Ok(Message::Close(_))) | None | Some(Err(_)) => return Next::Close,
            Some(Ok(_)) => {}
        }
        Next::Read
    }

    /// Sends a fresh snapshot and the bytes after it, taking in what the viewer sends on
    /// its `source` meanwhile, unless it is the viewer's `first` screen: what it types
    /// then waits for that screen (see `run`), which the shim answers at once rather than
    /// give its screen time to catch up. False when the viewer could not be put back on
    /// the live stream (no screen could be had, or the store lagged too far).
    async fn resync(&self, id: u64, sink: &mut Sink, source: &mut Source, first: bool) -> Result<bool, axum::Error> {
        let timeout = self.state.config.snapshot_timeout;
        for _ in 0..SNAPSHOT_TRIES {
            let snap = async {
                tokio::select! {
                    snap = self.state.devices.snapshot(self.device, self.session, timeout, first) => snap,
                    // The session ended while the device was busy (its shim may be gone):
                    // the final screen comes from the stored recording.
                    _ = self.hub.wait_ended() => None,
                }
            };
            let snap = if first { snap.await } else { self.meanwhile(id, snap, sink, source).await? };
            let Some(snap) = snap else { break };
            sink.send(self.binary(snap.data.into())).await?;
            if self.follow_on(id, snap.offset, sink).await? {
                return Ok(true);
            }
        }
        // The device cannot answer (disconnected, too busy, or the session ended): the
        // screen comes from the nearest checkpoint and the output stored after it.
        tracing::debug!(session = %self.session, "no snapshot from the device; rebuilding the screen from a checkpoint");
        let size = self.hub.size();
        let screen = match screens::screen_at(&self.state.store, self.session, ScreenPoint::End, size).await {
            Err(ScreenError::NotReady) => {
                let from = self.hub.latest().saturating_sub(FALLBACK_REPLAY_BYTES);
                screens::recent_screen(&self.state.store, self.session, from, size).await.map_err(ScreenError::from)
            }
            other => other,
        };
        match screen {
            Ok(t) => {
                sink.send(self.binary(screens::redraw(&t).into())).await?;
                self.follow_on(id, t.offset, sink).await
            }
            Err(e) => {
                tracing::warn!("rebuilding a viewer's screen: {e}");
                Ok(false)
            }
        }
    }

    /// Waits until access is to be checked again: every `recheck`, and at once when
    /// access changes anywhere.
    async fn access_check_due(&self, recheck: &mut tokio::time::Interval) {
        tokio::select! {
            _ = recheck.tick() => {}
            _ = self.state.access_changed.notified() => {}
        }
    }

    /// Whether the viewer may no longer drop in; if so, it has been told why.
    async fn refused(&self, sink: &mut Sink) -> bool {
        let Some(why) = self.revoked().await else { return false };
        let _ = send_event(sink, &ViewerEvent::Error { message: why }).await;
        true
    }

    /// Waits for `work` (a snapshot, which may take a while in a flood) while still taking
    /// in what the viewer sends: its keys go to the program at once (Ctrl-C in a flood is
    /// not held up by the screen), as do resizes and what it has drawn; a request to
    /// re-sync is noted for after it. Access is checked meanwhile as it is while
    /// watching. An error once the viewer has gone or may no longer drop in.
    async fn meanwhile<T>(
        &self,
        id: u64,
        work: impl std::future::Future<Output = T>,
        sink: &mut Sink,
        source: &mut Source,
    ) -> Result<T, axum::Error> {
        tokio::pin!(work);
        let mut recheck = tokio::time::interval_at(tokio::time::Instant::now() + RECHECK, RECHECK);
        loop {
            tokio::select! {
                done = &mut work => return Ok(done),
                _ = self.access_check_due(&mut recheck) => {
                    if self.refused(sink).await {
                        return Err(axum::Error::new("the viewer may no longer drop in"));
                    }
                }
                msg = source.next() => match self.on_message(id, msg, sink).await {
                    Next::Close => return Err(axum::Error::new("the viewer left during a re-sync")),
                    Next::Consumed(bytes) => {
                        self.consumed(bytes);
                    }
                    Next::Resync => self.asked_meanwhile.store(true, Ordering::Release),
                    Next::Read => {}
                },
            }
        }
    }

    /// After a snapshot taken at `offset`, sends the bytes that followed it — from the
    /// hub's ring, or first from the store when the ring no longer reaches back — and
    /// puts the viewer back on the live stream. False when it fell too far behind again
    /// (a fresh snapshot is cheaper than replaying the gap).
    async fn follow_on(&self, id: u64, mut offset: u64, sink: &mut Sink) -> Result<bool, axum::Error> {
        let mut replayed = 0usize;
        let mut waited = 0u32;
        loop {
            match self.hub.resync(id, offset) {
                Ok(after) => {
                    // A window filled holds the rest back: the next re-sync's screen
                    // takes its place.
                    for b in after {
                        if !self.send_within_window(b, sink).await? {
                            break;
                        }
                    }
                    return Ok(true);
                }
                // Ended while re-syncing: the main loop tells the viewer how.
                Err(NoResync::Gone) => return Ok(true),
                Err(NoResync::TooOld) => {}
            }
            if replayed > MAX_REPLAY_BYTES || waited > 400 {
                return Ok(false);
            }
            let chunks = match self.state.store.read_output(self.session, offset, 1 << 20).await {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!("reading output for a viewer: {e}");
                    return Ok(false);
                }
            };
            if chunks.is_empty() {
                // The store is a moment behind the hub: wait for it (at most 2 s).
                waited += 1;
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                continue;
            }
            for c in chunks {
                offset = c.offset + c.data.len() as u64;
                replayed += c.data.len();
                if !self.send_within_window(c.data, sink).await? {
                    // Off the live stream, held: the run loop re-syncs it once caught up.
                    return Ok(true);
                }
            }
        }
    }

    /// Terminal bytes as a message, counted as sent.
    fn binary(&self, data: bytes::Bytes) -> Message {
        self.sent.fetch_add(data.len() as u64, Ordering::AcqRel);
        Message::Binary(data)
    }

    /// Sends `data`, in pieces of at most [`WINDOW_PIECE`] when the viewer has a window,
    /// until the window is full; false when it is (the rest is not sent). Once the
    /// session has ended, all of it: the viewer's last screen must be whole.
    async fn send_within_window(&self, mut data: bytes::Bytes, sink: &mut Sink) -> Result<bool, axum::Error> {
        if self.window.is_none() || self.hub.ended().is_some() {
            sink.send(self.binary(data)).await?;
            return Ok(true);
        }
        while !data.is_empty() {
            if self.window_full() {
                return Ok(false);
            }
            let piece = data.split_to(data.len().min(WINDOW_PIECE));
            sink.send(self.binary(piece)).await?;
        }
        Ok(!self.window_full())
    }

    /// Counts `bytes` more the viewer is done with (never more than it was sent); true
    /// when that leaves it within half its window.
    fn consumed(&self, bytes: u64) -> bool {
        let sent = self.sent.load(Ordering::Acquire);
        let _ = self.done.fetch_update(Ordering::AcqRel, Ordering::Acquire, |d| Some(d.saturating_add(bytes).min(sent)));
        self.window.is_some_and(|w| self.ahead() <= w / 2)
    }

    /// Holds output back from the viewer (its window is full) until it is re-synced;
    /// true, for the run loop's `held`.
    fn hold_back(&self, id: u64) -> bool {
        self.hub.hold(id);
        true
    }

    /// Bytes sent that the viewer has not said it is done with.
    fn ahead(&self) -> u64 {
        self.sent.load(Ordering::Acquire).saturating_sub(self.done.load(Ordering::Acquire))
    }

    /// Whether the viewer has been sent more than its window allows.
    fn window_full(&self) -> bool {
        self.window.is_some_and(|w| self.ahead() > w)
    }

    async fn resize(&self, cols: u16, rows: u16, by: Option<u64>) {
        self.hub.resized(cols, rows, by);
        let _ = self.state.devices.send(self.device, &ServerMessage::Resize { session: self.session, cols, rows }).await;
    }

    async fn viewers_changed(&self) {
        self.state.topology.viewers_changed(&self.state, &self.hub, self.session, self.device).await;
    }
}

async fn send_event(sink: &mut Sink, e: &ViewerEvent) -> Result<(), axum::Error> {
    sink.send(Message::Text(serde_json::to_string(e).expect("serialises").into())).await
}

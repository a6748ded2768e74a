//! Replicas on one PostgreSQL database. A device's link is on one replica; a viewer,
//! the CLI or the scheduler may be on another. What must reach the device (input, a
//! resize, Stop, a snapshot request, …) is posted to the link's replica's mailbox
//! (`Relayed`), which PostgreSQL's NOTIFY wakes; answers come back the same way. A
//! viewer on another replica follows the session's output from the database, woken by
//! the link's replica after each commit, into a local hub: the same snapshot on join,
//! the same bytes, input serialised by the one link. On SQLite none of this runs
//! ([`crate::topology`]).
//!
//! The cluster sits above the device registry: it is the [`Relay`] that `Devices`
//! reaches other replicas by, and it hands mail on to devices and viewers here. Neither
//! of them imports it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use drover_core::{DeviceId, SessionId};
use drover_protocol::device::{MergeResult, ServerMessage, Worktree};
use drover_protocol::shim::Snapshot;
use drover_protocol::viewer::ViewerEvent;
use drover_store::ClusterNote;
use serde::{Deserialize, Serialize};

use crate::devices::{Answered, Delivery, Mail, Relay};
use crate::hub::Hub;
use crate::AppState;

/// How long a replica follows a session's output after it last asked to.
const WATCH_FOR: Duration = Duration::from_secs(15);
/// How often a following replica asks again (well inside [`WATCH_FOR`]).
const WATCH_EVERY: Duration = Duration::from_secs(5);
/// How often mail and followed output are looked for without a wake-up (a lost NOTIFY).
const LOOK_EVERY: Duration = Duration::from_millis(500);
/// A followed session's hub with no viewer this long is dropped.
const IDLE_MIRROR: Duration = Duration::from_secs(10);
/// How often what other replicas left behind is tidied.
const TIDY_EVERY: Duration = Duration::from_secs(60);
/// A replica not seen this long is gone for good: its links and mail are dropped.
const FORGET_AFTER: Duration = Duration::from_secs(3600);
/// A failed read of a followed session is retried after this long.
const MIRROR_RETRY: Duration = Duration::from_secs(1);

/// A message between replicas, through the addressee's mailbox.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(crate) enum Relayed {
    /// Send `msg` to `device` (linked to the addressee); answer with [`Answer::Sent`] to
    /// `from`'s request `req`, so the sender learns, as a local send would tell it,
    /// whether the message reached the link.
    Send { device: DeviceId, msg: ServerMessage, from: String, req: u64 },
    /// Keystrokes for a session on `device` (base64).
    Input { device: DeviceId, session: SessionId, data: String },
    /// Audited text; answer with [`Answer::Delivery`] to `from`'s request `req`.
    Text { device: DeviceId, session: SessionId, text: String, timeout_ms: u64, from: String, req: u64 },
    /// A screen snapshot; answer with [`Answer::Snapshot`].
    Snapshot {
        device: DeviceId,
        session: SessionId,
        timeout_ms: u64,
        /// A viewer's first screen (absent from older replicas: false).
        #[serde(default)]
        first: bool,
        from: String,
        req: u64,
    },
    /// A merge; answer with [`Answer::Merge`].
    Merge { device: DeviceId, worktree: Worktree, message: String, timeout_ms: u64, from: String, req: u64 },
    /// A clone check; answer with [`Answer::RepoCheck`].
    CheckRepo { device: DeviceId, path: String, base: Option<String>, timeout_ms: u64, from: String, req: u64 },
    /// Drop `device`'s link (its credential was revoked).
    Kick { device: DeviceId },
    /// The answer to request `req`, from `device`.
    Answer { req: u64, device: DeviceId, answer: Answer },
    /// Replica `from` follows `session`'s output: wake it after each commit.
    Watch { session: SessionId, from: String },
    /// The addressee's viewers of `session` (on `device`, linked to the addressee)
    /// changed: tell the device how many can type now, counting every replica's.
    Viewers { session: SessionId, device: DeviceId },
}

/// A device's answer, passed back to the replica that asked.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "answer", rename_all = "snake_case")]
pub(crate) enum Answer {
    /// Audited text was written (or not).
    Delivery { delivered: Option<(bool, u64, u64)>, failed: Option<String> },
    /// A snapshot (base64 redraw sequence).
    Snapshot { offset: u64, cols: u16, rows: u16, data: String },
    /// A merge's result.
    Merge { result: MergeResult },
    /// A clone check's result: why the clone is unfit, or None.
    RepoCheck { problem: Option<String> },
    /// Whether a sent message was handed to the device's link.
    Sent { ok: bool },
    /// No answer came.
    None,
}

impl Relayed {
    /// `mail` as it travels, from replica `from`.
    fn from_mail(mail: Mail, from: String) -> Relayed {
        let ms = |t: Duration| t.as_millis() as u64;
        match mail {
            Mail::Send { device, msg, req } => Relayed::Send { device, msg, from, req },
            Mail::Input { device, session, data } => Relayed::Input { device, session, data: input_body(&data) },
            Mail::Text { device, session, text, timeout, req } => {
                Relayed::Text { device, session, text, timeout_ms: ms(timeout), from, req }
            }
            Mail::Snapshot { device, session, timeout, first, req } => {
                Relayed::Snapshot { device, session, timeout_ms: ms(timeout), first, from, req }
            }
            Mail::Merge { device, worktree, message, timeout, req } => {
                Relayed::Merge { device, worktree, message, timeout_ms: ms(timeout), from, req }
            }
            Mail::CheckRepo { device, path, base, timeout, req } => {
                Relayed::CheckRepo { device, path, base, timeout_ms: ms(timeout), from, req }
            }
            Mail::Kick { device } => Relayed::Kick { device },
            Mail::Viewers { device, session } => Relayed::Viewers { session, device },
        }
    }
}

/// The mailboxes of the replicas on this database: how `Devices` reaches a device
/// linked to another replica.
pub(crate) struct Mailboxes {
    /// Where the mailboxes are.
    pub store: drover_store::Store,
    /// This replica's name: where answers come back to.
    pub replica: String,
}

impl Relay for Mailboxes {
    fn post<'a>(&'a self, replica: &'a str, mail: Mail) -> std::pin::Pin<Box<dyn std::future::Future<Output = bool> + Send + 'a>> {
        let m = Relayed::from_mail(mail, self.replica.clone());
        Box::pin(async move { post(&self.store, replica, &m).await })
    }
}

impl Answer {
    /// What the local request waits for (request `req`).
    fn answered(self, req: u64) -> Answered {
        match self {
            a @ Answer::Delivery { .. } => Answered::Delivery(delivery_from(a)),
            a @ Answer::Snapshot { .. } => Answered::Snapshot(snapshot_from(a, req)),
            a @ Answer::Merge { .. } => Answered::Merge(merge_from(a)),
            Answer::RepoCheck { problem } => Answered::RepoCheck(problem),
            Answer::Sent { ok } => Answered::Sent(ok),
            Answer::None => Answered::None,
        }
    }

    fn delivery(d: Delivery) -> Answer {
        match d {
            Delivery::Delivered { bracketed_paste, offset, t_micros } => {
                Answer::Delivery { delivered: Some((bracketed_paste, offset, t_micros)), failed: None }
            }
            Delivery::Failed(why) => Answer::Delivery { delivered: None, failed: Some(why) },
        }
    }
}

/// What this replica knows of the others.
#[derive(Default)]
pub(crate) struct Cluster {
    /// Sessions followed by other replicas, and until when.
    watchers: Mutex<HashMap<SessionId, HashMap<String, Instant>>>,
    /// Sessions this replica follows for its viewers, and when one last wanted it.
    mirrors: Mutex<HashMap<SessionId, Instant>>,
}

impl Cluster {
    /// Sessions followed by other replicas, and sessions this one follows (for
    /// `/metrics`).
    pub(crate) fn census(&self) -> (u64, u64) {
        let watchers = self.watchers.lock().expect("watchers lock").values().map(|w| w.len() as u64).sum();
        (watchers, self.mirrors.lock().expect("mirrors lock").len() as u64)
    }

    /// Whether another replica follows `session` now (its viewers wait on each commit).
    pub(crate) fn followed(&self, session: SessionId) -> bool {
        let all = self.watchers.lock().expect("watchers lock");
        let now = Instant::now();
        all.get(&session).is_some_and(|w| w.values().any(|until| *until > now))
    }

    /// The replicas following `session` now.
    pub(crate) fn watchers(&self, session: SessionId) -> Vec<String> {
        let mut all = self.watchers.lock().expect("watchers lock");
        let Some(w) = all.get_mut(&session) else { return Vec::new() };
        let now = Instant::now();
        w.retain(|_, until| *until > now);
        let list: Vec<String> = w.keys().cloned().collect();
        if list.is_empty() {
            all.remove(&session);
        }
        list
    }
}

/// Starts this replica's part: staying on the replica list, learning where devices are
/// linked, and reading its mail.
pub(crate) fn spawn(state: AppState) {
    let s = state.clone();
    tokio::spawn(async move {
        let every = (s.config.lease_ttl / 3).min(Duration::from_secs(1));
        let mut tidied = Instant::now();
        loop {
            if tidied.elapsed() >= TIDY_EVERY {
                tidied = Instant::now();
                if let Err(e) = s.store.forget_replicas(FORGET_AFTER).await {
                    tracing::warn!("forgetting replicas gone for good: {e}");
                }
                if let Err(e) = s.store.forget_login_attempts(s.config.login_window).await {
                    tracing::warn!("forgetting sign-in attempts that count no more: {e}");
                }
                s.cluster.watchers.lock().expect("watchers lock").retain(|_, w| {
                    w.retain(|_, until| *until > Instant::now());
                    !w.is_empty()
                });
            }
            if let Err(e) = s.store.replica_seen(&s.replica, &s.config.public_url).await {
                tracing::warn!("recording this replica as alive: {e}");
            }
            match s.store.device_links(s.config.lease_ttl).await {
                Ok(links) => s.devices.set_remote(links.into_iter().filter(|(_, r)| *r != s.replica).collect()),
                Err(e) => tracing::warn!("reading where devices are linked: {e}"),
            }
            tokio::time::sleep(every).await;
        }
    });
    tokio::spawn(async move {
        let mut notes = state.store.cluster_notes().expect("PostgreSQL listens");
        loop {
            match take_mail(&state).await {
                Ok(true) => continue,
                Ok(false) => {}
                Err(e) => tracing::warn!("reading this replica's mail: {e}"),
            }
            let mine = |n: &ClusterNote| matches!(n, ClusterNote::Mail { replica } if *replica == state.replica);
            if !wait_for_note(&mut notes, mine).await {
                return;
            }
        }
    });
}

/// Waits for a note `wanted` picks, or [`LOOK_EVERY`] (a notice can be lost); false
/// once no more notes can come.
async fn wait_for_note(notes: &mut tokio::sync::broadcast::Receiver<ClusterNote>, wanted: impl Fn(&ClusterNote) -> bool) -> bool {
    let deadline = tokio::time::sleep(LOOK_EVERY);
    tokio::pin!(deadline);
    loop {
        tokio::select! {
            _ = &mut deadline => return true,
            n = notes.recv() => match n {
                Ok(n) if wanted(&n) => return true,
                Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return false,
            },
        }
    }
}

/// Handles a batch of mail; true if there may be more.
async fn take_mail(state: &AppState) -> Result<bool, drover_store::StoreError> {
    let mail = state.store.take_mail(&state.replica).await?;
    let more = mail.len() >= drover_store::MAIL_BATCH;
    for body in mail {
        match serde_json::from_str::<Relayed>(&body) {
            Ok(m) => handle(state, m).await,
            Err(e) => tracing::warn!("undecodable mail from another replica: {e}"),
        }
    }
    Ok(more)
}

/// Handles mail from another replica: what is for a device goes to its link here only
/// (mail is never relayed further).
async fn handle(state: &AppState, m: Relayed) {
    let devices = &state.devices;
    match m {
        Relayed::Send { device, msg, from, req } => {
            let ok = devices.send_by(devices.local(device), device, &msg).await.is_ok();
            reply(state, &from, req, device, Answer::Sent { ok }).await;
        }
        Relayed::Input { device, session, data } => {
            if let Ok(data) = B64.decode(data) {
                let _ = devices.send_input_by(devices.local(device), device, session, data).await;
            }
        }
        Relayed::Kick { device } => devices.kick_local(device),
        Relayed::Watch { session, from } => {
            state.cluster.watchers.lock().expect("watchers lock").entry(session).or_default().insert(from, Instant::now() + WATCH_FOR);
        }
        Relayed::Viewers { session, device } => crate::viewers::tell(state, device, &[session], false).await,
        Relayed::Answer { req, device, answer } => devices.answered(req, device, answer.answered(req)),
        // Requests wait on the device: answered from a task of their own, so one slow
        // device does not hold up this replica's other mail.
        Relayed::Text { device, session, text, timeout_ms, from, req } => {
            let state = state.clone();
            tokio::spawn(async move {
                let answer = match state
                    .devices
                    .send_text_by(state.devices.local(device), device, session, text, Duration::from_millis(timeout_ms))
                    .await
                {
                    Ok(d) => Answer::delivery(d),
                    Err(_) => Answer::None,
                };
                reply(&state, &from, req, device, answer).await;
            });
        }
        Relayed::Snapshot { device, session, timeout_ms, first, from, req } => {
            let state = state.clone();
            tokio::spawn(async move {
                let answer = match state
                    .devices
                    .snapshot_by(state.devices.local(device), device, session, Duration::from_millis(timeout_ms), first)
                    .await
                {
                    Some(s) => Answer::Snapshot { offset: s.offset, cols: s.cols, rows: s.rows, data: B64.encode(&s.data) },
                    None => Answer::None,
                };
                reply(&state, &from, req, device, answer).await;
            });
        }
        Relayed::CheckRepo { device, path, base, timeout_ms, from, req } => {
            let state = state.clone();
            tokio::spawn(async move {
                let answer = match state
                    .devices
                    .check_repo_by(state.devices.local(device), device, path, base, Duration::from_millis(timeout_ms))
                    .await
                {
                    Ok(problem) => Answer::RepoCheck { problem },
                    Err(_) => Answer::None,
                };
                reply(&state, &from, req, device, answer).await;
            });
        }
        Relayed::Merge { device, worktree, message, timeout_ms, from, req } => {
            let state = state.clone();
            tokio::spawn(async move {
                let answer = match state
                    .devices
                    .merge_by(state.devices.local(device), device, worktree, message, Duration::from_millis(timeout_ms))
                    .await
                {
                    Ok(result) => Answer::Merge { result },
                    Err(_) => Answer::None,
                };
                reply(&state, &from, req, device, answer).await;
            });
        }
    }
}

async fn reply(state: &AppState, to: &str, req: u64, device: DeviceId, answer: Answer) {
    post(&state.store, to, &Relayed::Answer { req, device, answer }).await;
}

/// Posts `m` to `replica`'s mailbox; false if it could not be stored.
pub(crate) async fn post(store: &drover_store::Store, replica: &str, m: &Relayed) -> bool {
    let body = serde_json::to_string(m).expect("relayed messages serialise");
    match store.post(replica, &body).await {
        Ok(()) => true,
        Err(e) => {
            tracing::warn!("posting to replica {replica}: {e}");
            false
        }
    }
}

/// Turns a relayed answer back into what the local request waits for.
fn snapshot_from(answer: Answer, req: u64) -> Option<Snapshot> {
    match answer {
        Answer::Snapshot { offset, cols, rows, data } => Some(Snapshot { req, offset, cols, rows, data: B64.decode(data).ok()? }),
        _ => None,
    }
}

/// Audited text's delivery, from its relayed answer.
fn delivery_from(answer: Answer) -> Option<Delivery> {
    match answer {
        Answer::Delivery { delivered: Some((bracketed_paste, offset, t_micros)), .. } => {
            Some(Delivery::Delivered { bracketed_paste, offset, t_micros })
        }
        Answer::Delivery { failed: Some(why), .. } => Some(Delivery::Failed(why)),
        _ => None,
    }
}

/// A merge's result, from its relayed answer.
fn merge_from(answer: Answer) -> Option<MergeResult> {
    match answer {
        Answer::Merge { result } => Some(result),
        _ => None,
    }
}

/// Input bytes as mail carries them.
fn input_body(data: &[u8]) -> String {
    B64.encode(data)
}

/// Tells the replicas following any of `sessions` that more of their output is stored
/// (without waiting: the output writer calls this after each commit).
pub(crate) fn announce_output(state: &AppState, sessions: Vec<SessionId>) {
    let wakes: Vec<(String, SessionId)> =
        sessions.into_iter().flat_map(|s| state.cluster.watchers(s).into_iter().map(move |r| (r, s))).collect();
    if wakes.is_empty() {
        return;
    }
    let store = state.store.clone();
    tokio::spawn(async move {
        for (replica, session) in wakes {
            if let Err(e) = store.announce_output(&replica, session).await {
                tracing::debug!("waking replica {replica}: {e}");
            }
        }
    });
}

/// Makes sure this replica follows `session` (its device linked to another replica)
/// into `hub` for its viewers; also says it is still wanted.
pub(crate) fn follow(state: &AppState, hub: Arc<Hub>, session: SessionId, device: DeviceId) {
    if state.devices.is_local(device) {
        return;
    }
    if state.cluster.mirrors.lock().expect("mirrors lock").insert(session, Instant::now()).is_some() {
        return;
    }
    // The hub viewers find from now on: the one in the map (a viewer may hold one
    // dropped a moment ago), else this one, put back.
    let hub = state.hubs.adopt(session, hub);
    let state = state.clone();
    tokio::spawn(async move {
        // A store error (a dropped connection, say) is retried: the viewers stay.
        let keep = loop {
            match mirror(&state, &hub, session, device).await {
                Ok(keep) => break keep,
                Err(e) => {
                    tracing::warn!(%session, "following a session on another replica (retrying): {e}");
                    tokio::time::sleep(MIRROR_RETRY).await;
                }
            }
        };
        state.cluster.mirrors.lock().expect("mirrors lock").remove(&session);
        if !keep {
            state.hubs.remove_if(session, &hub);
        }
    });
}

/// Feeds `hub` from the stored output until the session ends, its device's link comes
/// to this replica (true: the link feeds the hub from now on, so its viewers stay), or
/// nobody watches.
async fn mirror(state: &AppState, hub: &Arc<Hub>, session: SessionId, device: DeviceId) -> Result<bool, drover_store::StoreError> {
    let mut notes = state.store.cluster_notes().expect("PostgreSQL listens");
    let mut watched_at: Option<Instant> = None;
    let mut idle_since: Option<Instant> = None;
    // The size in the row when last read: a change is a resize the device reported.
    let mut size: Option<(u16, u16)> = None;
    // The replica the device's link was on when last asked: a new one is told of the
    // viewers here (what they changed meanwhile went to the old one, or nowhere).
    let mut linked_to: Option<String> = None;
    loop {
        // A link come here was told of every replica's viewers as it opened.
        if state.devices.is_local(device) {
            return Ok(true);
        }
        // A link that is new (or back after a gap) hears of the viewers here.
        let replica = state.devices.remote_replica(device);
        if let Some(replica) = replica.as_ref().filter(|r| linked_to.as_ref() != Some(*r)) {
            if hub.attached() > 0 {
                post(&state.store, replica, &Relayed::Viewers { session, device }).await;
            }
            watched_at = None;
        }
        linked_to = replica;
        if watched_at.is_none_or(|t| t.elapsed() >= WATCH_EVERY) {
            if let Some(replica) = &linked_to {
                post(&state.store, replica, &Relayed::Watch { session, from: state.replica.clone() }).await;
                watched_at = Some(Instant::now());
            }
        }
        // The row first: output stored before it says "ended" is read below, so the
        // end reaches viewers after every byte. Its length is what is committed, so
        // reading stops there without asking once more for nothing (a keystroke's echo
        // typed here waits on each round trip).
        let row = state.store.session(session).await?;
        let stored = row.as_ref().map_or(u64::MAX, |r| r.output_bytes);
        while hub.latest() < stored {
            let chunks = state.store.read_output(session, hub.latest(), 1 << 20).await?;
            if chunks.is_empty() {
                break;
            }
            for c in chunks {
                hub.publish(c.offset, c.data);
            }
        }
        if let Some(r) = &row {
            if size.is_some_and(|s| s != (r.cols, r.rows)) {
                hub.sized(r.cols, r.rows);
            }
            size = Some((r.cols, r.rows));
        }
        match row {
            Some(r) if !r.outcome.is_live() => {
                hub.end(ViewerEvent::Ended { outcome: r.outcome, exit_code: r.exit_code, reason: r.reason.clone() });
                return Ok(false);
            }
            None => return Ok(false),
            Some(_) => {}
        }
        let wanted = state.cluster.mirrors.lock().expect("mirrors lock").get(&session).is_some_and(|t| t.elapsed() < IDLE_MIRROR);
        if hub.attached() == 0 && !wanted {
            let since = *idle_since.get_or_insert_with(Instant::now);
            if since.elapsed() >= IDLE_MIRROR {
                return Ok(false);
            }
        } else {
            idle_since = None;
        }
        let more = |n: &ClusterNote| matches!(n, ClusterNote::Output { replica, session: s } if *replica == state.replica && *s == session);
        if !wait_for_note(&mut notes, more).await {
            return Ok(false);
        }
    }
}

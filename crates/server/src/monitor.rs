//! The stale monitor (seed 001 "When a session goes quiet"): every `monitor_every` it
//! looks at every live session, flags the ones whose device has gone silent or whose
//! sandbox has retired, and marks lost the ones still flagged at the next check (their
//! stage is then staffed again, like any run that ended without a hand-off). A task's
//! run that has stalled (quiet, no progress, not waiting on a person) is replaced.
//!
//! What it reads and writes goes through [`LivenessStore`] and [`LiveRuns`]; the
//! decisions in between are [`Monitor`]'s, tested with fakes of both.

use std::future::Future;
use std::time::Duration;

use chrono::{DateTime, Utc};
use drover_core::liveness::{flag, recheck, stalled, stalled_reason, LivenessRules, Observed, StaleFlag, Verdict};
use drover_core::{DeviceId, Outcome, RunEnd, SessionId, TaskId};
use drover_protocol::device::ServerMessage;
use drover_store::{LiveCheck, LiveGlance, Store, StoreError};

use crate::leases::Monitor as Lease;
use crate::{ingest, AppState};

#[cfg(test)]
mod tests;

type Res<T> = Result<T, StoreError>;

/// Runs the monitor until the process ends (while this server holds its lease).
pub fn spawn(state: AppState) {
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(state.config.monitor_every).await;
            if !state.leases.holds(Lease::Stale) {
                continue;
            }
            if let Err(e) = check(&state).await {
                tracing::warn!("stale monitor: {e}");
            }
        }
    });
}

/// One check of every live session (see [`Monitor::check`]).
pub async fn check(state: &AppState) -> Result<(), StoreError> {
    let monitor = Monitor { store: &state.store, runs: state, rules: &state.config.liveness, stall_after: state.config.stall_after };
    monitor.check().await
}

/// A live session's run, as the monitor decides on it and ends it.
#[derive(Debug, Clone)]
pub(crate) struct Watched {
    /// Its flag, contact and sandbox, as the sweep sees them.
    pub glance: LiveGlance,
    /// Where it runs: whose link shows its output, and who is told to stop it.
    pub device: DeviceId,
    /// Its device's name, for the log and its end's record.
    pub device_name: String,
    /// The task it works for, if any (only a task's run can stall).
    pub task: Option<TaskId>,
    /// Its work was handed off: it is on its way out, not stalled.
    pub handed_off: bool,
    /// Its program runs (a run still starting has not had a chance to print).
    pub running: bool,
    /// When its program started, else when it was created.
    pub started_at: String,
    /// When its last output was stored.
    pub last_output_at: Option<String>,
    /// Output stored so far: its length at the end, when it is ended here.
    pub output_bytes: u64,
}

impl From<LiveCheck> for Watched {
    fn from(c: LiveCheck) -> Watched {
        let glance = c.glance();
        let s = c.session;
        Watched {
            glance,
            device: s.device,
            device_name: s.device_name,
            task: s.task,
            handed_off: s.handed_off.is_some(),
            running: s.outcome == Outcome::Running,
            started_at: s.started_at.unwrap_or(s.created_at),
            last_output_at: s.last_output_at,
            output_bytes: s.output_bytes,
        }
    }
}

/// What the monitor reads and writes in the database.
pub(crate) trait LivenessStore: Send + Sync {
    /// Every live session, as the sweep sees it.
    fn live_glances(&self) -> impl Future<Output = Res<Vec<LiveGlance>>> + Send;
    /// A live session read afresh for a closer look (None: no longer live).
    fn watched(&self, session: SessionId) -> impl Future<Output = Res<Option<Watched>>> + Send;
    /// When the run last showed evidence of progress.
    fn last_progress_at(&self, session: SessionId) -> impl Future<Output = Res<Option<String>>> + Send;
    /// When a person last answered the task's question or resolved its blocker.
    fn last_note_closed_at(&self, task: TaskId) -> impl Future<Output = Res<Option<String>>> + Send;
    /// Whether the task waits on a person (an open note).
    fn waiting_on_person(&self, task: TaskId) -> impl Future<Output = Res<bool>> + Send;
    /// Raises or clears the session's flag; true if it changed.
    fn set_stale_flag(&self, session: SessionId, flag: Option<StaleFlag>) -> impl Future<Output = Res<bool>> + Send;
}

impl LivenessStore for Store {
    fn live_glances(&self) -> impl Future<Output = Res<Vec<LiveGlance>>> + Send {
        Store::live_glances(self)
    }

    async fn watched(&self, session: SessionId) -> Res<Option<Watched>> {
        Ok(self.live_check(session).await?.map(Watched::from))
    }

    async fn last_progress_at(&self, session: SessionId) -> Res<Option<String>> {
        Ok(self.last_progress(session).await?.map(|(_, at)| at))
    }

    fn last_note_closed_at(&self, task: TaskId) -> impl Future<Output = Res<Option<String>>> + Send {
        Store::last_note_closed_at(self, task)
    }

    fn waiting_on_person(&self, task: TaskId) -> impl Future<Output = Res<bool>> + Send {
        Store::waiting_on_person(self, task)
    }

    fn set_stale_flag(&self, session: SessionId, flag: Option<StaleFlag>) -> impl Future<Output = Res<bool>> + Send {
        Store::set_stale_flag(self, session, flag)
    }
}

/// Where a run's device is linked, as the monitor needs to know it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LinkSeen {
    /// Not connected: its output is not seen, so its quiet proves nothing.
    Away,
    /// Connected to this server, which saw its last output this long ago (None: no hub
    /// here, so the database's record counts).
    Here(Option<Duration>),
    /// Connected to another replica: the database records when its output came.
    Elsewhere,
}

/// What the monitor needs of the live runs: their links, and ending one.
pub(crate) trait LiveRuns: Send + Sync {
    /// Where `device` is linked, and how long `session` has been quiet on a link here.
    fn link(&self, device: DeviceId, session: SessionId) -> LinkSeen;
    /// Ends a live run as lost (its stage is staffed again), and has its device stop it.
    fn end_lost(&self, run: &Watched, end: RunEnd) -> impl Future<Output = Res<()>> + Send;
}

impl LiveRuns for AppState {
    fn link(&self, device: DeviceId, session: SessionId) -> LinkSeen {
        if self.devices.is_local(device) {
            LinkSeen::Here(self.hubs.get(session).map(|h| h.since_output()))
        } else if self.devices.is_connected(device) {
            LinkSeen::Elsewhere
        } else {
            LinkSeen::Away
        }
    }

    /// A device that is away is told when it reconnects (the run is then not among
    /// those the server resumes).
    async fn end_lost(&self, run: &Watched, end: RunEnd) -> Res<()> {
        let session = run.glance.session;
        tracing::warn!(%session, device = %run.device_name, "marked lost: {end:?}");
        let report = ingest::EndReport::now(end, run.output_bytes);
        ingest::end_session(self, run.device, &run.device_name, session, &report).await?;
        // Whoever's end was stored, the run is over: its device is told to stop it.
        if self.store.session(session).await?.is_some_and(|r| !r.outcome.is_live()) {
            let _ = self.devices.send(run.device, &ServerMessage::Release { session }).await;
        }
        Ok(())
    }
}

fn age(now: DateTime<Utc>, at: Option<&str>) -> Option<Duration> {
    let t = drover_store::parse_time(at?)?;
    Some((now - t).to_std().unwrap_or_default())
}

/// What the monitor knows about one live session now.
fn observe(now: DateTime<Utc>, g: &LiveGlance) -> Observed {
    // A new session gets the same window from its creation as a device's silence.
    let since_created = age(now, Some(&g.created_at)).unwrap_or_default();
    let since_contact = age(now, g.last_contact_at.as_deref()).map_or(since_created, |d| d.min(since_created));
    let sandbox_finished_for = if g.sandbox_finished { age(now, Some(&g.sandbox_changed_at)) } else { None };
    Observed { since_contact, sandbox_finished_for, device_revoked: g.device_revoked }
}

/// How a run still flagged `f` at the recheck ends.
fn lost_end(f: StaleFlag) -> RunEnd {
    let reason = f.lost_reason().to_string();
    match f {
        StaleFlag::DeviceSilent | StaleFlag::DeviceRevoked => RunEnd::DeviceLost { reason },
        StaleFlag::SandboxRetired => RunEnd::OutlivedSandbox { reason },
    }
}

/// The monitor's rules, over its store and runs.
pub(crate) struct Monitor<'a, S, R> {
    /// What it reads and flags.
    pub store: &'a S,
    /// The runs' links, and how a lost run is ended.
    pub runs: &'a R,
    /// When a session earns a flag.
    pub rules: &'a LivenessRules,
    /// How long a task's run may be quiet without progress before it is replaced.
    pub stall_after: Duration,
}

impl<S: LivenessStore, R: LiveRuns> Monitor<'_, S, R> {
    /// One check of every live session; a failure on one is logged and the rest go on.
    /// A glance at each tells which need a closer look: one with a flag to raise or
    /// clear, or a task's run (which may have stalled). The rest, nearly all of a
    /// fleet, cost no more than their glance.
    pub async fn check(&self) -> Res<()> {
        let now = Utc::now();
        for g in self.store.live_glances().await? {
            if !self.needs_look(now, &g) {
                continue;
            }
            let checked = match self.store.watched(g.session).await {
                Ok(Some(w)) => self.check_one(&w).await,
                Ok(None) => Ok(()),
                Err(e) => Err(e),
            };
            if let Err(e) = checked {
                tracing::warn!(session = %g.session, "stale monitor: {e}");
            }
        }
        Ok(())
    }

    /// Whether a glance calls for a closer look.
    fn needs_look(&self, now: DateTime<Utc>, g: &LiveGlance) -> bool {
        g.task_run || g.stale_flag.is_some() || flag(self.rules, &observe(now, g)).is_some()
    }

    /// What the flag rules say of a session now, given the flag it carries.
    fn verdict(&self, now: DateTime<Utc>, g: &LiveGlance) -> Verdict {
        recheck(g.stale_flag, flag(self.rules, &observe(now, g)))
    }

    async fn check_one(&self, w: &Watched) -> Res<()> {
        if self.is_stalled(w, Utc::now()).await? {
            return self.runs.end_lost(w, RunEnd::Lost { reason: stalled_reason(self.stall_after) }).await;
        }
        let session = w.glance.session;
        match self.verdict(Utc::now(), &w.glance) {
            Verdict::Clear => {
                if w.glance.stale_flag.is_some() {
                    self.store.set_stale_flag(session, None).await?;
                }
            }
            Verdict::Flag(f) => {
                if self.store.set_stale_flag(session, Some(f)).await? {
                    tracing::warn!(%session, device = %w.device_name, "flagged: {}", f.label());
                }
            }
            Verdict::Lost(_) => {
                // The read above may be stale (the device may have reconnected meanwhile):
                // decide again on a fresh read, right before ending the run.
                let Some(fresh) = self.store.watched(session).await? else { return Ok(()) };
                if let Verdict::Lost(f) = self.verdict(Utc::now(), &fresh.glance) {
                    self.runs.end_lost(&fresh, lost_end(f)).await?;
                }
            }
        }
        Ok(())
    }

    /// Whether a task's live run has stalled (its device connected, so its output is seen).
    async fn is_stalled(&self, w: &Watched, now: DateTime<Utc>) -> Res<bool> {
        let Some(task) = w.task else { return Ok(false) };
        // A run whose work was handed off is on its way out, not stalled; one not yet
        // started (a slow checkout) has not had a chance to print.
        if w.glance.stale_flag.is_some() || w.handed_off || !w.running {
            return Ok(false);
        }
        let link = self.runs.link(w.device, w.glance.session);
        if link == LinkSeen::Away {
            return Ok(false);
        }
        let since_start = age(now, Some(&w.started_at)).unwrap_or_default();
        // Its own evidence of progress, or a person answering its task's question or
        // resolving its blocker (which it then needs time to act on).
        let progress = self.store.last_progress_at(w.glance.session).await?;
        let answered = self.store.last_note_closed_at(task).await?;
        let since_progress = progress.into_iter().chain(answered).max().and_then(|at| age(now, Some(&at)));
        let waiting = self.store.waiting_on_person(task).await?;
        // Quiet for: as this server's link saw it, or (its device linked to another
        // replica) as the database recorded it.
        let since_output = match link {
            LinkSeen::Here(Some(quiet)) => quiet,
            _ => age(now, w.last_output_at.as_deref()).unwrap_or(since_start),
        };
        Ok(stalled(self.stall_after, since_output, since_progress, since_start, waiting))
    }
}

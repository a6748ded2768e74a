//! The device link's gate: every message that names a session is admitted only if the
//! session runs on the link's device, and output only where it continues the stored
//! stream (`drover_core::device_link` decides; this module looks sessions up in the store
//! and logs what it refuses).

use std::time::Instant;

use drover_core::device_link::{LinkGuard, Owner, Verdict};
use drover_core::{DeviceId, SessionId};

use crate::AppState;

/// What the link does with a message.
#[derive(Debug, PartialEq, Eq)]
pub enum Admit {
    /// Handle it.
    Take,
    /// Drop it (it was logged); the link goes on.
    Drop,
}

/// One link's gate.
pub struct Gate {
    device: DeviceId,
    name: String,
    guard: LinkGuard,
    clock: Instant,
}

impl Gate {
    /// A gate for the link of `device` (called `name` in logs).
    pub fn new(device: DeviceId, name: &str) -> Self {
        Gate { device, name: name.to_string(), guard: LinkGuard::new(), clock: Instant::now() }
    }

    /// Records a session the link resumed at `stored` (from the welcome), so its first
    /// output needs no lookup.
    pub fn resumed(&mut self, session: SessionId, stored: u64, created_at: &str) {
        let owner = Owner::This { stored, age_micros: age_micros(created_at), end: None };
        self.guard.learn(session, owner, self.now());
    }

    /// Forgets an ended session.
    pub fn ended(&mut self, session: SessionId) {
        self.guard.forget(session);
    }

    /// Admits a message naming `session`; Err closes the link.
    pub async fn admit(&mut self, state: &AppState, session: SessionId) -> Result<Admit, String> {
        let mut verdict = self.guard.check(session);
        if verdict == Verdict::LookUp {
            self.look_up(state, session).await?;
            verdict = self.guard.check(session);
        }
        self.settle(session, verdict)
    }

    /// Admits `len` bytes of output at `offset` for `session`; Err closes the link.
    pub async fn admit_output(&mut self, state: &AppState, session: SessionId, offset: u64, len: u64) -> Result<Admit, String> {
        let mut verdict = self.guard.check_output(session, offset, len, self.now());
        if verdict == Verdict::LookUp {
            self.look_up(state, session).await?;
            verdict = self.guard.check_output(session, offset, len, self.now());
        }
        self.settle(session, verdict)
    }

    fn settle(&self, session: SessionId, verdict: Verdict) -> Result<Admit, String> {
        match verdict {
            Verdict::Take => Ok(Admit::Take),
            Verdict::Refuse(reason) => {
                tracing::warn!(device = %self.name, %session, "refused a message from the device: {reason}");
                Ok(Admit::Drop)
            }
            Verdict::Close(reason) => {
                tracing::warn!(device = %self.name, %session, "closing the device link: {reason}");
                Err(reason)
            }
            Verdict::LookUp => Err(format!("session {session} could not be looked up")),
        }
    }

    async fn look_up(&mut self, state: &AppState, session: SessionId) -> Result<(), String> {
        let row = state.store.session(session).await.map_err(|e| format!("looking up session {session}: {e}"))?;
        let owner = match row {
            Some(r) if r.device == self.device => Owner::This {
                stored: r.output_bytes,
                age_micros: age_micros(&r.created_at),
                end: if r.outcome.is_live() { None } else { r.final_offset },
            },
            _ => Owner::Other,
        };
        self.guard.learn(session, owner, self.now());
        Ok(())
    }

    fn now(&self) -> u64 {
        self.clock.elapsed().as_micros().min(u64::MAX as u128) as u64
    }
}

/// Microseconds since `created_at` by this server's clock (0 if it cannot be read).
fn age_micros(created_at: &str) -> u64 {
    drover_store::parse_time(created_at).map(|t| (chrono::Utc::now() - t).num_microseconds().unwrap_or(i64::MAX).max(0) as u64).unwrap_or(0)
}

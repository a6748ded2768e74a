//! "Why isn't my task moving?": the facts `core::why` answers from, read for one task.

use drover_core::turn::Turn;
use drover_core::why::{why, LiveRun, Place, Reach, WhyFacts};
use drover_store::{NoteRow, SessionRow, TaskRow};

use crate::{ApiError, AppState};

/// The one line for `t`, given its runs and notes as `GET /tasks/{id}` read them.
pub(super) async fn why_line(state: &AppState, t: &TaskRow, runs: &[SessionRow], notes: &[NoteRow]) -> Result<String, ApiError> {
    let turn = t.turn();
    let (places, ahead) = match turn {
        Turn::Queued => (places(state, t).await?, state.store.queued_ahead(t).await?),
        _ => (Vec::new(), 0),
    };
    let live = runs.iter().rev().find(|s| s.outcome.is_live());
    let run_id = live.map(|s| s.id.to_string());
    let run = live.zip(run_id.as_deref()).map(|(s, id)| LiveRun { id, device: &s.device_name, flag: s.stale_flag.map(|f| f.label()) });
    let waiting_id = waiting_id(state, t, &turn, notes).await?;
    let places: Vec<Place> =
        places.iter().map(|(name, busy, slots, reach)| Place { name, busy: *busy, slots: *slots, reach: *reach }).collect();
    let task = t.id.to_string();
    Ok(why(&WhyFacts { task: &task, turn, places: &places, ahead, run, waiting_id: waiting_id.as_deref() }))
}

/// The id a person's answer names: the open note, or what its run waits on.
async fn waiting_id(state: &AppState, t: &TaskRow, turn: &Turn<'_>, notes: &[NoteRow]) -> Result<Option<String>, ApiError> {
    Ok(match turn {
        Turn::Answer(_) | Turn::Blocked(_) => notes.iter().find(|n| n.closed_at.is_none()).map(|n| n.id.to_string()),
        Turn::Waiting(..) => state.store.task_attention(t.id).await?.first().map(|a| a.id.to_string()),
        _ => None,
    })
}

/// The devices that could run `t`'s stage: those with its repository (only its
/// sandbox's device once it has one), with their load and whether they can take a run.
async fn places(state: &AppState, t: &TaskRow) -> Result<Vec<(String, u32, u32, Reach)>, ApiError> {
    let (window, now) = (state.config.liveness.device_silent_after, chrono::Utc::now());
    let mut out = Vec::new();
    for d in state.store.list_devices(t.workspace).await? {
        if t.sandbox_device.is_some_and(|s| s != d.id) || d.revoked_at.is_some() {
            continue;
        }
        if state.store.device_repo_path(d.id, t.repo).await?.is_none() {
            continue;
        }
        let reach = match (state.devices.is_connected(d.id), crate::scheduler::is_silent(window, now, &d)) {
            (false, _) => Reach::Offline,
            (true, true) => Reach::Silent,
            (true, false) => Reach::Connected,
        };
        out.push((d.name, d.live_sessions, d.slots, reach));
    }
    Ok(out)
}

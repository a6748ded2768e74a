//! "Probably waiting": for a task run whose harness reports nothing through hooks, a
//! guess that it waits on a person, from a screen still for `--guess-after-secs` whose
//! line at the cursor looks like a prompt (or whose program last turned bracketed paste
//! on, as line editors do while they wait for a line). Labelled a guess everywhere it
//! shows; cleared as soon as output resumes. Each server guesses for the runs whose
//! device is linked to it: it sees their output first-hand.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use drover_core::attention::{looks_like_prompt, reports_waiting, MAX_GUESS_LINE};
use drover_core::harness::Harness;
use drover_core::SessionId;
use drover_store::{NewAttention, StoreError};

use crate::hub::Hub;
use crate::AppState;

/// Who raises a guess, in the run's activity.
const GUESSER: &str = "stillness guess";
/// The output read back to rebuild the screen's last lines.
const TAIL: u64 = 64 * 1024;

/// Runs the guesser until the process ends, when guessing is on.
pub fn spawn(state: AppState) {
    let Some(after) = state.config.guess_after else { return };
    let every = (after / 4).clamp(Duration::from_millis(100), Duration::from_secs(5));
    tokio::spawn(async move {
        let mut seen: HashMap<SessionId, Seen> = HashMap::new();
        loop {
            tokio::time::sleep(every).await;
            if let Err(e) = round(&state, after, &mut seen).await {
                tracing::warn!("guessing which runs wait on a person: {e}");
            }
        }
    });
}

/// What the guesser knows of a live session here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Seen {
    /// It works for no task: never guessed about (a session's task never changes).
    NoTask,
    /// A task run, read at this output offset: each stillness is read once.
    ReadAt(u64),
}

/// One look at every live session linked here (its hub): the still task runs are read.
/// The hubs say which are still, so a fleet's sessions are not all read from the
/// database every round; whether a session works for a task is asked once, for all the
/// newly still together.
async fn round(state: &AppState, after: Duration, seen: &mut HashMap<SessionId, Seen>) -> Result<(), StoreError> {
    let hubs: HashMap<SessionId, Arc<Hub>> = state.hubs.all().into_iter().collect();
    seen.retain(|s, _| hubs.contains_key(s));
    let mut still = Vec::new();
    for (session, hub) in &hubs {
        let latest = hub.latest();
        match seen.get(session) {
            Some(Seen::NoTask) => continue,
            Some(Seen::ReadAt(at)) if *at == latest => continue,
            // Output resumed since it was read: a guess made then no longer holds.
            Some(Seen::ReadAt(_)) => {
                seen.remove(session);
                state.store.clear_guesses(*session).await?;
            }
            None => {}
        }
        if hub.since_output() >= after {
            still.push((*session, latest));
        }
    }
    // None of these is known yet (a known one is still at the offset it was read at).
    let ids: Vec<SessionId> = still.iter().map(|(s, _)| *s).collect();
    let tasks = state.store.task_runs_among(&ids).await?;
    for (session, latest) in still {
        if !tasks.contains(&session) {
            seen.insert(session, Seen::NoTask);
            continue;
        }
        seen.insert(session, Seen::ReadAt(latest));
        guess(state, session, &hubs[&session]).await?;
    }
    Ok(())
}

/// Reads a still task run's screen; raises a guess if it looks like it asks something.
async fn guess(state: &AppState, session: SessionId, hub: &Hub) -> Result<(), StoreError> {
    let Some(row) = state.store.session(session).await? else { return Ok(()) };
    let harness = state.store.run_harness(session).await?.and_then(|h| Harness::parse(&h).ok());
    if harness.is_none_or(reports_waiting) || !state.store.session_attention(session).await?.is_empty() {
        return Ok(());
    }
    let Some(line) = prompt_line(hub) else { return Ok(()) };
    state.store.raise_attention(&row, &NewAttention::Guess(line), GUESSER).await?;
    Ok(())
}

/// The line a still screen asks with, if it looks like it asks.
fn prompt_line(hub: &Hub) -> Option<String> {
    let latest = hub.latest();
    let tail: Vec<u8> = hub.since(latest.saturating_sub(TAIL)).ok()?.concat();
    let (cols, rows) = hub.size();
    Some(asking_line(&tail, rows, cols)).flatten()
}

/// The line at the cursor of the screen `tail` draws (or the last line written above
/// it), when it looks like a prompt or the program last turned bracketed paste on.
fn asking_line(tail: &[u8], rows: u16, cols: u16) -> Option<String> {
    let mut parser = vt100::Parser::new(rows, cols, 0);
    parser.process(tail);
    let screen = parser.screen();
    let (row, _) = screen.cursor_position();
    let lines: Vec<String> = screen.rows(0, cols).take(usize::from(row) + 1).collect();
    let line = lines.iter().rev().find(|l| !l.trim().is_empty())?.trim_end().to_string();
    let paste_on = |t: &[u8]| t.windows(8).rposition(|w| w == b"\x1b[?2004h");
    let paste_off = |t: &[u8]| t.windows(8).rposition(|w| w == b"\x1b[?2004l");
    let waits_for_a_line = paste_on(tail).is_some_and(|on| paste_off(tail).is_none_or(|off| off < on));
    let line: String = line.chars().take(MAX_GUESS_LINE).collect();
    (looks_like_prompt(&line) || waits_for_a_line).then_some(line)
}

#[cfg(test)]
mod tests {
    use super::asking_line;

    #[test]
    fn the_line_at_the_cursor_is_read_as_a_screen_shows_it() {
        let out = b"Building...\r\ndone\r\n\x1b[1mDeploy to production? [y/N] \x1b[0m";
        assert_eq!(asking_line(out, 24, 80).as_deref(), Some("Deploy to production? [y/N]"));
        // Redrawn in place: only what the screen shows counts.
        assert_eq!(asking_line(b"50%\r100%\r\nall done\r\n", 24, 80), None);
        // A line editor waiting for a line, whatever its prompt looks like.
        assert_eq!(asking_line(b"\x1b[?2004hready: ", 24, 80).as_deref(), Some("ready:"));
        assert_eq!(asking_line(b"\x1b[?2004hready: \x1b[?2004l\r\nworking", 24, 80), None);
    }
}

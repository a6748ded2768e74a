//! The follower's way past a flood: far behind, it reads a large piece without the
//! parser's lock and, where the piece is plain lines that scroll away unseen
//! ([`drover_render::offscreen`]), parses only its last lines, with the lock held for
//! those alone. Anything else it parses in its usual small steps.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Mutex;

use drover_render::offscreen::{self, Plan};

use super::{Model, Resize, Shared, State};
use crate::recording::RecordingReader;

/// How far behind the follower must be for a step past a flood, and how much it reads.
const SKIM_STEP: usize = 1024 * 1024;

/// What the follower keeps between its steps past a flood.
pub(super) struct Skim {
    raw: PathBuf,
    idx: PathBuf,
    /// Its own reader, used without the parser's lock.
    reader: Option<RecordingReader>,
    /// The screen's rows as last seen with the lock held (None: packed).
    pub(super) rows: Option<u16>,
    /// Output before this is not read ahead again: a piece read there was not skipped.
    not_plain_until: u64,
}

impl Skim {
    /// For the recording at `raw`/`idx`.
    pub(super) fn new(raw: PathBuf, idx: PathBuf) -> Skim {
        Skim { raw, idx, reader: None, rows: None, not_plain_until: 0 }
    }

    /// One step past a flood, if the screen is a piece or more behind `recorded` and the
    /// piece is plain lines; false when there was none to take (the follower then takes
    /// its usual small step).
    pub(super) fn step(&mut self, shared: &Shared, recorded: u64) -> bool {
        let from = shared.parsed.load(Ordering::Acquire);
        let Some(rows) = self.rows else { return false };
        if recorded < from + SKIM_STEP as u64 || from < self.not_plain_until {
            return false;
        }
        if self.reader.is_none() {
            self.reader = RecordingReader::open(&self.raw, &self.idx).ok();
        }
        let Some(buf) = self.reader.as_ref().and_then(|r| r.read_raw(from, SKIM_STEP).ok()) else { return false };
        let end = from + buf.len() as u64;
        let Some(plan) = offscreen::plan(&buf, rows, offscreen::MIN_SKIP) else {
            self.not_plain_until = end;
            return false;
        };
        let mut state = shared.state.lock().unwrap_or_else(|e| e.into_inner());
        let skipped = state.skim(from, end, rows, &plan, &shared.resizes);
        shared.parsed.store(state.parsed, Ordering::Release);
        // Not skipped (not scrolling the whole screen, a resize inside, parsing moved on):
        // the rest of the piece is left to the small steps, not read ahead again each one.
        if skipped != Some(true) {
            self.not_plain_until = end;
        }
        skipped.is_some()
    }
}

impl State {
    /// The screen's rows, if it is live.
    pub(super) fn live_rows(&self) -> Option<u16> {
        match &self.model {
            Model::Live(parser) => Some(parser.screen().size().0),
            Model::Packed(_) => None,
        }
    }

    /// Parses the piece `from..end` as `plan` says, if parsing stands at `from` on a live
    /// screen of `rows` and no resize is placed inside the piece: Some(whether its lines
    /// were skipped; if not, only its head was parsed), or None when nothing was.
    fn skim(&mut self, from: u64, end: u64, rows: u16, plan: &Plan, resizes: &Mutex<VecDeque<Resize>>) -> Option<bool> {
        if self.parsed != from {
            return None;
        }
        let next_resize = self.resize_due(resizes);
        if self.live_rows() != Some(rows) || next_resize.is_some_and(|at| at < end) {
            return None;
        }
        let mut skipped = false;
        self.guarded(|parser| skipped = offscreen::take_shortcut(parser, plan));
        self.parsed = if skipped { end } else { from + plan.head.len() as u64 };
        self.changed();
        Some(skipped)
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::Recorded;
    use super::*;

    /// A flood of `lines` coloured lines, or of a full-screen program's redraws.
    fn flood(lines: usize, full_screen: bool) -> Vec<u8> {
        (0..lines)
            .flat_map(|i| match full_screen {
                false => format!("\x1b[{}mcompiling crate {i}\x1b[m of many\r\n", 31 + i % 6).into_bytes(),
                true => format!("\x1b[{};1Hrow of frame {i}\x1b[K", 1 + i % 24).into_bytes(),
            })
            .collect()
    }

    /// The screen's follower held aside, `bytes` recorded, and a skim of its recording.
    fn behind(bytes: &[u8]) -> (Recorded, super::super::Screen, Skim) {
        let (mut r, screen) = Recorded::new(80, 24);
        screen.shared.waiting.fetch_add(1, Ordering::AcqRel);
        r.record(bytes, 1);
        let (raw, idx) = {
            let state = screen.shared.state.lock().unwrap();
            (state.raw.clone(), state.idx.clone())
        };
        let mut skim = Skim::new(raw, idx);
        skim.rows = Some(24);
        (r, screen, skim)
    }

    #[tokio::test]
    async fn far_behind_a_flood_of_lines_the_follower_parses_only_their_last() {
        let bytes = flood(200_000, false);
        let (_r, screen, mut skim) = behind(&bytes);
        let recorded = bytes.len() as u64;
        let mut steps = 0;
        while skim.step(&screen.shared, recorded) {
            steps += 1;
            assert_eq!(screen.shared.parsed.load(Ordering::Acquire), (steps * SKIM_STEP) as u64, "a whole piece a step");
        }
        assert!(steps >= 4 && recorded - screen.shared.parsed.load(Ordering::Acquire) < SKIM_STEP as u64, "{steps} steps");
        let snap = screen.snapshot_now().await.unwrap();
        let mut whole = vt100::Parser::new(24, 80, 0);
        whole.process(&bytes);
        assert_eq!(snap.data, drover_render::redraw::redraw(whole.screen()), "the same screen as parsing every line");
    }

    #[test]
    fn a_resize_inside_the_piece_is_left_to_the_usual_steps() {
        let bytes = flood(200_000, false);
        let (mut r, screen, mut skim) = behind(&bytes[..SKIM_STEP / 2]);
        screen.resize(100, 30);
        r.record(&bytes[SKIM_STEP / 2..], 2);
        assert!(!skim.step(&screen.shared, bytes.len() as u64), "not past the resize");
        assert_eq!(screen.shared.parsed.load(Ordering::Acquire), 0);
        assert_eq!(skim.not_plain_until, SKIM_STEP as u64, "that piece is left to the small steps");
        // Past it, at the new size, it skims again.
        screen.shared.state.lock().unwrap().catch_up(SKIM_STEP as u64, &screen.shared.resizes, &screen.shared.parsed);
        skim.rows = Some(30);
        assert!(skim.step(&screen.shared, bytes.len() as u64));
        assert_eq!(screen.shared.parsed.load(Ordering::Acquire), 2 * SKIM_STEP as u64);
    }

    #[tokio::test]
    async fn a_full_screen_program_is_left_to_the_usual_steps() {
        let bytes = flood(100_000, true);
        let (_r, screen, mut skim) = behind(&bytes);
        assert!(bytes.len() > 2 * SKIM_STEP);
        assert!(!skim.step(&screen.shared, bytes.len() as u64));
        assert_eq!(screen.shared.parsed.load(Ordering::Acquire), 0, "nothing parsed");
        assert_eq!(skim.not_plain_until, SKIM_STEP as u64, "and that piece not read again");
        assert!(!skim.step(&screen.shared, bytes.len() as u64));
        let snap = screen.snapshot_now().await.unwrap();
        let mut whole = vt100::Parser::new(24, 80, 0);
        whole.process(&bytes);
        assert_eq!(snap.data, drover_render::redraw::redraw(whole.screen()));
    }
}

//! Screen checkpoints: a terminal's whole state at a point of its output stream, kept as
//! the escape sequences that rebuild it, so the screen at any later point is the nearest
//! checkpoint plus the bytes after it instead of a replay of everything before.
//!
//! The model is avt's: its dump carries everything later output depends on — the main
//! screen under an alternate one, the scroll region, the modes, the character sets, the
//! saved cursor and a sequence cut in half — so a restored model goes on exactly as the
//! one it was taken from. The same dump redraws the screen on a viewer's terminal.
//!
//! Resizes are applied by time, as the recording orders them: before a piece of output,
//! every resize at or before its time; at the end, the rest.

use avt::Terminal;

use crate::asciicast::decode_with_tail;
use crate::offscreen;

/// A terminal's state as a stream of output builds it.
pub struct ScreenModel {
    term: Terminal,
    /// An incomplete UTF-8 sequence held for the next feed.
    held: Vec<u8>,
    size: (u16, u16),
}

impl ScreenModel {
    /// A blank `cols`×`rows` terminal (sizes below 1 count as 1).
    pub fn new(cols: u16, rows: u16) -> ScreenModel {
        let size = (cols.max(1), rows.max(1));
        let term = Terminal::new(usize::from(size.0), usize::from(size.1)).expect("sizes are at least 1");
        ScreenModel { term, held: Vec::new(), size }
    }

    /// The model a checkpoint's dump rebuilds on a `cols`×`rows` terminal.
    pub fn restore(cols: u16, rows: u16, dump: &str) -> ScreenModel {
        let mut model = ScreenModel::new(cols, rows);
        model.term.feed(dump);
        model
    }

    /// Feeds output bytes (need not be valid or complete UTF-8: a sequence split between
    /// feeds is joined, invalid bytes read as U+FFFD). A flood's lines that scroll away
    /// unseen are not drawn where that leaves the same state ([`offscreen`]).
    pub fn feed(&mut self, bytes: &[u8]) {
        offscreen::process(self, bytes);
    }

    /// Feeds every byte.
    pub(crate) fn feed_all(&mut self, bytes: &[u8]) {
        let mut joined = std::mem::take(&mut self.held);
        joined.extend_from_slice(bytes);
        let (text, tail) = decode_with_tail(&joined);
        self.held = tail.to_vec();
        self.term.feed(text.as_str());
    }

    /// Resizes the terminal, as its window was.
    pub fn resize(&mut self, cols: u16, rows: u16) {
        self.size = (cols.max(1), rows.max(1));
        self.term.resize(usize::from(self.size.0), usize::from(self.size.1));
    }

    /// Its size: (columns, rows).
    pub fn size(&self) -> (u16, u16) {
        self.size
    }

    /// Bytes fed but held back, the start of a UTF-8 sequence still to be completed: a
    /// checkpoint taken now stands for the stream up to that many bytes before the end
    /// fed.
    pub fn held(&self) -> usize {
        self.held.len()
    }

    /// The escape sequences that rebuild this state on a blank terminal of its size (a
    /// checkpoint's body, and a viewer's redraw).
    pub fn dump(&self) -> String {
        self.term.dump()
    }

    /// The visible screen's rows as text, trailing blanks trimmed (for people and tests).
    pub fn lines(&self) -> Vec<String> {
        self.term.screen().visible_lines().map(|l| l.text().trim_end().to_owned()).collect()
    }

    /// The cursor: (column, row, visible).
    pub fn cursor(&self) -> (usize, usize, bool) {
        let c = self.term.cursor();
        (c.col, c.row, c.visible)
    }
}

impl offscreen::Model for ScreenModel {
    fn plan_rows(&self) -> Option<u16> {
        self.held.is_empty().then_some(self.size.1)
    }

    fn parse(&mut self, bytes: &[u8]) {
        self.feed_all(bytes);
    }

    /// The trial runs on a copy rebuilt from the model's dump, which carries its parser
    /// state too.
    fn scrolls_whole_screen(&mut self) -> bool {
        let (cols, rows) = self.size;
        let Some(trial) = offscreen::Trial::new(rows, cols) else { return false };
        let mut copy = ScreenModel::restore(cols, rows, &self.dump());
        copy.feed_all(&trial.bytes());
        let (col, row, _) = copy.cursor();
        trial.scrolled_whole_screen((row, col), copy.lines().into_iter())
    }
}

/// The sizes a stream was shown at: the first, then each resize with the µs it took effect.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resizes {
    /// (µs since the start, (cols, rows)), in order.
    pub list: Vec<(u64, (u16, u16))>,
}

impl Resizes {
    /// The resizes after `after_micros` up to and including `until_micros`.
    pub fn between(&self, after_micros: Option<u64>, until_micros: u64) -> impl Iterator<Item = (u64, (u16, u16))> + '_ {
        self.list.iter().copied().filter(move |(t, _)| after_micros.is_none_or(|a| *t > a) && *t <= until_micros)
    }
}

/// A checkpoint as the model gives it: its stream offset, time, size and dump.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Taken {
    /// Output before this offset is in it.
    pub offset: u64,
    /// Output and resizes at or before this time (µs since the start) are in it.
    pub t_micros: u64,
    /// Its size: (columns, rows).
    pub size: (u16, u16),
    /// What rebuilds it (see [`ScreenModel::dump`]).
    pub dump: String,
}

/// Replays a stream onto a model from a checkpoint (or the start), applying its resizes
/// where the recording orders them.
pub struct Replayer {
    model: ScreenModel,
    /// The end of the output fed.
    offset: u64,
    /// Resizes up to this time are applied (None: none yet, from the start).
    t: Option<u64>,
    resizes: Resizes,
    /// Output fed and not yet given to the model: pieces between two resizes are given
    /// to it together, so a flood's lines that scroll away unseen can be skipped across
    /// the small pieces a stream is stored in.
    pending: Vec<u8>,
}

/// The most output held back for the model at once.
const PENDING_MAX: usize = 1024 * 1024;

impl Replayer {
    /// From the start of a stream shown at `size` first.
    pub fn start(size: (u16, u16), resizes: Resizes) -> Replayer {
        Replayer { model: ScreenModel::new(size.0, size.1), offset: 0, t: None, resizes, pending: Vec::new() }
    }

    /// From a checkpoint.
    pub fn resume(c: &Taken, resizes: Resizes) -> Replayer {
        let model = ScreenModel::restore(c.size.0, c.size.1, &c.dump);
        Replayer { model, offset: c.offset, t: Some(c.t_micros), resizes, pending: Vec::new() }
    }

    /// Feeds a piece of output read at `t_micros` that starts at `offset` (bytes before
    /// the end already fed are skipped), after the resizes up to its time.
    pub fn feed(&mut self, offset: u64, t_micros: u64, data: &[u8]) {
        self.resize_until(t_micros);
        let end = offset + data.len() as u64;
        if end <= self.offset {
            return;
        }
        let skip = self.offset.saturating_sub(offset) as usize;
        self.pending.extend_from_slice(&data[skip..]);
        self.offset = end;
        if self.pending.len() >= PENDING_MAX {
            self.flush();
        }
    }

    /// Gives the model the output held back.
    fn flush(&mut self) {
        if !self.pending.is_empty() {
            let pending = std::mem::take(&mut self.pending);
            self.model.feed(&pending);
        }
    }

    /// Applies the resizes up to `t_micros` (None: all that are left).
    pub fn resize_until(&mut self, t_micros: impl Into<Option<u64>>) {
        let until = t_micros.into().unwrap_or(u64::MAX);
        let after = self.t;
        let due: Vec<(u16, u16)> = self.resizes.between(after, until).map(|(_, size)| size).collect();
        if !due.is_empty() {
            self.flush();
        }
        for (cols, rows) in due {
            self.model.resize(cols, rows);
        }
        let last = self.resizes.list.last().map(|(t, _)| *t).unwrap_or(0);
        self.t = Some(match until {
            u64::MAX => self.t.unwrap_or(0).max(last),
            t => self.t.map_or(t, |now| now.max(t)),
        });
    }

    /// The end of the output fed.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The model as it stands, given everything fed.
    pub fn model(&mut self) -> &ScreenModel {
        self.flush();
        &self.model
    }

    /// A checkpoint of the state now.
    pub fn take(&mut self) -> Taken {
        self.flush();
        Taken {
            offset: self.offset - self.model.held() as u64,
            t_micros: self.t.unwrap_or(0),
            size: self.model.size(),
            dump: self.model.dump(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `stream` whole, and again split at every `step` bytes through a checkpoint;
    /// both must end on the same state.
    fn same_through_checkpoints(cols: u16, rows: u16, stream: &[u8], step: usize) {
        let mut whole = ScreenModel::new(cols, rows);
        whole.feed(stream);
        let mut offset = 0;
        let mut model = ScreenModel::new(cols, rows);
        let mut end = offset;
        while end < stream.len() {
            let next = (end + step).min(stream.len());
            model.feed(&stream[end..next]);
            end = next;
            // A checkpoint stands for the bytes before a sequence cut in half.
            let at = end - model.held();
            if at > offset {
                let (c, r) = model.size();
                model = ScreenModel::restore(c, r, &model.dump());
                model.feed(&stream[at..end]);
                offset = at;
            }
        }
        assert_eq!(model.dump(), whole.dump());
        assert_eq!(model.lines(), whole.lines());
        assert_eq!(model.cursor(), whole.cursor());
    }

    #[test]
    fn a_restored_model_goes_on_as_the_original() {
        // The main screen under an alternate one comes back when it is left.
        let vim_like = b"$ vim notes\r\n\x1b[?1049h\x1b[2J\x1b[1;20r\x1b[Hline one\x1b[20;1H-- INSERT --\x1b[5;1H\x1bM\x1bM\x1b[?1049l$ ";
        for step in 1..vim_like.len() {
            same_through_checkpoints(40, 20, vim_like, step);
        }
        // The scroll region set before a checkpoint still holds after it.
        let region = b"\x1b[2;4rA\r\nB\r\nC\r\nD\r\nE\r\nF\x1b[r\x1b[10;1Hafter";
        for step in 1..region.len() {
            same_through_checkpoints(20, 10, region, step);
        }
        // UTF-8 and a sequence cut in half.
        same_through_checkpoints(10, 3, "héllo wörld, ça va? \x1b[31mred\x1b[0m".as_bytes(), 1);
    }

    #[test]
    fn the_main_screen_comes_back_after_a_full_screen_program() {
        let mut m = ScreenModel::new(20, 4);
        m.feed(b"$ top\r\n\x1b[?1049h\x1b[Hbusy");
        let mut r = ScreenModel::restore(20, 4, &m.dump());
        r.feed(b"\x1b[?1049l");
        assert_eq!(r.lines()[0], "$ top");
    }

    #[test]
    fn a_replay_resumed_from_a_checkpoint_ends_as_the_whole_one() {
        let resizes = Resizes { list: vec![(15, (30, 6)), (25, (12, 4)), (40, (50, 10))] };
        let pieces: Vec<(u64, &[u8])> = vec![
            (10, b"one\r\ntwo\r\n"),
            (20, b"\x1b[?1049h\x1b[Hfull screen\x1b[2;3r"),
            (20, b"\x1b[3;1H\n\n\nscrolled"),
            (30, b"\x1b[?1049lback\r\nthree"),
            (35, "\u{e9}t\u{e9}".as_bytes()),
        ];
        let whole = |from: Option<Taken>, at: usize| {
            let mut r = match &from {
                Some(c) => Replayer::resume(c, resizes.clone()),
                None => Replayer::start((20, 5), resizes.clone()),
            };
            let mut offset = 0;
            for (t, data) in &pieces[..at] {
                r.feed(offset, *t, data);
                offset += data.len() as u64;
            }
            r
        };
        let mut full = whole(None, pieces.len());
        full.resize_until(None);
        for cut in 0..pieces.len() {
            let taken = whole(None, cut).take();
            let mut r = Replayer::resume(&taken, resizes.clone());
            let mut offset = 0;
            for (t, data) in &pieces {
                r.feed(offset, *t, data);
                offset += data.len() as u64;
            }
            r.resize_until(None);
            assert_eq!(r.model().dump(), full.model().dump(), "from a checkpoint after {cut} pieces");
            assert_eq!(r.take(), full.take());
        }
        assert_eq!(full.take().size, (50, 10));
        assert_eq!(full.take().t_micros, 40);
    }

    #[test]
    fn a_flood_in_small_pieces_across_a_resize_replays_as_fed_whole() {
        let resizes = Resizes { list: vec![(500, (100, 30))] };
        let mut r = Replayer::start((80, 24), resizes);
        let mut reference = ScreenModel::new(80, 24);
        let mut offset = 0;
        for t in 0..1000u64 {
            let piece: Vec<u8> =
                (0..64).flat_map(|i| format!("\x1b[{}mline {t}.{i}\x1b[m and more\r\n", 31 + (t + i) % 7).into_bytes()).collect();
            if t == 500 {
                reference.resize(100, 30);
            }
            reference.feed_all(&piece);
            r.feed(offset, t, &piece);
            offset += piece.len() as u64;
            if t == 250 || t == 750 {
                assert_eq!(r.take().dump, reference.dump(), "a checkpoint taken mid-way, at {t}");
            }
        }
        r.resize_until(None);
        let end = r.take();
        assert_eq!((end.offset, end.size), (offset, (100, 30)));
        assert_eq!(end.dump, reference.dump());
    }

    #[test]
    fn resizes_between_times() {
        let r = Resizes { list: vec![(5, (80, 24)), (10, (100, 30)), (20, (120, 40))] };
        let got: Vec<_> = r.between(Some(5), 20).collect();
        assert_eq!(got, vec![(10, (100, 30)), (20, (120, 40))]);
        assert_eq!(r.between(None, 9).count(), 1);
    }
}

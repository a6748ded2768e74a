//! What a terminal showed, as lines a person reads: output is run through a screen model
//! (avt), so cursor moves, overwrites and redraws land where they did on screen.
//!
//! [`Transcript`] gives each line once:
//! - a line that scrolls off the top of the main screen is final and comes out at once;
//! - [`Transcript::settle`] also gives the main screen's rows above the cursor, for a
//!   follower whose program went quiet (line-by-line output then shows without waiting
//!   for a screenful); should those rows later scroll off, they are not given again;
//! - [`Transcript::finish`] gives the rest: the main screen as it was left, then, if a
//!   full-screen program still holds the alternate screen, that screen as it shows.
//!
//! Soft-wrapped rows are joined into one line and trailing blanks trimmed. Bytes need
//! not be valid or complete UTF-8: a sequence split between feeds is joined, invalid
//! bytes show as U+FFFD. A line longer than [`MAX_LINE_CHARS`] comes out in pieces.

use avt::observer::{Observation, Observer};
use avt::{Line, ScreenKind, Terminal};

use crate::asciicast::decode_with_tail;

/// Longest line kept in memory; a longer one is given in pieces.
pub const MAX_LINE_CHARS: usize = 10_000;

/// Lines collected while the terminal runs; rows already given are skipped.
#[derive(Default)]
struct Collector {
    pending: String,
    ready: Vec<String>,
    /// Rows at the top of the main screen already given by `settle`.
    given: usize,
}

impl Collector {
    fn push(&mut self, line: &Line) {
        self.pending.extend(line.chars());
        if !line.is_wrapped() || self.pending.chars().count() >= MAX_LINE_CHARS {
            self.ready.push(self.pending.trim_end().to_owned());
            self.pending.clear();
        }
    }
}

impl Observer for &mut Collector {
    type Output = ();

    fn evicted(&mut self, _: &mut Observation<'_>, line: &Line) {
        if self.given > 0 {
            self.given -= 1;
        } else {
            self.push(line);
        }
    }

    fn end(&mut self, _: &mut Observation<'_>) {}
}

/// A terminal's output rendered to lines (see the module docs).
pub struct Transcript {
    term: Terminal,
    lines: Collector,
    /// An incomplete UTF-8 sequence held for the next feed.
    held: Vec<u8>,
    /// Its size (columns, rows).
    size: (u16, u16),
}

impl Transcript {
    /// A transcript of a `cols`×`rows` terminal (sizes below 1 count as 1).
    pub fn new(cols: u16, rows: u16) -> Transcript {
        let term = Terminal::new(usize::from(cols.max(1)), usize::from(rows.max(1))).expect("sizes are at least 1");
        Transcript { term, lines: Collector::default(), held: Vec::new(), size: (cols.max(1), rows.max(1)) }
    }

    /// A transcript that goes on from a screen checkpoint's dump (see
    /// [`crate::checkpoint`]) on a `cols`×`rows` terminal: the lines before it are not
    /// known; what its screen shows comes out as though it had been printed.
    pub fn resume(cols: u16, rows: u16, dump: &str) -> Transcript {
        let mut t = Transcript::new(cols, rows);
        t.term.feed(dump);
        t
    }

    /// Its size now: (columns, rows).
    pub fn size(&self) -> (u16, u16) {
        self.size
    }

    /// Feeds output; returns the lines that became final.
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<String> {
        let mut joined = std::mem::take(&mut self.held);
        joined.extend_from_slice(bytes);
        let (text, tail) = decode_with_tail(&joined);
        self.held = tail.to_vec();
        self.term.feed_with(text.as_str(), &mut self.lines);
        std::mem::take(&mut self.lines.ready)
    }

    /// The terminal was resized; returns the lines that became final.
    pub fn resize(&mut self, cols: u16, rows: u16) -> Vec<String> {
        // Reflow moves rows: what `settle` gave can no longer be matched row for row.
        self.lines.given = 0;
        self.size = (cols.max(1), rows.max(1));
        self.term.resize_with(usize::from(cols.max(1)), usize::from(rows.max(1)), &mut self.lines);
        std::mem::take(&mut self.lines.ready)
    }

    /// The main screen's rows above the cursor not given yet (none while a full-screen
    /// program holds the alternate screen).
    pub fn settle(&mut self) -> Vec<String> {
        if self.term.active_screen_kind() != ScreenKind::Primary {
            return Vec::new();
        }
        let cursor_row = self.term.cursor().row;
        let rows: Vec<Line> = self.term.primary_screen().visible_lines().take(cursor_row).skip(self.lines.given).cloned().collect();
        // A row that wraps onto the cursor's row is not finished yet.
        let complete = rows.iter().rposition(|l| !l.is_wrapped()).map_or(0, |i| i + 1);
        for line in &rows[..complete] {
            self.lines.push(line);
        }
        self.lines.given += complete;
        std::mem::take(&mut self.lines.ready)
    }

    /// Everything not given yet: the main screen as left, then the alternate screen if
    /// it is showing. Trailing blank lines are dropped.
    pub fn finish(mut self) -> Vec<String> {
        if !self.held.is_empty() {
            let rest = String::from_utf8_lossy(&std::mem::take(&mut self.held)).into_owned();
            self.term.feed_with(rest.as_str(), &mut self.lines);
        }
        let given = self.lines.given;
        let mut out = std::mem::take(&mut self.lines.ready);
        let start = out.len();
        for line in self.term.primary_screen().visible_lines().skip(given) {
            self.lines.push(line);
        }
        if !self.lines.pending.is_empty() {
            self.lines.ready.push(self.lines.pending.trim_end().to_owned());
        }
        out.append(&mut self.lines.ready);
        trim_blank_tail(&mut out, start);
        if self.term.active_screen_kind() == ScreenKind::Alternate {
            let start = out.len();
            out.extend(self.term.screen().visible_lines().map(|l| l.text().trim_end().to_owned()));
            trim_blank_tail(&mut out, start);
        }
        out
    }
}

/// Drops empty lines from the end of `lines`, but none before `start`.
fn trim_blank_tail(lines: &mut Vec<String>, start: usize) {
    while lines.len() > start && lines.last().is_some_and(String::is_empty) {
        lines.pop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(cols: u16, rows: u16, bytes: &[u8]) -> Vec<String> {
        let mut t = Transcript::new(cols, rows);
        let mut out = t.feed(bytes);
        out.extend(t.finish());
        out
    }

    #[test]
    fn cursor_moves_land_where_they_did_on_screen() {
        // What a sign-in screen sends: words placed with cursor moves, not spaces.
        let out = render(60, 5, b"If the link doesn't open\x1b[1Cautomatically,\x1b[1Cpress\x1b[1Cc\x1b[1Cto\x1b[1Ccopy\x1b[1Cit\r\n");
        assert_eq!(out, ["If the link doesn't open automatically, press c to copy it"]);
    }

    #[test]
    fn lines_scroll_off_once_and_the_screen_comes_last() {
        let mut t = Transcript::new(10, 3);
        assert_eq!(t.feed(b"a\r\nb\r\nc\r\nd\r\n"), ["a", "b"]);
        assert_eq!(t.finish(), ["c", "d"]);
    }

    #[test]
    fn settled_rows_are_not_given_again() {
        let mut t = Transcript::new(10, 3);
        assert!(t.feed(b"one\r\ntwo\r\nthr").is_empty());
        assert_eq!(t.settle(), ["one", "two"]);
        assert!(t.settle().is_empty());
        // "one" and "two" scroll off without coming out again; "three" comes out as it
        // scrolls off.
        assert_eq!(t.feed(b"ee\r\nfour\r\nfive\r\n"), ["three"]);
        assert_eq!(t.settle(), ["four", "five"]);
        assert_eq!(t.feed(b"six\r\n"), Vec::<String>::new());
        assert_eq!(t.finish(), ["six"]);
    }

    #[test]
    fn wrapped_rows_join_and_redraws_keep_the_last_state() {
        assert_eq!(render(4, 3, b"abcdefghij\r\n"), ["abcdefghij"]);
        assert_eq!(render(20, 3, b"10%\r20%\r100%\r\n"), ["100%"]);
    }

    #[test]
    fn a_full_screen_program_still_showing_is_the_last_thing() {
        let out = render(20, 3, b"before\r\n\x1b[?1049h\x1b[2J\x1b[Htop row\x1b[3;1Hbottom");
        assert_eq!(out, ["before", "top row", "", "bottom"]);
        let out = render(20, 3, b"before\r\n\x1b[?1049h\x1b[Hgone\x1b[?1049lafter\r\n");
        assert_eq!(out, ["before", "after"]);
    }

    #[test]
    fn a_resumed_transcript_ends_as_the_whole_one() {
        let stream = b"one\r\ntwo\r\nthree\r\n\x1b[?1049h\x1b[Hfull\x1b[?1049lfour\r\nfive\r\nsix";
        let mut whole = Transcript::new(10, 3);
        let mut all = whole.feed(stream);
        all.extend(whole.finish());
        for cut in 0..stream.len() {
            let mut model = crate::checkpoint::ScreenModel::new(10, 3);
            model.feed(&stream[..cut]);
            let mut t = Transcript::resume(10, 3, &model.dump());
            let mut lines = t.feed(&stream[cut - model.held()..]);
            lines.extend(t.finish());
            assert!(all.ends_with(&lines), "from {cut}: {lines:?} is not the end of {all:?}");
            assert!(lines.len() >= 3, "from {cut}: {lines:?}");
        }
    }

    #[test]
    fn bytes_are_data() {
        assert_eq!(render(10, 2, "é".as_bytes().split_at(1).0), ["\u{fffd}"]);
        let mut t = Transcript::new(10, 2);
        let e = "é\r\n".as_bytes();
        assert!(t.feed(&e[..1]).is_empty());
        t.feed(&e[1..]);
        assert_eq!(t.finish(), ["é"]);
        // A 1x1 screen (sizes below 1 count as 1) and absurd moves: no panic.
        let tiny = render(0, 0, b"\x1b[999999;999999H\x1b[99999S\xff");
        assert_eq!(tiny.last().map(String::as_str), Some("\u{fffd}"));
        let long = vec![b'x'; 3 * MAX_LINE_CHARS];
        assert!(render(80, 24, &long).iter().all(|l| l.chars().count() <= MAX_LINE_CHARS));
    }
}

//! Output that scrolls off the screen before anyone could see it need not be drawn.
//!
//! A screen far behind its stream (a flood: a build's log, a file printed) is caught up
//! by parsing megabytes of lines of which only the last screenful shows. When those
//! megabytes are plain lines (text, carriage returns, line feeds, tabs, backspaces and
//! colour changes), and line feeds scroll the whole screen, the screen after them is the
//! same as after their last lines alone, started in the first column with the colours the
//! skipped ones left: everything the skipped lines drew scrolls away under the lines
//! after them, and nothing else about the terminal changes. [`plan`] finds such a cut in
//! a piece of output; whether line feeds scroll the whole screen (no scroll region holding
//! lines in place, the cursor not below one, no string being read that swallows text) is
//! not something a model says, so it is tried on a copy of the screen with a [`Trial`].
//! The shim's screens (vt100) and the server's checkpoints (avt,
//! [`crate::checkpoint::ScreenModel`]) both parse this way ([`Model`], [`process`]).

use std::hash::{BuildHasher, Hasher};

/// Line feeds the part parsed must hold, per row of the screen: the cursor reaches the
/// bottom row within one screenful wherever it stood, and every line on the screen then
/// scrolls away within the next.
pub const LINE_FEEDS_PER_ROW: usize = 2;
/// Skipping less than this is not worth trying the screen for.
pub const MIN_SKIP: usize = 64 * 1024;
/// How far into a piece the parser is given to finish a sequence it was in the middle of.
const HEAD_MAX: usize = 4096;
/// The narrowest screen tried: a trial line (8 hex digits, a dot, its number) must fit.
const TRIAL_WIDTH: u16 = 16;

/// How a piece of output is parsed in part: `head` as it is, then a carriage return, the
/// colour changes of the part skipped (`pens`), and `tail` as it is.
#[derive(Debug, PartialEq, Eq)]
pub struct Plan<'a> {
    /// Up to where any sequence the parser may be in the middle of has ended (two bytes
    /// in a row that end an escape or control sequence).
    pub head: &'a [u8],
    /// The colour changes (SGR) of the part skipped, in order, from the last that resets
    /// the pen (`ESC [ m`, `ESC [ 0 ; … m`) on.
    pub pens: Vec<u8>,
    /// The last lines: at least [`LINE_FEEDS_PER_ROW`] line feeds per row of plain
    /// output, starting after a carriage return and line feed, then whatever follows.
    pub tail: &'a [u8],
    /// Bytes not parsed.
    pub skipped: usize,
}

/// How `bytes` could be parsed in part on a screen of `rows`, skipping at least
/// `min_skip` bytes; None when they are not plain lines enough for it.
pub fn plan(bytes: &[u8], rows: u16, min_skip: usize) -> Option<Plan<'_>> {
    let head_len = bytes[..bytes.len().min(HEAD_MAX)].windows(2).position(|w| w.iter().all(|b| (0x40..=0x7e).contains(b)))? + 2;
    let rest = &bytes[head_len..];
    // The plain part ends with the last line feed; what follows it is parsed as it is.
    let plain_len = memchr::memrchr(b'\n', rest)? + 1;
    if plain_len < min_skip {
        return None;
    }
    let plain = &rest[..plain_len];
    let cut = cut(plain, LINE_FEEDS_PER_ROW * usize::from(rows) + 2)?;
    if cut < min_skip {
        return None;
    }
    let pens = plain_lines(plain, cut)?;
    Some(Plan { head: &bytes[..head_len], pens, tail: &rest[cut..], skipped: cut })
}

/// Where the last `feeds` line feeds of `plain` begin: just after a carriage return and
/// line feed, so the cursor stands in the first column there.
fn cut(plain: &[u8], feeds: usize) -> Option<usize> {
    // `seen`: the line feeds after the one at `at`.
    memchr::memrchr_iter(b'\n', plain)
        .enumerate()
        .find(|&(seen, at)| seen >= feeds && at > 0 && plain[at - 1] == b'\r')
        .map(|(_, at)| at + 1)
}

/// The colour changes in `plain[..cut]`, from the last that resets the pen on, if all of
/// `plain` is plain lines: valid UTF-8 text (no C1 controls, no DEL), carriage returns,
/// line feeds, tabs, backspaces and SGR sequences (`ESC [ digits ; : m`); None otherwise.
fn plain_lines(plain: &[u8], cut: usize) -> Option<Vec<u8>> {
    let mut pens = Vec::new();
    let mut at = 0;
    while let Some(found) = plain[at..].iter().position(|&b| b < 0x20 && !matches!(b, b'\r' | b'\n' | b'\t' | 0x08)) {
        let start = at + found;
        if plain[start] != 0x1b || plain.get(start + 1) != Some(&b'[') {
            return None;
        }
        let params = plain[start + 2..].iter().position(|b| !matches!(b, b'0'..=b'9' | b';' | b':'))?;
        let end = start + 2 + params;
        if plain[end] != b'm' {
            return None;
        }
        if start < cut {
            // One that resets the pen first makes those before it count for nothing.
            let params = &plain[start + 2..end];
            if params.is_empty() || params == b"0" || params.starts_with(b"0;") || params.starts_with(b";") {
                pens.clear();
            }
            pens.extend_from_slice(&plain[start..=end]);
        }
        at = end + 1;
    }
    // Last, as the rarest to fail: DEL, and C1 controls (U+0080–U+009F, which UTF-8
    // writes as 0xC2 then 0x80–0x9F), then whether it is UTF-8 at all.
    let c1 = memchr::memchr_iter(0xc2, plain).any(|at| plain.get(at + 1).is_some_and(|b| (0x80..0xa0).contains(b)));
    if c1 || memchr::memchr(0x7f, plain).is_some() || std::str::from_utf8(plain).is_err() {
        return None;
    }
    Some(pens)
}

/// Numbered lines, with a number the program cannot know, drawn on a copy of a screen to
/// see whether line feeds scroll all of it from where it stands: then exactly the last
/// lines show, above a blank bottom row holding the cursor in its first column.
pub struct Trial {
    nonce: u32,
    lines: usize,
    rows: u16,
}

impl Trial {
    /// A trial for a screen of `rows`×`cols`; None when a trial line would not fit.
    pub fn new(rows: u16, cols: u16) -> Option<Trial> {
        if cols < TRIAL_WIDTH || rows == 0 {
            return None;
        }
        let nonce = std::collections::hash_map::RandomState::new().build_hasher().finish() as u32;
        Some(Trial { nonce, lines: LINE_FEEDS_PER_ROW * usize::from(rows), rows })
    }

    fn line(&self, i: usize) -> String {
        format!("{:08x}.{i}", self.nonce)
    }

    /// What to feed the copy: a carriage return, then the numbered lines.
    pub fn bytes(&self) -> Vec<u8> {
        let mut trial = b"\r".to_vec();
        for i in 0..self.lines {
            trial.extend_from_slice(self.line(i).as_bytes());
            trial.extend_from_slice(b"\r\n");
        }
        trial
    }

    /// Whether the copy, fed [`Trial::bytes`], shows what scrolling the whole screen
    /// shows: the cursor at (`row`, `col`) = (last row, 0), and `texts`, its rows' text
    /// with trailing blanks trimmed, the last lines then a blank row.
    pub fn scrolled_whole_screen(&self, cursor: (usize, usize), texts: impl Iterator<Item = String>) -> bool {
        let bottom = usize::from(self.rows) - 1;
        let mut shown = 0;
        let all_right = texts.enumerate().all(|(row, text)| {
            shown += 1;
            if row == bottom {
                text.is_empty()
            } else {
                text == self.line(self.lines - bottom + row)
            }
        });
        cursor == (bottom, 0) && all_right && shown == bottom + 1
    }
}

/// A terminal model a piece of output can be parsed into in part: the shim's vt100
/// parser, the server's [`crate::checkpoint::ScreenModel`]. Neither may keep scrollback:
/// the lines skipped would be missing from it.
pub trait Model {
    /// The rows to plan a piece for now; None when no piece can be planned (a model
    /// holding half a letter parses the next piece whole).
    fn plan_rows(&self) -> Option<u16>;
    /// Parses every byte of `bytes`.
    fn parse(&mut self, bytes: &[u8]);
    /// Whether line feeds scroll the whole screen from where the model stands and lines
    /// are drawn, tried with a [`Trial`]; the screen is left as it was.
    fn scrolls_whole_screen(&mut self) -> bool;
}

/// Parses `bytes` into `model`, skipping the lines that scroll off the screen unseen when
/// that gives the same result (see the module's comment). Returns the bytes skipped.
pub fn process(model: &mut impl Model, bytes: &[u8]) -> usize {
    let Some(plan) = model.plan_rows().and_then(|rows| plan(bytes, rows, MIN_SKIP)) else {
        model.parse(bytes);
        return 0;
    };
    if take_shortcut(model, &plan) {
        return plan.skipped;
    }
    model.parse(&bytes[plan.head.len()..]);
    0
}

/// Parses `plan`'s head and then, if line feeds scroll the whole screen from there, a
/// carriage return, its pens and its tail: true then. False when only the head was
/// parsed; the rest of the piece is the caller's to parse.
pub fn take_shortcut(model: &mut impl Model, plan: &Plan) -> bool {
    model.parse(plan.head);
    if !model.scrolls_whole_screen() {
        return false;
    }
    model.parse(b"\r");
    model.parse(&plan.pens);
    model.parse(plan.tail);
    true
}

impl Model for vt100::Parser {
    fn plan_rows(&self) -> Option<u16> {
        Some(self.screen().size().0)
    }

    fn parse(&mut self, bytes: &[u8]) {
        self.process(bytes);
    }

    /// The trial runs on the parser itself and its screen is put back after. The
    /// parser's own state is left as the trial found it: a trial leaves a parser in no
    /// sequence as it found it, and one inside a string (a title) only lengthens that
    /// string, which vt100 hands to callbacks the shim does not have.
    fn scrolls_whole_screen(&mut self) -> bool {
        let (rows, cols) = self.screen().size();
        let Some(trial) = Trial::new(rows, cols) else { return false };
        let saved = self.screen().clone();
        self.process(&trial.bytes());
        let screen = self.screen();
        let (row, col) = screen.cursor_position();
        let scrolled = trial.scrolled_whole_screen((usize::from(row), usize::from(col)), screen.rows(0, cols));
        *self.screen_mut() = saved;
        scrolled
    }
}

#[cfg(test)]
mod tests;

//! Streaming plain-text rendering of raw terminal output.
//!
//! [`TextRenderer`] turns the bytes a program writes to its terminal into the
//! lines a log viewer would show: escape sequences are dropped, carriage
//! returns and backspaces overwrite (so `\r`-redrawn progress bars collapse to
//! their final state), tabs expand, and invalid UTF-8 becomes U+FFFD.
//!
//! Columns are counted in `char`s, not display cells; wide and combining
//! characters therefore occupy one column each.

use crate::bounded::BoundedParser;
use vte::{Params, Perform};

/// Longest line kept in memory; a longer line is emitted in pieces.
pub const MAX_LINE_CHARS: usize = 10_000;

/// Tab stops are every this many columns.
const TAB_WIDTH: usize = 8;

/// Converts a stream of terminal output bytes into plain-text lines.
#[derive(Default)]
pub struct TextRenderer {
    parser: BoundedParser,
    line: Line,
}

/// The line being built and the cursor column within it.
#[derive(Default)]
struct Line {
    chars: Vec<char>,
    col: usize,
}

impl Line {
    /// The line's text with trailing spaces removed.
    fn text(&self) -> String {
        let end = self.chars.iter().rposition(|&c| c != ' ').map_or(0, |i| i + 1);
        self.chars[..end].iter().collect()
    }

    /// Ends the current line, pushing it to `out`.
    fn emit(&mut self, out: &mut Vec<String>) {
        out.push(self.text());
        self.chars.clear();
        self.col = 0;
    }

    /// Moves the cursor, keeping it inside the maximum line length.
    fn move_to(&mut self, col: usize) {
        self.col = col.min(MAX_LINE_CHARS - 1);
    }
}

/// The `vte` performer: applies parsed actions to the line.
struct Performer<'a> {
    line: &'a mut Line,
    out: &'a mut Vec<String>,
}

impl Perform for Performer<'_> {
    fn print(&mut self, c: char) {
        if c == '\u{7f}' {
            return;
        }
        let line = &mut *self.line;
        if line.col < line.chars.len() {
            line.chars[line.col] = c;
        } else {
            line.chars.resize(line.col, ' ');
            line.chars.push(c);
        }
        line.col += 1;
        if line.chars.len() >= MAX_LINE_CHARS {
            line.emit(self.out);
        }
    }

    fn execute(&mut self, byte: u8) {
        match byte {
            b'\n' => self.line.emit(self.out),
            b'\r' => self.line.col = 0,
            0x08 => self.line.col = self.line.col.saturating_sub(1),
            b'\t' => {
                let next = (self.line.col / TAB_WIDTH + 1) * TAB_WIDTH;
                self.line.move_to(next);
                if self.line.chars.len() < self.line.col {
                    self.line.chars.resize(self.line.col, ' ');
                }
            }
            _ => {}
        }
    }

    fn csi_dispatch(&mut self, params: &Params, intermediates: &[u8], ignore: bool, action: char) {
        if ignore || !intermediates.is_empty() {
            return;
        }
        let first = params.iter().next().and_then(|p| p.first().copied()).unwrap_or(0);
        let n = usize::from(first.max(1));
        let line = &mut *self.line;
        match action {
            'K' => match first {
                0 => line.chars.truncate(line.col),
                1 => {
                    let end = (line.col + 1).min(line.chars.len());
                    line.chars[..end].fill(' ');
                }
                2 => line.chars.clear(),
                _ => {}
            },
            'C' => line.move_to(line.col.saturating_add(n)),
            'D' => line.col = line.col.saturating_sub(n),
            'G' => line.move_to(n - 1),
            _ => {}
        }
    }
}

impl TextRenderer {
    /// Creates a renderer positioned at the start of an empty line.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feed bytes; completed lines (ended by `\n`) are pushed to `out`.
    ///
    /// Lines have trailing spaces removed. A line reaching
    /// [`MAX_LINE_CHARS`] characters is emitted early, without a newline.
    pub fn feed(&mut self, bytes: &[u8], out: &mut Vec<String>) {
        let mut performer = Performer { line: &mut self.line, out };
        self.parser.advance(&mut performer, bytes);
    }

    /// The current unfinished line (may be empty), trailing spaces removed.
    pub fn partial(&self) -> String {
        self.line.text()
    }

    /// Finish: returns the partial line if non-empty.
    ///
    /// A UTF-8 sequence left incomplete at the end of the input is rendered
    /// as U+FFFD.
    pub fn finish(mut self) -> Option<String> {
        let mut out = Vec::new();
        // A NUL cannot continue a UTF-8 sequence, so it makes the parser
        // flush a pending partial character as U+FFFD; NUL itself is dropped.
        self.feed(b"\0", &mut out);
        // `out` holds a line only if the flushed U+FFFD filled the line.
        out.pop().or_else(|| Some(self.partial()).filter(|p| !p.is_empty()))
    }
}

/// Convenience: render a whole byte slice to lines (including a final partial line if non-empty).
pub fn render_lines(bytes: &[u8]) -> Vec<String> {
    let mut renderer = TextRenderer::new();
    let mut out = Vec::new();
    renderer.feed(bytes, &mut out);
    out.extend(renderer.finish());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed_all(chunks: &[&[u8]]) -> (Vec<String>, String) {
        let mut r = TextRenderer::new();
        let mut out = Vec::new();
        for c in chunks {
            r.feed(c, &mut out);
        }
        (out, r.partial())
    }

    #[test]
    fn plain_lines_and_partial() {
        let (out, partial) = feed_all(&[b"one\ntwo\n\nthr", b"ee"]);
        assert_eq!(out, ["one", "two", ""]);
        assert_eq!(partial, "three");
        assert_eq!(render_lines(b"a\nb"), ["a", "b"]);
        assert_eq!(render_lines(b"a\n"), ["a"]);
        assert!(render_lines(b"").is_empty());
    }

    #[test]
    fn crlf_and_trailing_spaces() {
        assert_eq!(render_lines(b"abc\r\ndef   \r\n"), ["abc", "def"]);
        assert!(render_lines(b"    ").is_empty());
    }

    #[test]
    fn progress_bar_redraws() {
        assert_eq!(render_lines(b"10%\r20%\n"), ["20%"]);
        assert_eq!(render_lines(b"hello\rhi\n"), ["hillo"]);
        let bar = b"[##   ] 40%\r[#### ] 80%\r[#####] 100%\ndone\n";
        assert_eq!(render_lines(bar), ["[#####] 100%", "done"]);
        // Typical "\r ESC[K" redraw that shortens the line.
        assert_eq!(render_lines(b"downloading 123/456\r\x1b[Kdone\n"), ["done"]);
        assert_eq!(render_lines(b"long text\r\x1b[2Kok\n"), ["ok"]);
    }

    #[test]
    fn progress_split_across_feeds() {
        let (out, partial) = feed_all(&[b"50%", b"\r", b"75%\r1", b"00%"]);
        assert!(out.is_empty());
        assert_eq!(partial, "100%");
    }

    #[test]
    fn colors_and_other_sequences_stripped() {
        let input = b"\x1b[1;31mred\x1b[0m \x1b[38;2;1;2;3mrgb\x1b[m\n";
        assert_eq!(render_lines(input), ["red rgb"]);
        let osc = b"\x1b]0;title\x07a\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\b\n";
        assert_eq!(render_lines(osc), ["alinkb"]);
        let dcs = b"x\x1bP1$r0m\x1b\\y\x1b(Bz\x1b=\x1b[?25l\x1b[2J\x1b[3J\x1b[H!\n";
        assert_eq!(render_lines(dcs), ["xyz!"]);
        assert_eq!(render_lines(b"be\x07ep\x00\x0e\x7f\n"), ["beep"]);
    }

    #[test]
    fn escape_sequences_split_across_feeds() {
        let (out, partial) = feed_all(&[b"a\x1b", b"[3", b"1mb\x1b]0;ti", b"tle\x07c"]);
        assert!(out.is_empty());
        assert_eq!(partial, "abc");
    }

    #[test]
    fn utf8_split_across_feeds() {
        let s = "héllo → 😀 日本\n".as_bytes();
        for split in 0..s.len() {
            let (out, partial) = feed_all(&[&s[..split], &s[split..]]);
            assert_eq!(out, ["héllo → 😀 日本"], "split at {split}");
            assert_eq!(partial, "");
        }
        let bytes: Vec<&[u8]> = s.chunks(1).collect();
        assert_eq!(feed_all(&bytes).0, ["héllo → 😀 日本"]);
    }

    #[test]
    fn invalid_utf8_becomes_replacement() {
        assert_eq!(render_lines(b"a\xffb\n"), ["a\u{fffd}b"]);
        assert_eq!(render_lines(b"\xc3(\n"), ["\u{fffd}("]);
        // A truncated sequence at the very end is flushed by finish().
        assert_eq!(render_lines(b"ok\xe2\x82"), ["ok\u{fffd}"]);
        let mut r = TextRenderer::new();
        let mut out = Vec::new();
        r.feed(b"\xf0\x9f", &mut out);
        assert_eq!(r.partial(), "");
        assert_eq!(r.finish(), Some("\u{fffd}".to_string()));
        // Arbitrary bytes never panic.
        let all: Vec<u8> = (0..=255u8).cycle().take(10_000).collect();
        let _ = render_lines(&all);
    }

    #[test]
    fn random_input_never_panics_and_stays_bounded() {
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        let alphabet = b"\x1b[]P;?0123456789CDGKmnc\r\n\x08\t\x07\\\xc3\xa9\xff x";
        let mut r = TextRenderer::new();
        let mut out = Vec::new();
        for _ in 0..2_000 {
            let chunk: Vec<u8> = (0..64)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    alphabet[(seed % alphabet.len() as u64) as usize]
                })
                .collect();
            r.feed(&chunk, &mut out);
            assert!(r.line.chars.len() < MAX_LINE_CHARS);
        }
        assert!(out.iter().all(|l| l.chars().count() <= MAX_LINE_CHARS));
        let _ = r.finish();
    }

    #[test]
    fn tabs() {
        assert_eq!(render_lines(b"a\tb\n"), ["a       b"]);
        assert_eq!(render_lines(b"12345678\tx\n"), ["12345678        x"]);
        assert_eq!(render_lines(b"\t\tx\n"), [format!("{}x", " ".repeat(16))]);
        assert_eq!(render_lines(b"a\t\n"), ["a"]);
        // A tab over existing text only moves the cursor.
        assert_eq!(render_lines(b"abcdefghij\rx\ty\n"), ["xbcdefghyj"]);
    }

    #[test]
    fn backspace() {
        assert_eq!(render_lines(b"abc\x08X\n"), ["abX"]);
        assert_eq!(render_lines(b"\x08\x08a\n"), ["a"]);
        assert_eq!(render_lines(b"ab\x08\x08\x08\x08cd\n"), ["cd"]);
    }

    #[test]
    fn erase_in_line_variants() {
        assert_eq!(render_lines(b"abcdef\x1b[3D\x1b[K\n"), ["abc"]);
        assert_eq!(render_lines(b"abcdef\x1b[3D\x1b[0K\n"), ["abc"]);
        assert_eq!(render_lines(b"abcdef\x1b[3D\x1b[1K\n"), ["    ef"]);
        assert_eq!(render_lines(b"abcdef\x1b[3D\x1b[2Kx\n"), ["   x"]);
        assert_eq!(render_lines(b"ab\x1b[5C\x1b[1K\n"), [""]);
        assert_eq!(render_lines(b"abc\x1b[9K\n"), ["abc"]);
        // Private-marker variants are not handled.
        assert_eq!(render_lines(b"abc\r\x1b[?2K\n"), ["abc"]);
    }

    #[test]
    fn cursor_movement() {
        assert_eq!(render_lines(b"a\x1b[3Cb\n"), ["a   b"]);
        assert_eq!(render_lines(b"a\x1b[Cb\n"), ["a b"]);
        assert_eq!(render_lines(b"abcd\x1b[2DX\n"), ["abXd"]);
        assert_eq!(render_lines(b"ab\x1b[9DX\n"), ["Xb"]);
        assert_eq!(render_lines(b"abcd\x1b[2GX\n"), ["aXcd"]);
        assert_eq!(render_lines(b"abcd\x1b[GX\x1b[0GY\n"), ["Ybcd"]);
        assert_eq!(render_lines(b"\x1b[6Gx\n"), ["     x"]);
    }

    #[test]
    fn huge_cursor_moves_are_clamped() {
        let out = render_lines(b"\x1b[65535Cx\x1b[65535Gy");
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].chars().count(), MAX_LINE_CHARS);
        assert!(out[0].ends_with('x'));
        assert!(out[1].ends_with('y'));
        assert!(out.iter().all(|l| l.chars().count() <= MAX_LINE_CHARS));
    }

    #[test]
    fn long_line_is_capped() {
        let mut r = TextRenderer::new();
        let mut out = Vec::new();
        let chunk = vec![b'x'; 7_000];
        for _ in 0..5 {
            r.feed(&chunk, &mut out);
        }
        assert_eq!(out.len(), 3);
        assert!(out.iter().all(|l| l.len() == MAX_LINE_CHARS));
        assert_eq!(r.partial().len(), 5_000);
        assert!(r.line.chars.capacity() <= 2 * MAX_LINE_CHARS);
        r.feed(b"\n", &mut out);
        assert_eq!(out.len(), 4);
        assert_eq!(out[3].len(), 5_000);
    }

    #[test]
    fn escape_flood_does_not_grow() {
        let mut r = TextRenderer::new();
        let mut out = Vec::new();
        let flood = b"\x1b[31m".repeat(200_000); // 1 MB
        r.feed(&flood, &mut out);
        for piece in flood.chunks(7) {
            r.feed(piece, &mut out);
        }
        assert!(out.is_empty());
        assert_eq!(r.partial(), "");
        assert_eq!(r.line.chars.capacity(), 0);
        assert_eq!(r.finish(), None);
    }

    #[test]
    fn carriage_return_flood_does_not_grow() {
        let mut r = TextRenderer::new();
        let mut out = Vec::new();
        r.feed(&b"spinner |\r".repeat(100_000), &mut out);
        assert!(out.is_empty());
        assert_eq!(r.partial(), "spinner |");
        assert!(r.line.chars.capacity() < 64);
    }

    #[test]
    fn unterminated_osc_is_swallowed() {
        let mut r = TextRenderer::new();
        let mut out = Vec::new();
        r.feed(b"before\x1b]52;c;", &mut out);
        r.feed(&vec![b'Q'; 1 << 20], &mut out);
        r.feed(b"\x07after\n", &mut out);
        assert_eq!(out, ["beforeafter"]);
    }
}

//! A quiet session's screen, packed.
//!
//! A vt100 screen holds every cell of both its grids (32 bytes a cell: 96 KB for one
//! 100×30 grid, 320 KB at 200×50) while most sessions spend most of their life waiting
//! on someone. Once a session has printed nothing for a while, its screen is kept as the
//! escape sequences that rebuild it instead, a few KB, and rebuilt when it is next
//! needed.
//!
//! A screen is packed only when that is lossless: the sequences are replayed into a new
//! parser and kept only if vt100 then holds the very same state (compared field for
//! field through its `Debug` form: both grids with their cells, cursors, saved cursors,
//! scroll regions and origin modes, the attributes and saved attributes, the input
//! modes), and only when the output stands between two escape sequences, since a
//! parser's half-read sequence cannot be carried over. A screen whose state the
//! sequences cannot rebuild (a scroll region left set, say) stays as it is.

use std::fmt::Write as _;
use std::hash::{BuildHasher, Hasher};

/// Output bytes looked back over to tell whether the stream stands between sequences.
pub(crate) const TAIL: usize = 4096;

/// The escape sequences that rebuild a screen on a new parser of its size.
pub(crate) struct Packed {
    rows: u16,
    cols: u16,
    bytes: Vec<u8>,
}

impl Packed {
    /// `screen` packed, if that loses nothing; `tail` is the output its parser parsed
    /// last (up to [`TAIL`] bytes).
    pub(crate) fn pack(screen: &vt100::Screen, tail: &[u8]) -> Option<Packed> {
        if !between_sequences(tail) {
            return None;
        }
        let (rows, cols) = screen.size();
        let keys = std::collections::hash_map::RandomState::new();
        let want = fingerprint(screen, &keys);
        // The alternate grid is rebuilt only when it holds something: a fresh parser has
        // none until the first resize or visit, and rebuilding one it lacks is a change.
        [false, true].into_iter().find_map(|alternate| {
            let packed = Packed { rows, cols, bytes: rebuild(screen, alternate) };
            (fingerprint(packed.unpack().screen(), &keys) == want).then_some(packed)
        })
    }

    /// The parser this packs, rebuilt.
    pub(crate) fn unpack(&self) -> vt100::Parser {
        let mut parser = vt100::Parser::new(self.rows, self.cols, 0);
        parser.process(&self.bytes);
        parser
    }

    /// The packed sequences' length, in bytes.
    pub(crate) fn len(&self) -> usize {
        self.bytes.len()
    }
}

/// Sequences that bring a new parser of `screen`'s size to its state: with `alternate`,
/// the alternate grid's contents and saved cursor first; then the main grid's saved
/// cursor and contents; then, if the alternate screen is on, back to it with its cursor;
/// then the attributes and input modes in effect.
pub(crate) fn rebuild(screen: &vt100::Screen, alternate: bool) -> Vec<u8> {
    let on_alternate = screen.alternate_screen();
    let mut seq = Vec::new();
    if alternate {
        let alt = viewed(screen, if on_alternate { b"" } else { b"\x1b[?47h" });
        seq.extend_from_slice(b"\x1b[?47h");
        seq.extend(saved_cursor(alt.screen()));
        seq.extend(alt.screen().contents_formatted());
        seq.extend_from_slice(b"\x1b[?47l");
    }
    let main = viewed(screen, if on_alternate { b"\x1b[?47l" } else { b"" });
    seq.extend(saved_cursor(main.screen()));
    seq.extend(main.screen().contents_formatted());
    if on_alternate {
        seq.extend_from_slice(b"\x1b[?47h");
        seq.extend(screen.contents_formatted());
    }
    seq.extend(screen.input_mode_formatted());
    seq
}

/// A parser showing a copy of `screen`, after `then`.
fn viewed(screen: &vt100::Screen, then: &[u8]) -> vt100::Parser {
    let (rows, cols) = screen.size();
    let mut parser = vt100::Parser::new(rows, cols, 0);
    *parser.screen_mut() = screen.clone();
    parser.process(then);
    parser
}

/// Sequences that save, as `screen` has it saved (`ESC 7`), the cursor of the grid in
/// view and the attributes.
fn saved_cursor(screen: &vt100::Screen) -> Vec<u8> {
    let restored = viewed(screen, b"\x1b8");
    let (row, col) = restored.screen().cursor_position();
    let mut seq = format!("\x1b[{};{}H\x1b[m", row + 1, col + 1).into_bytes();
    seq.extend(restored.screen().attributes_formatted());
    seq.extend_from_slice(b"\x1b7\x1b[m");
    seq
}

/// A hash of everything vt100 holds of `screen` (its `Debug` form, streamed).
fn fingerprint(screen: &vt100::Screen, keys: &impl BuildHasher) -> u64 {
    struct Hashing<H>(H);
    impl<H: Hasher> std::fmt::Write for Hashing<H> {
        fn write_str(&mut self, s: &str) -> std::fmt::Result {
            self.0.write(s.as_bytes());
            Ok(())
        }
    }
    let mut h = Hashing(keys.build_hasher());
    let _ = write!(h, "{screen:?}");
    h.0.finish()
}

/// Whether output ending in `tail` stands between escape sequences and characters, so a
/// new parser can take over: read from its last ESC (or its start), the last byte ends
/// a character, a control or a sequence. (An OSC or DCS string begun more than the tail
/// ago and not yet ended is not seen.)
pub(crate) fn between_sequences(tail: &[u8]) -> bool {
    #[derive(Default)]
    struct Ends {
        at: usize,
        last: Option<usize>,
    }
    impl vte::Perform for Ends {
        fn print(&mut self, _: char) {
            self.last = Some(self.at);
        }
        fn execute(&mut self, _: u8) {
            self.last = Some(self.at);
        }
        fn unhook(&mut self) {
            self.last = Some(self.at);
        }
        fn osc_dispatch(&mut self, _: &[&[u8]], _: bool) {
            self.last = Some(self.at);
        }
        fn csi_dispatch(&mut self, _: &vte::Params, _: &[u8], _: bool, _: char) {
            self.last = Some(self.at);
        }
        fn esc_dispatch(&mut self, _: &[u8], _: bool, _: u8) {
            self.last = Some(self.at);
        }
    }
    let from = tail.iter().rposition(|&b| b == 0x1b).unwrap_or(0);
    let rest = &tail[from..];
    let mut parser = vte::Parser::new();
    let mut ends = Ends::default();
    for (i, b) in rest.iter().enumerate() {
        ends.at = i;
        parser.advance(&mut ends, std::slice::from_ref(b));
    }
    rest.is_empty() || ends.last == Some(rest.len() - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(rows: u16, cols: u16, bytes: &[u8]) -> vt100::Parser {
        let mut parser = vt100::Parser::new(rows, cols, 0);
        parser.process(bytes);
        parser
    }

    /// Packs what `bytes` draw, checks the rebuilt parser goes on exactly as the original
    /// through `then`, and returns the packed length.
    fn round_trip(rows: u16, cols: u16, bytes: &[u8], then: &[u8]) -> usize {
        let mut original = parsed(rows, cols, bytes);
        let packed = Packed::pack(original.screen(), bytes).expect("packed");
        let mut rebuilt = packed.unpack();
        assert_eq!(format!("{:?}", rebuilt.screen()), format!("{:?}", original.screen()));
        original.process(then);
        rebuilt.process(then);
        assert_eq!(format!("{:?}", rebuilt.screen()), format!("{:?}", original.screen()), "after {then:?}");
        packed.len()
    }

    #[test]
    fn a_blank_screen_packs_into_a_few_bytes() {
        assert!(round_trip(30, 100, b"", b"hello") < 100);
    }

    #[test]
    fn text_colours_and_wrapped_lines_come_back() {
        let drawn = b"plain \x1b[1;31mbold red\x1b[0m \x1b[38;2;1;2;3mrgb\x1b[48;5;200m bg\r\n\
            a line long enough to wrap past the edge of a narrow screen\x1b[4m under";
        round_trip(6, 20, drawn, b" more\r\n\x1b[Anext");
    }

    #[test]
    fn the_cursor_saved_with_its_attributes_comes_back() {
        let drawn = b"\x1b[3;7H\x1b[7;32m\x1b7\x1b[m\x1b[1;1Hprompt> ";
        round_trip(10, 40, drawn, b"\x1b8restored here");
    }

    #[test]
    fn a_cursor_past_the_last_column_still_wraps_the_next_character() {
        round_trip(3, 5, b"abcde", b"f");
    }

    #[test]
    fn input_modes_come_back() {
        let drawn = b"\x1b[?2004h\x1b[?1h\x1b=\x1b[?1000h\x1b[?1006h\x1b[?25lhidden cursor";
        let original = parsed(5, 20, drawn);
        let rebuilt = Packed::pack(original.screen(), drawn).unwrap().unpack();
        let s = rebuilt.screen();
        assert!(s.bracketed_paste() && s.application_cursor() && s.application_keypad() && s.hide_cursor());
        assert_eq!(s.mouse_protocol_mode(), original.screen().mouse_protocol_mode());
        assert_eq!(s.mouse_protocol_encoding(), original.screen().mouse_protocol_encoding());
    }

    #[test]
    fn a_full_screen_program_and_the_shell_under_it_come_back() {
        let drawn = b"$ vim file\r\n\x1b[?1049h\x1b[H\x1b[2J\x1b[7m~ editing\x1b[m\x1b[3;4H";
        round_trip(6, 30, drawn, b"typed\x1b[?1049lafter vim");
    }

    #[test]
    fn a_grid_left_behind_by_a_full_screen_program_comes_back() {
        let drawn = b"$ top\r\n\x1b[?1049h\x1b[Hstale rows\x1b[?1049l$ ";
        round_trip(6, 30, drawn, b"\x1b[?47hshows the stale rows");
    }

    #[test]
    fn a_resized_screen_comes_back() {
        let mut original = parsed(30, 100, b"before the resize\r\n$ ");
        original.screen_mut().set_size(24, 80);
        original.process(b"after");
        let packed = Packed::pack(original.screen(), b"after").expect("packed");
        assert_eq!(format!("{:?}", packed.unpack().screen()), format!("{:?}", original.screen()));
    }

    #[test]
    fn a_scroll_region_left_set_is_not_packed() {
        let drawn = b"\x1b[2;4rinside";
        assert!(Packed::pack(parsed(6, 20, drawn).screen(), drawn).is_none());
    }

    #[test]
    fn output_ending_inside_a_sequence_is_not_packed() {
        for tail in [&b"text\x1b[31"[..], b"\x1b]0;a title not ended", b"caf\xc3", b"\x1b", b"\x1bP1$r"] {
            assert!(!between_sequences(tail), "{tail:?}");
            assert!(Packed::pack(parsed(5, 20, tail).screen(), tail).is_none(), "{tail:?}");
        }
        for tail in [&b""[..], b"text", b"\x1b[31mred", b"\x1b[31m", b"\x1b]0;title\x07", b"\x1b]0;t\x1b\\", b"caf\xc3\xa9", b"\r\n"] {
            assert!(between_sequences(tail), "{tail:?}");
        }
    }
}

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
//! modes; of a cell's bytes only those it holds, not what an erased character left
//! behind), and only when the output stands between two escape sequences, since a
//! parser's half-read sequence cannot be carried over. A screen whose state the
//! sequences cannot rebuild (a scroll region left set, say) stays as it is.

use std::fmt::Write as _;
use std::hash::{BuildHasher, Hasher};

/// Output bytes looked back over to tell whether the stream stands between sequences.
pub(crate) const TAIL: usize = 64 * 1024;

/// The escape sequences that rebuild a screen on a new parser of its size.
pub(crate) struct Packed {
    rows: u16,
    cols: u16,
    bytes: Vec<u8>,
}

impl Packed {
    /// `screen` packed, if that loses nothing; `tail` is the output its parser parsed
    /// last (up to [`TAIL`] bytes), `whole` whether that is all of it.
    pub(crate) fn pack(screen: &vt100::Screen, tail: &[u8], whole: bool) -> Option<Packed> {
        if !between_sequences(tail, whole) {
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

/// A hash of everything vt100 holds of `screen` that shows or acts (its `Debug` form,
/// streamed through [`CellBytes`]).
fn fingerprint(screen: &vt100::Screen, keys: &impl BuildHasher) -> u64 {
    let mut h = CellBytes::new(keys.build_hasher());
    let _ = write!(h, "{screen:?}");
    h.finish()
}

/// Hashes a screen's `Debug` form, of each cell's `contents: [..]` only the bytes its
/// `len` (low five bits) says it holds: vt100 erases a cell by zeroing its length and
/// leaves the old character's bytes, which nothing reads and no rebuild reproduces.
struct CellBytes<H> {
    hasher: H,
    /// How much of `contents: [` the last bytes matched.
    matched: usize,
    state: Cells,
    /// The cell's contents numbers, and the text from its `]` to its length.
    bytes: Vec<u64>,
    text: Vec<u8>,
}

/// Where [`CellBytes`] stands in a cell's fields.
enum Cells {
    /// Outside a cell's contents.
    Out,
    /// In `contents: [..]`, reading a number (if one has begun).
    Contents(Option<u64>),
    /// After its `]`, reading `, len: N` (N once it has begun).
    Len(Option<u64>),
}

const CONTENTS: &[u8] = b"contents: [";

/// `n` with decimal digit `b` appended.
fn digit(n: Option<u64>, b: u8) -> Option<u64> {
    Some(n.unwrap_or(0).saturating_mul(10).saturating_add(u64::from(b - b'0')))
}

impl<H: Hasher> CellBytes<H> {
    fn new(hasher: H) -> Self {
        CellBytes { hasher, matched: 0, state: Cells::Out, bytes: Vec::new(), text: Vec::new() }
    }

    fn finish(mut self) -> u64 {
        if !matches!(self.state, Cells::Out) {
            // Cut off inside a cell (never, for a whole screen): hash that it was.
            self.hasher.write_u8(0xff);
        }
        self.hasher.finish()
    }

    fn byte(&mut self, b: u8) {
        match self.state {
            Cells::Out => {
                self.hasher.write_u8(b);
                // `c` opens the pattern and appears in it nowhere else.
                self.matched = if b == CONTENTS[self.matched] { self.matched + 1 } else { usize::from(b == CONTENTS[0]) };
                if self.matched == CONTENTS.len() {
                    self.matched = 0;
                    self.bytes.clear();
                    self.state = Cells::Contents(None);
                }
            }
            Cells::Contents(number) => match b {
                b'0'..=b'9' => self.state = Cells::Contents(digit(number, b)),
                _ => {
                    self.bytes.extend(number);
                    if b == b']' {
                        self.text.clear();
                        self.state = Cells::Len(None);
                    } else {
                        self.state = Cells::Contents(None);
                    }
                }
            },
            Cells::Len(len) => match (b, len) {
                (b'0'..=b'9', _) => self.state = Cells::Len(digit(len, b)),
                (_, None) => self.text.push(b),
                (_, Some(n)) => {
                    let held = (n & 0x1f) as usize;
                    for v in self.bytes.iter().take(held) {
                        self.hasher.write_u64(*v);
                    }
                    self.hasher.write(&self.text);
                    self.hasher.write_u64(n);
                    self.hasher.write_u8(b);
                    self.state = Cells::Out;
                }
            },
        }
    }
}

impl<H: Hasher> std::fmt::Write for CellBytes<H> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        for b in s.bytes() {
            self.byte(b);
        }
        Ok(())
    }
}

/// Whether output ending in `tail` (all of it if `whole`) stands between escape
/// sequences and characters, so a new parser can take over: a parser fed the tail from
/// its last ESC, then `A`, prints that `A` and does nothing else. An ESC ends any string
/// (OSC, DCS) before it, so the tail must hold one unless it is the whole output: a
/// string begun further back (an image, a clipboard copy) may still be open.
pub(crate) fn between_sequences(tail: &[u8], whole: bool) -> bool {
    /// What the parser did after the tail.
    #[derive(Default)]
    struct Probe {
        armed: bool,
        printed_a: bool,
        other: bool,
    }
    impl Probe {
        fn saw(&mut self, printed_a: bool) {
            if self.armed {
                if printed_a && !self.printed_a {
                    self.printed_a = true;
                } else {
                    self.other = true;
                }
            }
        }
    }
    impl vte::Perform for Probe {
        fn print(&mut self, c: char) {
            self.saw(c == 'A');
        }
        fn execute(&mut self, _: u8) {
            self.saw(false);
        }
        fn hook(&mut self, _: &vte::Params, _: &[u8], _: bool, _: char) {
            self.saw(false);
        }
        fn put(&mut self, _: u8) {
            self.saw(false);
        }
        fn unhook(&mut self) {
            self.saw(false);
        }
        fn osc_dispatch(&mut self, _: &[&[u8]], _: bool) {
            self.saw(false);
        }
        fn csi_dispatch(&mut self, _: &vte::Params, _: &[u8], _: bool, _: char) {
            self.saw(false);
        }
        fn esc_dispatch(&mut self, _: &[u8], _: bool, _: u8) {
            self.saw(false);
        }
    }
    let from = match tail.iter().rposition(|&b| b == 0x1b) {
        Some(at) => at,
        None if whole => 0,
        None => return false,
    };
    let mut parser = vte::Parser::new();
    let mut probe = Probe::default();
    parser.advance(&mut probe, &tail[from..]);
    probe.armed = true;
    parser.advance(&mut probe, b"A");
    probe.printed_a && !probe.other
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
        let packed = Packed::pack(original.screen(), bytes, true).expect("packed");
        let mut rebuilt = packed.unpack();
        same(rebuilt.screen(), original.screen());
        original.process(then);
        rebuilt.process(then);
        same(rebuilt.screen(), original.screen());
        packed.len()
    }

    /// Asserts two screens show and hold the same.
    fn same(a: &vt100::Screen, b: &vt100::Screen) {
        assert_eq!(String::from_utf8_lossy(&a.contents_formatted()), String::from_utf8_lossy(&b.contents_formatted()));
        let keys = std::hash::BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default();
        assert_eq!(fingerprint(a, &keys), fingerprint(b, &keys), "{a:?}\n{b:?}");
    }

    #[test]
    fn bytes_an_erased_cell_left_behind_do_not_count() {
        let keys = std::hash::BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default();
        let erased = parsed(2, 10, "€x\x1b[H\x1b[K".as_bytes());
        assert_ne!(format!("{:?}", erased.screen()), format!("{:?}", parsed(2, 10, b"").screen()), "vt100 keeps them");
        assert_eq!(fingerprint(erased.screen(), &keys), fingerprint(parsed(2, 10, b"").screen(), &keys));
        // What a cell holds still counts, and its length and attributes.
        let print = |b: &[u8]| fingerprint(parsed(2, 10, b).screen(), &keys);
        assert_ne!(print("€".as_bytes()), print(b"e"));
        assert_ne!(print(b"ab"), print(b"ba"));
        assert_ne!(print(b"\x1b[1ma"), print(b"a"));
        assert_ne!(print(b"a"), print(b""));
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
        let rebuilt = Packed::pack(original.screen(), drawn, true).unwrap().unpack();
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
        let packed = Packed::pack(original.screen(), b"\x1b[mafter", false).expect("packed");
        same(packed.unpack().screen(), original.screen());
    }

    #[test]
    fn erased_and_overwritten_cells_come_back() {
        // Erasing keeps a cell's old bytes behind its length; a shorter character over a
        // longer one leaves the rest.
        let drawn = "a long line of text é€😀\r\nsecond\x1b[1;5H\x1b[K\x1b[2;1H\x1b[2J\x1b[Hx\x1b[1;3Hé".as_bytes();
        round_trip(4, 30, drawn, b"\x1b[1;1Hmore");
        let full = b"\x1b[?1049hfull screen\x1b[?1049l\x1b[?1049h\x1b[?1049l$ ";
        round_trip(4, 30, full, b"\x1b[?47hshows the cleared grid");
    }

    #[test]
    fn a_scroll_region_left_set_is_not_packed() {
        let drawn = b"\x1b[2;4rinside";
        assert!(Packed::pack(parsed(6, 20, drawn).screen(), drawn, true).is_none());
    }

    #[test]
    fn output_ending_inside_a_sequence_is_not_packed() {
        // Cut inside a CSI (a control inside one is carried out and the CSI goes on), an
        // ESC sequence, an OSC or DCS string, a UTF-8 character.
        let cut: [&[u8]; 7] = [b"text\x1b[31", b"text\x1b[3\r", b"\x1b]0;a title not ended", b"caf\xc3", b"\x1b", b"\x1b(", b"\x1bP1$r"];
        for tail in cut {
            assert!(!between_sequences(tail, true), "{tail:?}");
            assert!(Packed::pack(parsed(5, 20, tail).screen(), tail, true).is_none(), "{tail:?}");
        }
        let ended: [&[u8]; 9] =
            [b"", b"text", b"\x1b[31mred", b"\x1b[31m", b"\x1b]0;title\x07", b"\x1b]0;t\x1b\\", b"caf\xc3\xa9", b"\r\n", b"\x1b(Bx"];
        for tail in ended {
            assert!(between_sequences(tail, true), "{tail:?}");
        }
        // Plain text with no ESC is enough only when it is all the output: a string begun
        // before the tail (a sixel image, an OSC 52 copy) may be open still.
        assert!(!between_sequences(b"no escape in the last bytes", false));
        assert!(between_sequences(b"\x1b[mthe last sequence ended", false));
    }
}

use super::*;

#[test]
fn a_plan_keeps_the_last_lines_and_the_colours_before_them() {
    let mut bytes = b"ab".to_vec();
    for i in 0..10_000 {
        bytes.extend_from_slice(format!("\x1b[{}mline {i}\r\n", 31 + i % 7).as_bytes());
    }
    bytes.extend_from_slice(b"partial \x1b[?25l");
    let plan = plan(&bytes, 24, 1024).expect("plain lines");
    assert_eq!(plan.head, b"ab");
    let tail = std::str::from_utf8(plan.tail).unwrap();
    assert!(tail.starts_with("\x1b[") && tail.ends_with("partial \x1b[?25l"), "{tail:?}");
    assert_eq!(tail.matches("\r\n").count(), 2 * 24 + 2, "the last lines, no more");
    assert_eq!(plan.skipped, bytes.len() - 2 - plan.tail.len());
    let pens = std::str::from_utf8(&plan.pens).unwrap();
    assert_eq!(pens.matches("\x1b[").count(), 10_000 - (2 * 24 + 2));
    assert!(pens.starts_with("\x1b[31m\x1b[32m"), "in order");

    // From the last reset of the pen on.
    let mut bytes = b"ab\x1b[1m".to_vec();
    for (i, pen) in ["\x1b[31m", "\x1b[0;4m", "\x1b[32m", "\x1b[m", "\x1b[1m", "\x1b[00m", "\x1b[33m"].iter().enumerate() {
        bytes.extend_from_slice(pen.as_bytes());
        bytes.extend_from_slice(format!("{i}\r\n").repeat(2000).as_bytes());
    }
    let reset = super::plan(&bytes, 24, 1024).expect("plain lines");
    // `00` is not taken for a reset: keeping more than needed is harmless.
    assert_eq!(reset.pens, b"\x1b[m\x1b[1m\x1b[00m\x1b[33m");
}

#[test]
fn anything_but_plain_lines_is_parsed_whole() {
    let lines: Vec<u8> = (0..10_000).flat_map(|i| format!("line {i}\r\n").into_bytes()).collect();
    assert!(plan(&[b"ab", &lines[..]].concat(), 24, 1024).is_some());
    for odd in [
        &b"\x07"[..],
        b"\x1b[?1049h",
        b"\x1b[5;10r",
        b"\x1b[>4;2m",
        b"\x1b[2J",
        b"\x1b]0;title\x07",
        b"\x1b(0",
        b"\x0b",
        b"\x0e",
        b"\x7f",
        "\u{9b}".as_bytes(),
        b"\xff",
    ] {
        let mut bytes = b"ab".to_vec();
        bytes.extend_from_slice(&lines[..lines.len() / 2]);
        bytes.extend_from_slice(odd);
        bytes.extend_from_slice(&lines[lines.len() / 2..]);
        assert_eq!(plan(&bytes, 24, 1024), None, "{odd:?}");
    }
    // Too few lines to skip any, lines without carriage returns, no end to a sequence.
    assert_eq!(plan(&[b"ab", &lines[..2000]].concat(), 24, 64 * 1024), None);
    assert_eq!(plan(&[b"ab", &b"x\n".repeat(100_000)[..]].concat(), 24, 1024), None);
    assert_eq!(plan(&[&b"12"[..], &b"3\r\n".repeat(100_000)[..]].concat(), 24, 1024), None);
}

#[test]
fn a_trial_tells_a_screen_that_scrolled_whole_from_one_that_did_not() {
    let trial = Trial::new(3, 20).expect("wide enough");
    let lines: Vec<String> =
        String::from_utf8(trial.bytes()).unwrap().split("\r\n").map(|l| l.trim_start_matches('\r').to_owned()).collect();
    assert_eq!(lines.len(), 2 * 3 + 1, "two lines a row, then what follows the last line feed");
    let last = |n: usize| lines[lines.len() - 1 - n..lines.len() - 1].to_vec();
    let shown = |rows: Vec<String>| rows.into_iter();
    assert!(trial.scrolled_whole_screen((2, 0), shown([last(2), vec![String::new()]].concat())));
    // The cursor elsewhere, a row kept in place, a row not blank, a row too few.
    assert!(!trial.scrolled_whole_screen((1, 0), shown([last(2), vec![String::new()]].concat())));
    assert!(!trial.scrolled_whole_screen((2, 0), shown(vec!["kept".into(), last(1)[0].clone(), String::new()])));
    assert!(!trial.scrolled_whole_screen((2, 0), shown([last(2), vec!["x".into()]].concat())));
    assert!(!trial.scrolled_whole_screen((2, 0), shown(last(2))));
    // Another trial's lines are not this one's (a program cannot print them in advance).
    let other = Trial::new(3, 20).unwrap();
    assert!(other.nonce != trial.nonce || other.line(0) == trial.line(0));
    assert!(Trial::new(3, 15).is_none(), "too narrow for a trial line");
}

/// A small, seeded source of variety for the floods below.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// About `len` bytes of plain lines as a busy program prints them: words, wide and
/// combining letters, tabs, backspaces, colour changes, lines longer than the screen (they
/// wrap), empty lines, and now and then a bare line feed.
fn flood(rng: &mut Rng, len: usize) -> Vec<u8> {
    const WORDS: [&str; 12] =
        ["build", "ok", "字符", "e\u{301}te\u{301}", "\t", "ab\x08c", "\x1b[1;31m", "\x1b[m", "\x1b[38;5;208m", "\x1b[4:3m", "naïve", "🦀"];
    // Plain at first, so where the parser stands after the plan's head is the start's.
    let mut out = b"begin building\r\n".to_vec();
    while out.len() < len {
        for _ in 0..rng.below(40) {
            out.extend_from_slice(WORDS[rng.below(WORDS.len() as u64) as usize].as_bytes());
            out.push(b' ');
        }
        out.extend_from_slice(if rng.below(50) == 0 { b"\n" } else { b"\r\n" });
    }
    out
}

/// Where the parser may stand when a flood begins, and whether skipping is expected to
/// be tried and taken there.
const STARTS: [(&str, &[u8], bool); 16] = [
    ("a fresh screen", b"", true),
    ("text on it, the cursor mid-line", b"$ make\r\nsome text\x1b[3;7H", true),
    ("the alternate screen", b"\x1b[?1049hfull screen\x1b[5;5H", true),
    ("insert mode", b"\x1b[4hx", true),
    ("autowrap off", b"\x1b[?7lx", true),
    ("new-line mode", b"\x1b[20hx", true),
    ("colours set", b"\x1b[1;32;44mgreen", true),
    ("the middle of a CSI", b"ab\x1b[3", true),
    ("the middle of an escape", b"ab\x1b", true),
    ("the middle of a UTF-8 letter", b"ab\xe5\xad", true),
    ("a scroll region, the cursor in it", b"header\x1b[3;10r\x1b[5;1H", false),
    ("a scroll region, the cursor below it", b"\x1b[3;10r\x1b[20;1H", false),
    ("a scroll region, the cursor above it", b"top\r\n\x1b[5;24r\x1b[1;1H", false),
    ("the middle of a title", b"\x1b]0;title so far ", false),
    ("the middle of a device control string", b"\x1bPq#0;", false),
    ("origin mode in a region", b"\x1b[2;20r\x1b[?6h\x1b[3;1H", false),
];

/// Everything of the screen a snapshot, a viewer or later output can tell apart.
fn state(parser: &vt100::Parser) -> (Vec<u8>, (u16, u16), bool, Vec<String>) {
    let s = parser.screen();
    (s.state_formatted(), s.cursor_position(), s.alternate_screen(), s.rows(0, s.size().1).collect())
}

/// Output after the flood whose effect depends on the state it leaves: the pen, the
/// scroll region, the primary screen under an alternate one.
const AFTER: &[u8] = b"after\x1b[30;1H\n\n\n\x1b[Hhome\x1b[?1049lback\x1b]0;t\x07";

#[test]
fn skipping_what_scrolls_away_leaves_the_same_screen_from_every_start() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for (name, start, skips) in STARTS {
        for (rows, cols) in [(24u16, 80u16), (40, 132), (30, 20)] {
            let bytes = flood(&mut rng, 300 * 1024);
            let mut whole = vt100::Parser::new(rows, cols, 0);
            whole.process(start);
            whole.process(&bytes);
            let mut skimmed = vt100::Parser::new(rows, cols, 0);
            skimmed.process(start);
            let skipped = process(&mut skimmed, &bytes);
            assert_eq!(skipped > 0, skips, "{name}, {rows}×{cols}: skipped {skipped}");
            if skips {
                assert!(skipped > bytes.len() / 2, "{name}: most of the flood skipped ({skipped} of {})", bytes.len());
            }
            assert_eq!(state(&skimmed), state(&whole), "{name}, {rows}×{cols}");
            whole.process(AFTER);
            skimmed.process(AFTER);
            assert_eq!(state(&skimmed), state(&whole), "{name}, {rows}×{cols}, after more output");
        }
    }
}

#[test]
fn pieces_split_anywhere_give_the_same_screen() {
    let mut rng = Rng(42);
    let bytes = flood(&mut rng, 2 * 1024 * 1024);
    let mut whole = vt100::Parser::new(24, 80, 0);
    whole.process(&bytes);
    let mut skimmed = vt100::Parser::new(24, 80, 0);
    let mut at = 0;
    let mut skipped = 0;
    while at < bytes.len() {
        // Pieces of 100–300 KiB, cut mid-sequence and mid-letter as a reader cuts them.
        let end = (at + 100 * 1024 + rng.below(200 * 1024) as usize).min(bytes.len());
        skipped += process(&mut skimmed, &bytes[at..end]);
        at = end;
    }
    assert!(skipped > bytes.len() / 2, "skipped {skipped} of {}", bytes.len());
    assert_eq!(state(&skimmed), state(&whole));
}

#[test]
fn colours_and_the_column_carry_over_the_lines_skipped() {
    // A colour set early and never again, and last lines that each begin where the one
    // before ended (bare line feeds): both hang on what the skipped lines left.
    let mut bytes = b"begin\r\n\x1b[1;32m".to_vec();
    for i in 0..5000 {
        bytes.extend_from_slice(format!("plain line {i}\r\n").as_bytes());
    }
    for i in 0..200 {
        bytes.extend_from_slice(format!("stair {i}\n").as_bytes());
    }
    let mut whole = vt100::Parser::new(24, 80, 0);
    whole.process(b"$ prompt ");
    whole.process(&bytes);
    let mut skimmed = vt100::Parser::new(24, 80, 0);
    skimmed.process(b"$ prompt ");
    assert!(process(&mut skimmed, &bytes) > 0, "skipped");
    assert_eq!(state(&skimmed), state(&whole));
    assert!(whole.screen().bold() && whole.screen().fgcolor() == vt100::Color::Idx(2), "green and bold at the end");
    whole.process(AFTER);
    skimmed.process(AFTER);
    assert_eq!(state(&skimmed), state(&whole), "after more output");

    // And the server's model.
    let mut whole = crate::checkpoint::ScreenModel::new(80, 24);
    whole.feed_all(b"$ prompt ");
    whole.feed_all(&bytes);
    let mut skimmed = crate::checkpoint::ScreenModel::new(80, 24);
    skimmed.feed_all(b"$ prompt ");
    assert!(process(&mut skimmed, &bytes) > 0, "skipped");
    assert_eq!(avt_state(&skimmed), avt_state(&whole));
}

/// Everything of an avt model later output depends on: its dump holds both screens, the
/// modes, the pen, the scroll region and a sequence cut in half.
fn avt_state(model: &crate::checkpoint::ScreenModel) -> (String, (usize, usize, bool)) {
    (model.dump(), model.cursor())
}

#[test]
fn the_server_s_model_skips_alike_from_every_start() {
    use crate::checkpoint::ScreenModel;
    let mut rng = Rng(7);
    for (name, start, skips) in STARTS {
        for (rows, cols) in [(24u16, 80u16), (30, 20)] {
            let bytes = flood(&mut rng, 300 * 1024);
            let mut whole = ScreenModel::new(cols, rows);
            whole.feed_all(start);
            whole.feed_all(&bytes);
            let mut skimmed = ScreenModel::new(cols, rows);
            skimmed.feed_all(start);
            let skipped = process(&mut skimmed, &bytes);
            // A model holding half a letter parses the next piece whole.
            let skips = skips && !start.ends_with(b"\xe5\xad");
            assert_eq!(skipped > 0, skips, "{name}, {rows}×{cols}: skipped {skipped}");
            assert_eq!(avt_state(&skimmed), avt_state(&whole), "{name}, {rows}×{cols}");
            whole.feed_all(AFTER);
            skimmed.feed_all(AFTER);
            assert_eq!(avt_state(&skimmed), avt_state(&whole), "{name}, {rows}×{cols}, after more output");
        }
    }
}

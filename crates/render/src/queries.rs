//! Detection of terminal queries in program output, and their answers.
//!
//! Programs such as shells and editors ask the terminal questions (device
//! attributes, cursor position, colours) and may stall until they get an
//! answer. When no real terminal is attached, a headless host can run the
//! output through a [`QueryScanner`] and write [`answer`] back to the program.

use crate::bounded::BoundedParser;
use vte::{Params, Perform};

/// A terminal query that a headless host can answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Query {
    /// Primary device attributes (DA1): `CSI c` or `CSI 0 c`.
    PrimaryDeviceAttributes,
    /// Secondary device attributes (DA2): `CSI > c` or `CSI > 0 c`.
    SecondaryDeviceAttributes,
    /// Device status report (DSR): `CSI 5 n`.
    DeviceStatus,
    /// Cursor position report (CPR): `CSI 6 n`.
    CursorPosition,
    /// Foreground colour query: `OSC 10 ; ?` terminated by BEL or ST.
    ForegroundColor,
    /// Background colour query: `OSC 11 ; ?` terminated by BEL or ST.
    BackgroundColor,
}

/// Streaming scanner that finds [`Query`]s in terminal output bytes.
///
/// State is kept between calls, so queries split across chunks are found.
#[derive(Default)]
pub struct QueryScanner {
    parser: BoundedParser,
}

/// The `vte` performer: records recognised queries.
struct Collector<'a> {
    out: &'a mut Vec<Query>,
}

/// The value of the only parameter, if there is exactly one without
/// sub-parameters (an omitted parameter reads as 0).
fn single_param(params: &Params) -> Option<u16> {
    if params.len() != 1 {
        return None;
    }
    match params.iter().next() {
        Some(&[value]) => Some(value),
        _ => None,
    }
}

impl Perform for Collector<'_> {
    fn csi_dispatch(&mut self, params: &Params, intermediates: &[u8], ignore: bool, action: char) {
        if ignore {
            return;
        }
        let query = match (action, intermediates, single_param(params)) {
            ('c', [], Some(0)) => Query::PrimaryDeviceAttributes,
            ('c', [b'>'], Some(0)) => Query::SecondaryDeviceAttributes,
            ('n', [], Some(5)) => Query::DeviceStatus,
            ('n', [], Some(6)) => Query::CursorPosition,
            _ => return,
        };
        self.out.push(query);
    }

    fn osc_dispatch(&mut self, params: &[&[u8]], _bell_terminated: bool) {
        // xterm semantics: `OSC 10 ; a ; b` applies `a` to colour 10 and `b`
        // to colour 11 (and so on), so `OSC 10;?;?` queries both.
        let first: u16 = match params.first() {
            Some(&b"10") => 10,
            Some(&b"11") => 11,
            _ => return,
        };
        for (number, value) in (first..).zip(params.iter().skip(1)) {
            if *value != b"?" {
                continue;
            }
            match number {
                10 => self.out.push(Query::ForegroundColor),
                11 => self.out.push(Query::BackgroundColor),
                _ => {}
            }
        }
    }
}

impl QueryScanner {
    /// Creates a scanner in the initial (ground) state.
    pub fn new() -> Self {
        Self::default()
    }

    /// Scans `bytes`, pushing every complete query found to `out` in order.
    pub fn scan(&mut self, bytes: &[u8], out: &mut Vec<Query>) {
        self.parser.advance(&mut Collector { out }, bytes);
    }
}

/// The answer bytes a terminal would send.
///
/// `cursor` is (row, col) 0-based and used for [`Query::CursorPosition`]
/// (answer `ESC [ row+1 ; col+1 R`).
pub fn answer(q: Query, cursor: (u16, u16)) -> Vec<u8> {
    match q {
        Query::PrimaryDeviceAttributes => b"\x1b[?1;2c".to_vec(),
        Query::SecondaryDeviceAttributes => b"\x1b[>0;276;0c".to_vec(),
        Query::DeviceStatus => b"\x1b[0n".to_vec(),
        Query::CursorPosition => {
            let (row, col) = (u32::from(cursor.0) + 1, u32::from(cursor.1) + 1);
            format!("\x1b[{row};{col}R").into_bytes()
        }
        Query::ForegroundColor => b"\x1b]10;rgb:ffff/ffff/ffff\x1b\\".to_vec(),
        Query::BackgroundColor => b"\x1b]11;rgb:0000/0000/0000\x1b\\".to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Query::*;

    fn scan(bytes: &[u8]) -> Vec<Query> {
        let mut s = QueryScanner::new();
        let mut out = Vec::new();
        s.scan(bytes, &mut out);
        out
    }

    #[test]
    fn primary_device_attributes() {
        assert_eq!(scan(b"\x1b[c"), [PrimaryDeviceAttributes]);
        assert_eq!(scan(b"\x1b[0c"), [PrimaryDeviceAttributes]);
        assert!(scan(b"\x1b[1c").is_empty());
        assert!(scan(b"\x1b[0;0c").is_empty());
        assert!(scan(b"\x1b[=c").is_empty()); // DA3, not handled
        assert!(scan(b"\x1b[?1;2c").is_empty()); // a DA1 *reply*
    }

    #[test]
    fn secondary_device_attributes() {
        assert_eq!(scan(b"\x1b[>c"), [SecondaryDeviceAttributes]);
        assert_eq!(scan(b"\x1b[>0c"), [SecondaryDeviceAttributes]);
        assert!(scan(b"\x1b[>1c").is_empty());
        assert!(scan(b"\x1b[>0;276;0c").is_empty()); // a DA2 reply
    }

    #[test]
    fn device_status_and_cursor_position() {
        assert_eq!(scan(b"\x1b[5n"), [DeviceStatus]);
        assert_eq!(scan(b"\x1b[6n"), [CursorPosition]);
        assert!(scan(b"\x1b[?6n").is_empty()); // DECXCPR
        assert!(scan(b"\x1b[?5n").is_empty());
        assert!(scan(b"\x1b[n").is_empty());
        assert!(scan(b"\x1b[0n").is_empty()); // a DSR reply
        assert!(scan(b"\x1b[6:1n").is_empty());
        assert!(scan(b"\x1b[6;1n").is_empty());
        assert!(scan(b"\x1b[6 n").is_empty());
        assert!(scan(b"\x1b[6R").is_empty());
    }

    #[test]
    fn colour_queries() {
        assert_eq!(scan(b"\x1b]10;?\x07"), [ForegroundColor]);
        assert_eq!(scan(b"\x1b]10;?\x1b\\"), [ForegroundColor]);
        assert_eq!(scan(b"\x1b]11;?\x07"), [BackgroundColor]);
        assert_eq!(scan(b"\x1b]11;?\x1b\\"), [BackgroundColor]);
        assert_eq!(scan(b"\x1b]10;?;?\x07"), [ForegroundColor, BackgroundColor]);
        assert_eq!(scan(b"\x1b]11;?;?\x07"), [BackgroundColor]);
        assert!(scan(b"\x1b]10;#ffffff\x07").is_empty()); // a set, not a query
        assert!(scan(b"\x1b]11;rgb:0000/0000/0000\x1b\\").is_empty());
        assert!(scan(b"\x1b]12;?\x07").is_empty());
        assert!(scan(b"\x1b]4;1;?\x07").is_empty());
        assert!(scan(b"\x1b]10;\x07").is_empty());
        assert!(scan(b"\x1b]10;??\x07").is_empty());
        assert!(scan(b"\x1b]110;?\x07").is_empty());
        assert!(scan(b"\x1b]10;?").is_empty()); // not terminated yet
    }

    #[test]
    fn lookalikes_are_ignored() {
        assert!(scan(b"\x1b[2J\x1b[H\x1b[31m\x1b[?25l\x1b[6;1H").is_empty());
        assert!(scan(b"[6n [c ]10;?\x07 plain text").is_empty());
        assert!(scan(b"\x1bP$q6n\x1b\\").is_empty());
        // An ESC ends an OSC string, so the CSI after it is a real query.
        assert_eq!(scan(b"\x1b]0;\x1b[6n\x07"), [CursorPosition]);
    }

    #[test]
    fn several_queries_in_order() {
        let bytes = b"hi\x1b[6n\x1b[31mx\x1b[c\x1b]11;?\x07\x1b[>c\x1b[5n";
        assert_eq!(scan(bytes), [CursorPosition, PrimaryDeviceAttributes, BackgroundColor, SecondaryDeviceAttributes, DeviceStatus]);
    }

    #[test]
    fn queries_split_across_chunks() {
        let bytes: &[u8] = b"a\x1b[6nb\x1b[>0cc\x1b]10;?\x1b\\d\x1b]11;?\x07";
        let expected = [CursorPosition, SecondaryDeviceAttributes, ForegroundColor, BackgroundColor];
        for split in 0..=bytes.len() {
            let mut s = QueryScanner::new();
            let mut out = Vec::new();
            s.scan(&bytes[..split], &mut out);
            s.scan(&bytes[split..], &mut out);
            assert_eq!(out, expected, "split at {split}");
        }
        let mut s = QueryScanner::new();
        let mut out = Vec::new();
        for b in bytes.chunks(1) {
            s.scan(b, &mut out);
        }
        assert_eq!(out, expected);
    }

    #[test]
    fn garbage_never_panics() {
        let all: Vec<u8> = (0..=255u8).cycle().take(100_000).collect();
        let _ = scan(&all);
        let _ = scan(&b"\x1b[".repeat(50_000));
        let _ = scan(&b"\x1b]10;".repeat(50_000));
    }

    #[test]
    fn answers() {
        assert_eq!(answer(PrimaryDeviceAttributes, (0, 0)), b"\x1b[?1;2c");
        assert_eq!(answer(SecondaryDeviceAttributes, (0, 0)), b"\x1b[>0;276;0c");
        assert_eq!(answer(DeviceStatus, (0, 0)), b"\x1b[0n");
        assert_eq!(answer(CursorPosition, (0, 0)), b"\x1b[1;1R");
        assert_eq!(answer(CursorPosition, (4, 19)), b"\x1b[5;20R");
        assert_eq!(answer(CursorPosition, (u16::MAX, u16::MAX)), b"\x1b[65536;65536R");
        assert_eq!(answer(ForegroundColor, (0, 0)), b"\x1b]10;rgb:ffff/ffff/ffff\x1b\\");
        assert_eq!(answer(BackgroundColor, (0, 0)), b"\x1b]11;rgb:0000/0000/0000\x1b\\");
    }

    #[test]
    fn answers_are_not_queries() {
        let all = [PrimaryDeviceAttributes, SecondaryDeviceAttributes, DeviceStatus, CursorPosition, ForegroundColor, BackgroundColor];
        for q in all {
            assert!(scan(&answer(q, (3, 7))).is_empty(), "{q:?}");
        }
    }
}

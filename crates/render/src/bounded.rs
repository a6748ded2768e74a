//! A `vte::Parser` wrapper with bounded memory use.
//!
//! With its default `std` feature, `vte` buffers the body of an OSC string in
//! a `Vec` that grows without limit until the string is terminated, so a
//! program printing `ESC ]` followed by endless bytes would make us allocate
//! without bound. [`BoundedParser`] notices long stretches of input during
//! which the parser performed no action at all (the only way that buffer can
//! grow) and then replaces the parser with a fresh one, put back into an
//! equivalent "swallow until terminator" state so the rest of the sequence is
//! still not shown as text.

use vte::{Params, Parser, Perform};

/// Bytes fed to the parser per `advance` call, so the guard is checked often.
const SLICE: usize = 4096;
/// Bytes without any parser action after which the parser is replaced.
pub(crate) const IDLE_LIMIT: usize = 64 * 1024;

/// Wraps a performer and records whether any action was performed.
struct Watch<'a, P: Perform> {
    inner: &'a mut P,
    acted: bool,
}

impl<P: Perform> Perform for Watch<'_, P> {
    fn print(&mut self, c: char) {
        self.acted = true;
        self.inner.print(c);
    }
    fn execute(&mut self, byte: u8) {
        self.acted = true;
        self.inner.execute(byte);
    }
    fn hook(&mut self, params: &Params, intermediates: &[u8], ignore: bool, action: char) {
        self.acted = true;
        self.inner.hook(params, intermediates, ignore, action);
    }
    fn put(&mut self, byte: u8) {
        self.acted = true;
        self.inner.put(byte);
    }
    fn unhook(&mut self) {
        self.acted = true;
        self.inner.unhook();
    }
    fn osc_dispatch(&mut self, params: &[&[u8]], bell_terminated: bool) {
        self.acted = true;
        self.inner.osc_dispatch(params, bell_terminated);
    }
    fn csi_dispatch(&mut self, params: &Params, intermediates: &[u8], ignore: bool, c: char) {
        self.acted = true;
        self.inner.csi_dispatch(params, intermediates, ignore, c);
    }
    fn esc_dispatch(&mut self, intermediates: &[u8], ignore: bool, byte: u8) {
        self.acted = true;
        self.inner.esc_dispatch(intermediates, ignore, byte);
    }
}

/// A performer that ignores everything (used to re-prime a fresh parser).
struct Sink;
impl Perform for Sink {}

/// A `vte::Parser` whose internal buffers stay bounded on any input.
#[derive(Default)]
pub(crate) struct BoundedParser {
    parser: Parser,
    /// Bytes fed since the parser last performed an action.
    idle: usize,
    /// The byte that followed the most recent ESC, if known.
    after_esc: Option<u8>,
    /// The most recent byte seen was ESC (its follower is still unknown).
    esc_pending: bool,
    /// How often the parser was replaced (for tests).
    resets: usize,
}

impl BoundedParser {
    /// Feeds `bytes` to the parser, dispatching actions to `performer`.
    pub(crate) fn advance<P: Perform>(&mut self, performer: &mut P, bytes: &[u8]) {
        for slice in bytes.chunks(SLICE) {
            let mut watch = Watch { inner: &mut *performer, acted: false };
            self.parser.advance(&mut watch, slice);
            let acted = watch.acted;
            self.track_escapes(slice);
            if acted {
                self.idle = 0;
            } else {
                self.idle = self.idle.saturating_add(slice.len());
                if self.idle >= IDLE_LIMIT {
                    self.reset();
                }
            }
        }
    }

    /// Remembers which kind of sequence the latest ESC introduced.
    fn track_escapes(&mut self, slice: &[u8]) {
        if self.esc_pending {
            if let Some(&first) = slice.first() {
                self.after_esc = Some(first);
                self.esc_pending = false;
            }
        }
        if let Some(i) = slice.iter().rposition(|&b| b == 0x1b) {
            match slice.get(i + 1) {
                Some(&next) => {
                    self.after_esc = Some(next);
                    self.esc_pending = false;
                }
                None => {
                    self.after_esc = None;
                    self.esc_pending = true;
                }
            }
        }
    }

    /// Replaces the parser after a long action-free stretch.
    ///
    /// No action for that long means the parser sits inside a string-type
    /// sequence (OSC, DCS, SOS/PM/APC) or a pathological escape/CSI prefix;
    /// string-type sequences are re-entered with an empty buffer so their
    /// remaining body is still swallowed.
    fn reset(&mut self) {
        self.parser = Parser::new();
        self.idle = 0;
        self.resets += 1;
        let primer: &[u8] = match self.after_esc {
            Some(b']') => b"\x1b]",
            Some(b'P' | b'X' | b'^' | b'_') => b"\x1b_",
            _ => b"",
        };
        self.parser.advance(&mut Sink, primer);
    }

    /// Number of times the parser has been replaced.
    #[cfg(test)]
    pub(crate) fn resets(&self) -> usize {
        self.resets
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Log {
        text: String,
        oscs: Vec<Vec<Vec<u8>>>,
    }
    impl Perform for Log {
        fn print(&mut self, c: char) {
            self.text.push(c);
        }
        fn osc_dispatch(&mut self, params: &[&[u8]], _bell: bool) {
            self.oscs.push(params.iter().map(|p| p.to_vec()).collect());
        }
    }

    #[test]
    fn passes_through_normal_input() {
        let mut p = BoundedParser::default();
        let mut log = Log::default();
        p.advance(&mut log, b"hi\x1b]0;title\x07there");
        assert_eq!(log.text, "hithere");
        assert_eq!(log.oscs, vec![vec![b"0".to_vec(), b"title".to_vec()]]);
        assert_eq!(p.resets(), 0);
    }

    #[test]
    fn endless_osc_is_cut_but_still_swallowed() {
        let mut p = BoundedParser::default();
        let mut log = Log::default();
        p.advance(&mut log, b"a\x1b]52;c;");
        let junk = vec![b'A'; 1000];
        for _ in 0..1000 {
            p.advance(&mut log, &junk);
        }
        p.advance(&mut log, b"\x07b");
        assert_eq!(log.text, "ab");
        assert!(p.resets() >= 1);
        // The OSC payload seen after the reset is bounded.
        let total: usize = log.oscs.iter().flatten().map(Vec::len).sum();
        assert!(total <= IDLE_LIMIT + SLICE, "{total}");
    }

    #[test]
    fn endless_apc_and_dcs_are_swallowed() {
        for intro in [&b"\x1b_"[..], b"\x1bP1$", b"\x1bX", b"\x1b^"] {
            let mut p = BoundedParser::default();
            let mut log = Log::default();
            p.advance(&mut log, intro);
            p.advance(&mut log, &vec![b'z'; 3 * IDLE_LIMIT]);
            p.advance(&mut log, b"\x1b\\ok");
            assert_eq!(log.text, "ok", "intro {intro:?}");
        }
    }

    #[test]
    fn esc_split_across_feeds_is_tracked() {
        let mut p = BoundedParser::default();
        let mut log = Log::default();
        p.advance(&mut log, b"x\x1b");
        p.advance(&mut log, b"]2;");
        p.advance(&mut log, &vec![b'q'; 2 * IDLE_LIMIT]);
        p.advance(&mut log, b"\x1b\\y");
        assert_eq!(log.text, "xy");
        assert!(p.resets() >= 1);
    }

    #[test]
    fn endless_csi_params_recover_to_ground() {
        let mut p = BoundedParser::default();
        let mut log = Log::default();
        p.advance(&mut log, b"\x1b[");
        p.advance(&mut log, &vec![b'1'; 2 * IDLE_LIMIT]);
        p.advance(&mut log, b"mtext");
        assert!(log.text.ends_with("text"));
    }
}

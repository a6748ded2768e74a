//! Whether a line-editing program is back at its prompt, read from its own signal.
//!
//! Line editors — bash's readline, zsh, fish, Python's REPL and others — turn bracketed
//! paste on (`ESC[?2004h`) while they read a line and off (`ESC[?2004l`) once the line
//! is accepted, before they run it. So after input is sent: "off" means the program is
//! busy with it, and "on" again after that means its prompt is back. A program that
//! shows neither (or keeps the mode on throughout, as many full-screen programs do)
//! gives no such signal, and its reply is judged by other means.

/// The program turns bracketed paste on: it reads a line.
const PASTE_ON: &[u8] = b"\x1b[?2004h";
/// The program turns bracketed paste off: it accepted the line.
const PASTE_OFF: &[u8] = b"\x1b[?2004l";

/// What the output since the input says about the program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Turn {
    /// No signal either way.
    Unknown,
    /// It accepted the line and has not asked for another yet: still running it.
    Busy,
    /// It accepted the line and is reading the next one: the prompt is back.
    Prompt,
}

/// Reads bracketed-paste toggles from a program's output, fed in order.
#[derive(Debug, Default)]
pub struct PromptWatch {
    /// The last bytes of the previous feed, so a sequence split between feeds is seen.
    carry: Vec<u8>,
    turn: Option<Turn>,
}

impl PromptWatch {
    /// Feeds output that followed the input (in order, none left out).
    pub fn feed(&mut self, bytes: &[u8]) {
        let mut window = std::mem::take(&mut self.carry);
        window.extend_from_slice(bytes);
        let mut i = 0;
        while let Some(at) = window[i..].iter().position(|b| *b == 0x1b) {
            let rest = &window[i + at..];
            if rest.starts_with(PASTE_OFF) {
                self.turn = Some(Turn::Busy);
            } else if rest.starts_with(PASTE_ON) && self.turn.is_some() {
                self.turn = Some(Turn::Prompt);
            } else if rest.len() < PASTE_ON.len() && (PASTE_ON.starts_with(rest) || PASTE_OFF.starts_with(rest)) {
                self.carry = rest.to_vec();
                return;
            }
            i += at + 1;
        }
    }

    /// Forgets what was seen: output went by unread (the signal is unknown until the
    /// next toggle).
    pub fn lost(&mut self) {
        *self = PromptWatch::default();
    }

    /// What the output so far says.
    pub fn turn(&self) -> Turn {
        self.turn.unwrap_or(Turn::Unknown)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn watch(pieces: &[&[u8]]) -> Turn {
        let mut w = PromptWatch::default();
        for p in pieces {
            w.feed(p);
        }
        w.turn()
    }

    #[test]
    fn a_shell_accepts_the_line_runs_it_and_prompts_again() {
        assert_eq!(watch(&[b"sleep 3; echo hi\r\n\x1b[?2004l\r"]), Turn::Busy);
        assert_eq!(watch(&[b"sleep 3\r\n\x1b[?2004l\r", b"hi\r\n\x1b[?2004h$ "]), Turn::Prompt);
        // Again busy with a later line (a reply that sends more than one line).
        assert_eq!(watch(&[b"\x1b[?2004l\x1b[?2004h$ \x1b[?2004l"]), Turn::Busy);
    }

    #[test]
    fn no_toggle_or_only_on_says_nothing() {
        assert_eq!(watch(&[b"plain output\r\n"]), Turn::Unknown);
        assert_eq!(watch(&[b"\x1b[?2004h redraw \x1b[?2004h"]), Turn::Unknown);
    }

    #[test]
    fn sequences_split_between_feeds_are_seen() {
        let all = b"x\x1b[?2004ly\x1b[?2004h$ ";
        for split in 0..all.len() {
            let (a, b) = all.split_at(split);
            assert_eq!(watch(&[a, b]), Turn::Prompt, "split at {split}");
        }
        let mut w = PromptWatch::default();
        w.feed(b"\x1b[?2004l");
        w.lost();
        assert_eq!(w.turn(), Turn::Unknown);
    }
}

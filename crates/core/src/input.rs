//! The audited input path (seed 001 "Sending input"): plain text with newlines and tabs
//! kept, no control keys, sent as a bracketed paste when the program enabled it, then Enter.

/// The largest audited input accepted, in bytes. Larger text is refused, not truncated.
pub const MAX_INPUT_BYTES: usize = 64 * 1024;

/// Start of a bracketed paste.
pub const PASTE_START: &[u8] = b"\x1b[200~";
/// End of a bracketed paste.
pub const PASTE_END: &[u8] = b"\x1b[201~";
/// What pressing Enter sends.
pub const ENTER: &[u8] = b"\r";

/// Why a text cannot go through the audited path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InputError {
    /// Nothing to send.
    #[error("input is empty: give the text to send")]
    Empty,
    /// Over [`MAX_INPUT_BYTES`].
    #[error("input is {len} bytes; the most the Send path takes is {max} bytes — send it in parts or put it in a file the agent can read")]
    TooLong {
        /// The size given.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// A control character other than newline, carriage return or tab.
    #[error("input contains the control character U+{code:04X} at character {index}; the Send path carries text, newlines and tabs only (use the terminal for control keys)")]
    ControlCharacter {
        /// The offending code point.
        code: u32,
        /// Its position (in characters).
        index: usize,
    },
}

/// Checks that `text` may be sent through the audited path.
pub fn validate(text: &str) -> Result<(), InputError> {
    if text.is_empty() {
        return Err(InputError::Empty);
    }
    if text.len() > MAX_INPUT_BYTES {
        return Err(InputError::TooLong { len: text.len(), max: MAX_INPUT_BYTES });
    }
    for (index, c) in text.chars().enumerate() {
        let allowed = !c.is_control() || matches!(c, '\n' | '\t' | '\r');
        if !allowed {
            return Err(InputError::ControlCharacter { code: c as u32, index });
        }
    }
    Ok(())
}

/// The bytes to write to the PTY for `text`: the text (as a bracketed paste when the
/// program enabled mode 2004), then Enter. Line ends are normalised to `\r` inside a
/// paste (what terminals send for a pasted newline) and to `\n` outside one, so a
/// line-mode program receives each line.
pub fn encode(text: &str, bracketed_paste: bool) -> Result<Vec<u8>, InputError> {
    validate(text)?;
    let normalised = text.replace("\r\n", "\n");
    let mut out = Vec::with_capacity(normalised.len() + PASTE_START.len() + PASTE_END.len() + 1);
    if bracketed_paste {
        out.extend_from_slice(PASTE_START);
        out.extend(normalised.bytes().map(|b| if b == b'\n' { b'\r' } else { b }));
        out.extend_from_slice(PASTE_END);
    } else {
        out.extend(normalised.bytes().map(|b| if b == b'\r' { b'\n' } else { b }));
    }
    out.extend_from_slice(ENTER);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_then_enter() {
        assert_eq!(encode("hello", false).unwrap(), b"hello\r");
    }

    #[test]
    fn newlines_and_tabs_survive_outside_a_paste() {
        assert_eq!(encode("a\tb\nc", false).unwrap(), b"a\tb\nc\r");
        assert_eq!(encode("a\r\nb", false).unwrap(), b"a\nb\r");
    }

    #[test]
    fn bracketed_paste_wraps_the_text_not_the_enter() {
        assert_eq!(encode("a\nb", true).unwrap(), b"\x1b[200~a\rb\x1b[201~\r");
    }

    #[test]
    fn escape_is_refused_with_position() {
        let err = encode("ab\x1b[A", false).unwrap_err();
        assert_eq!(err, InputError::ControlCharacter { code: 0x1b, index: 2 });
        assert!(err.to_string().contains("U+001B"));
    }

    #[test]
    fn other_controls_are_refused() {
        for c in ['\u{0}', '\u{3}', '\u{7f}', '\u{9b}'] {
            assert!(validate(&format!("x{c}")).is_err(), "{:?}", c);
        }
    }

    #[test]
    fn empty_and_oversized_are_refused() {
        assert_eq!(validate(""), Err(InputError::Empty));
        let big = "x".repeat(MAX_INPUT_BYTES + 1);
        assert!(matches!(validate(&big), Err(InputError::TooLong { .. })));
        assert!(validate(&"x".repeat(MAX_INPUT_BYTES)).is_ok());
    }

    #[test]
    fn unicode_is_text() {
        assert_eq!(encode("héllo ✓", false).unwrap(), "héllo ✓\r".as_bytes());
    }
}

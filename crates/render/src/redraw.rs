//! The snapshot redraw: the bytes that make a terminal show what a screen model shows.

/// The escape sequence that redraws `screen` on a terminal of its size from any state:
/// the alternate screen if it is on, a reset and clear, the cells with their attributes,
/// then the cursor and input modes. What a joining or lagging viewer is sent first.
pub fn redraw(screen: &vt100::Screen) -> Vec<u8> {
    let mut data = Vec::new();
    if screen.alternate_screen() {
        data.extend_from_slice(b"\x1b[?1049h");
    }
    data.extend_from_slice(b"\x1b[0m\x1b[H\x1b[2J");
    data.extend(screen.state_formatted());
    data.extend(screen.cursor_state_formatted());
    data
}

#[cfg(test)]
mod tests {
    use super::*;

    fn replayed(parser: &vt100::Parser) -> vt100::Parser {
        let (rows, cols) = parser.screen().size();
        let mut check = vt100::Parser::new(rows, cols, 0);
        check.process(b"garbage left on the terminal\x1b[5;5H");
        check.process(&redraw(parser.screen()));
        check
    }

    #[test]
    fn a_redraw_reproduces_the_screen_over_whatever_was_shown() {
        let mut parser = vt100::Parser::new(5, 20, 0);
        parser.process(b"hello\r\n\x1b[1mworld\x1b[?2004h");
        let check = replayed(&parser);
        assert_eq!(check.screen().contents(), "hello\nworld");
        assert_eq!(check.screen().cursor_position(), (1, 5));
        assert!(check.screen().bold(), "attributes in effect are restored");
        assert!(check.screen().bracketed_paste());
        assert!(!check.screen().alternate_screen());
    }

    #[test]
    fn a_full_screen_program_is_redrawn_on_the_alternate_screen() {
        let mut parser = vt100::Parser::new(5, 20, 0);
        parser.process(b"shell\x1b[?1049h\x1b[Heditor");
        let check = replayed(&parser);
        assert!(check.screen().alternate_screen());
        assert_eq!(check.screen().contents(), "editor");
    }
}

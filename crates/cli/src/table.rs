//! Plain tables for people: left-aligned columns, two spaces apart. Cell text comes from
//! programs and people, so control characters are replaced before printing.

/// Prints `rows` under `headers`.
pub fn print(headers: &[&str], rows: &[Vec<String>]) {
    let clean: Vec<Vec<String>> = rows.iter().map(|r| r.iter().map(|c| sanitize(c)).collect()).collect();
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for r in &clean {
        for (i, c) in r.iter().enumerate() {
            widths[i] = widths[i].max(c.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let parts: Vec<String> = cells.iter().enumerate().map(|(i, c)| format!("{c:<w$}", w = widths[i])).collect();
        println!("{}", parts.join("  ").trim_end());
    };
    line(headers.to_vec());
    for r in &clean {
        line(r.iter().map(String::as_str).collect());
    }
}

/// Replaces control characters so printed text cannot drive the terminal, and
/// bidirectional overrides so it cannot read other than it is.
pub fn sanitize(s: &str) -> String {
    s.chars().map(|c| if c.is_control() || is_bidi_control(c) { '·' } else { c }).collect()
}

/// The Unicode controls that reorder text on screen (embeddings, overrides, isolates).
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}' | '\u{061c}')
}

/// A time as "12s ago" / "3m ago" / "2h ago" / the date.
pub fn ago(rfc3339: Option<&str>) -> String {
    let Some(t) = rfc3339.and_then(|s| chrono::DateTime::parse_from_rfc3339(s).ok()) else { return "-".into() };
    let secs = (chrono::Utc::now() - t.with_timezone(&chrono::Utc)).num_seconds().max(0);
    match secs {
        0..=59 => format!("{secs}s ago"),
        60..=3599 => format!("{}m ago", secs / 60),
        3600..=86399 => format!("{}h ago", secs / 3600),
        _ => t.format("%Y-%m-%d %H:%M").to_string(),
    }
}

/// Like [`sanitize`], but keeps newlines and tabs (for multi-line text).
pub fn sanitize_lines(s: &str) -> String {
    s.chars().map(|c| if (c.is_control() && c != '\n' && c != '\t') || is_bidi_control(c) { '·' } else { c }).collect()
}

/// At most `max` characters of `s` on one line, with `…` where it was cut.
pub fn clip(s: &str, max: usize) -> String {
    let one_line = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.chars().count() <= max {
        return one_line;
    }
    let mut out: String = one_line.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_neutralised() {
        assert_eq!(sanitize("a\x1b[31mb\n"), "a·[31mb·");
    }

    #[test]
    fn ago_handles_missing_and_recent_times() {
        assert_eq!(ago(None), "-");
        assert_eq!(ago(Some("garbage")), "-");
        assert!(ago(Some(&chrono::Utc::now().to_rfc3339())).ends_with("s ago"));
    }

    #[test]
    fn clipped_text_is_one_line_within_the_limit() {
        assert_eq!(clip("a\nb  c", 10), "a b c");
        assert_eq!(clip("abcdefgh", 5), "abcd…");
        assert_eq!(clip("abcdefgh", 5).chars().count(), 5);
    }
}

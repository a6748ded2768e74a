//! Writer for asciicast v3 recordings.
//!
//! Format: <https://docs.asciinema.org/manual/asciicast/v3/>. The first line
//! is a JSON header object; each further line is a JSON array
//! `[interval, code, data]`, where `interval` is the time in seconds since the
//! previous event line.

use serde::Serialize;
use std::io::{self, Write};

/// Recording metadata written as the asciicast header line.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Header {
    /// Terminal width in columns.
    pub cols: u16,
    /// Terminal height in rows.
    pub rows: u16,
    /// Recording start as Unix time in seconds.
    pub timestamp: Option<i64>,
    /// The command that was recorded.
    pub command: Option<String>,
    /// A title for the recording.
    pub title: Option<String>,
}

/// One recorded event; `t_micros` is the time since recording start in µs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// Bytes the program wrote to the terminal (code `"o"`).
    Output {
        /// Time since start in microseconds.
        t_micros: u64,
        /// Raw output bytes (need not be valid or complete UTF-8).
        data: Vec<u8>,
    },
    /// A marker / breakpoint (code `"m"`).
    Marker {
        /// Time since start in microseconds.
        t_micros: u64,
        /// Marker label (may be empty).
        label: String,
    },
    /// The terminal was resized (code `"r"`, data `"COLSxROWS"`).
    Resize {
        /// Time since start in microseconds.
        t_micros: u64,
        /// New width in columns.
        cols: u16,
        /// New height in rows.
        rows: u16,
    },
    /// The program exited (code `"x"`, data the status as a string).
    Exit {
        /// Time since start in microseconds.
        t_micros: u64,
        /// Exit status.
        status: i32,
    },
}

#[derive(Serialize)]
struct HeaderLine<'a> {
    version: u8,
    term: Term,
    #[serde(skip_serializing_if = "Option::is_none")]
    timestamp: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    command: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    title: Option<&'a str>,
}

#[derive(Serialize)]
struct Term {
    cols: u16,
    rows: u16,
}

/// Streams an asciicast v3 recording to a writer.
///
/// Output bytes are converted to UTF-8: an incomplete sequence at the end of
/// one output event is held back and joined with the next output event;
/// invalid bytes become U+FFFD. Each line is written with a single
/// `write_all`; wrap slow writers in a `BufWriter`.
#[derive(Debug)]
pub struct CastWriter<W: Write> {
    w: W,
    /// Time of the last written event, in µs since start.
    last_micros: u64,
    /// Trailing bytes of an incomplete UTF-8 sequence (at most 3).
    held: Vec<u8>,
}

/// Formats a µs duration as seconds with exactly six decimals.
fn format_interval(micros: u64) -> String {
    format!("{}.{:06}", micros / 1_000_000, micros % 1_000_000)
}

/// Decodes `bytes` lossily, returning the text and any incomplete trailing
/// UTF-8 sequence separately.
pub(crate) fn decode_with_tail(mut bytes: &[u8]) -> (String, &[u8]) {
    let mut text = String::with_capacity(bytes.len());
    loop {
        match std::str::from_utf8(bytes) {
            Ok(valid) => {
                text.push_str(valid);
                return (text, &[]);
            }
            Err(err) => {
                let (valid, rest) = bytes.split_at(err.valid_up_to());
                text.push_str(&String::from_utf8_lossy(valid));
                match err.error_len() {
                    Some(len) => {
                        text.push(char::REPLACEMENT_CHARACTER);
                        bytes = rest.get(len..).unwrap_or_default();
                    }
                    None => return (text, rest),
                }
            }
        }
    }
}

impl<W: Write> CastWriter<W> {
    /// Creates a writer and writes the header line.
    pub fn new(mut w: W, header: &Header) -> io::Result<Self> {
        let line = HeaderLine {
            version: 3,
            term: Term { cols: header.cols, rows: header.rows },
            timestamp: header.timestamp,
            command: header.command.as_deref(),
            title: header.title.as_deref(),
        };
        let mut buf = serde_json::to_vec(&line).map_err(io::Error::from)?;
        buf.push(b'\n');
        w.write_all(&buf)?;
        Ok(Self { w, last_micros: 0, held: Vec::new() })
    }

    /// Writes one event.
    ///
    /// Times are absolute (since start); the interval to the previous event
    /// is computed here, and an event earlier than the previous one gets
    /// interval 0. An output event that yields no text (e.g. only part of a
    /// UTF-8 sequence) writes nothing. Bytes held from an earlier output
    /// event are flushed (as U+FFFD) before any non-output event.
    pub fn event(&mut self, e: Event) -> io::Result<()> {
        match e {
            Event::Output { t_micros, data } => {
                let mut joined = std::mem::take(&mut self.held);
                joined.extend_from_slice(&data);
                let (text, tail) = decode_with_tail(&joined);
                let tail = tail.to_vec();
                if !text.is_empty() {
                    self.write_line(t_micros, "o", &text)?;
                }
                self.held = tail;
                Ok(())
            }
            Event::Marker { t_micros, label } => {
                self.flush_held()?;
                self.write_line(t_micros, "m", &label)
            }
            Event::Resize { t_micros, cols, rows } => {
                self.flush_held()?;
                self.write_line(t_micros, "r", &format!("{cols}x{rows}"))
            }
            Event::Exit { t_micros, status } => {
                self.flush_held()?;
                self.write_line(t_micros, "x", &status.to_string())
            }
        }
    }

    /// The writer, for taking what was written so far (a file sent as it is written).
    pub fn get_mut(&mut self) -> &mut W {
        &mut self.w
    }

    /// Flushes held output bytes and the writer: the file is complete.
    pub fn finish(&mut self) -> io::Result<()> {
        self.flush_held()?;
        self.w.flush()
    }

    /// Flushes held output bytes and the writer, and returns the writer.
    pub fn into_inner(mut self) -> io::Result<W> {
        self.flush_held()?;
        self.w.flush()?;
        Ok(self.w)
    }

    /// Writes held incomplete UTF-8 bytes (lossily) at the last event time.
    fn flush_held(&mut self) -> io::Result<()> {
        if self.held.is_empty() {
            return Ok(());
        }
        let text = String::from_utf8_lossy(&self.held).into_owned();
        self.held.clear();
        self.write_line(self.last_micros, "o", &text)
    }

    /// Writes one `[interval, code, data]` line.
    fn write_line(&mut self, t_micros: u64, code: &str, data: &str) -> io::Result<()> {
        let interval = t_micros.saturating_sub(self.last_micros);
        self.last_micros = self.last_micros.max(t_micros);
        let mut line = format!("[{}, \"{code}\", ", format_interval(interval));
        line.push_str(&serde_json::to_string(data).map_err(io::Error::from)?);
        line.push_str("]\n");
        self.w.write_all(line.as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn header() -> Header {
        Header { cols: 80, rows: 24, ..Header::default() }
    }

    /// Writes `events` and returns the parsed lines.
    fn record(header: &Header, events: Vec<Event>) -> (String, Vec<Value>) {
        let mut w = CastWriter::new(Vec::new(), header).unwrap();
        for e in events {
            w.event(e).unwrap();
        }
        let text = String::from_utf8(w.into_inner().unwrap()).unwrap();
        assert!(text.ends_with('\n'));
        let lines = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        (text, lines)
    }

    fn out(t_micros: u64, data: &[u8]) -> Event {
        Event::Output { t_micros, data: data.to_vec() }
    }

    #[test]
    fn minimal_header() {
        let (text, lines) = record(&header(), vec![]);
        assert_eq!(text, "{\"version\":3,\"term\":{\"cols\":80,\"rows\":24}}\n");
        assert_eq!(lines.len(), 1);
    }

    #[test]
    fn full_header() {
        let h = Header {
            cols: 120,
            rows: 40,
            timestamp: Some(1_700_000_000),
            command: Some("bash -c \"echo hi\"".into()),
            title: Some("demo\n\u{1b}".into()),
        };
        let (text, lines) = record(&h, vec![]);
        assert_eq!(text.lines().count(), 1);
        assert_eq!(
            lines[0],
            json!({"version": 3, "term": {"cols": 120, "rows": 40},
                   "timestamp": 1_700_000_000, "command": "bash -c \"echo hi\"",
                   "title": "demo\n\u{1b}"})
        );
    }

    #[test]
    fn events_and_intervals() {
        let events = vec![
            out(1_234, b"hello"),
            Event::Marker { t_micros: 1_500_000, label: "step 1".into() },
            Event::Resize { t_micros: 2_000_000, cols: 100, rows: 30 },
            out(3_000_001, b"x"),
            Event::Exit { t_micros: 3_500_000, status: -1 },
        ];
        let (text, lines) = record(&header(), events);
        let body: Vec<&str> = text.lines().skip(1).collect();
        assert_eq!(
            body,
            [
                r#"[0.001234, "o", "hello"]"#,
                r#"[1.498766, "m", "step 1"]"#,
                r#"[0.500000, "r", "100x30"]"#,
                r#"[1.000001, "o", "x"]"#,
                r#"[0.499999, "x", "-1"]"#,
            ]
        );
        assert_eq!(lines[1], json!([0.001234, "o", "hello"]));
        assert_eq!(lines[5], json!([0.499999, "x", "-1"]));
    }

    #[test]
    fn time_going_backwards_is_clamped() {
        let events = vec![out(5_000_000, b"a"), out(4_000_000, b"b"), out(6_000_000, b"c")];
        let (_, lines) = record(&header(), events);
        assert_eq!(lines[1], json!([5.0, "o", "a"]));
        assert_eq!(lines[2], json!([0.0, "o", "b"]));
        assert_eq!(lines[3], json!([1.0, "o", "c"]));
        let (text, _) = record(&header(), vec![out(u64::MAX, b"z"), out(0, b"y")]);
        assert!(text.contains("[18446744073709.551615, \"o\", \"z\"]"));
        assert!(text.contains("[0.000000, \"o\", \"y\"]"));
    }

    #[test]
    fn utf8_split_across_output_events() {
        let s = "a😀b".as_bytes(); // emoji is 4 bytes at 1..5
        for split in 0..=s.len() {
            let events = vec![out(10, &s[..split]), out(20, &s[split..])];
            let (_, lines) = record(&header(), events);
            let joined: String = lines[1..].iter().map(|l| l[2].as_str().unwrap().to_string()).collect();
            assert_eq!(joined, "a😀b", "split at {split}");
            assert!(lines[1..].iter().all(|l| l[1] == "o"));
        }
        // Held bytes are written with the next output event's time.
        let (_, lines) = record(&header(), vec![out(10, b"\xe2\x82"), out(30, b"\xac!")]);
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[1], json!([0.00003, "o", "€!"]));
    }

    #[test]
    fn one_byte_at_a_time() {
        let s = "日本語 ok ✓".as_bytes();
        let events = s.iter().enumerate().map(|(i, b)| out(i as u64, &[*b])).collect();
        let (_, lines) = record(&header(), events);
        let joined: String = lines[1..].iter().map(|l| l[2].as_str().unwrap()).collect();
        assert_eq!(joined, "日本語 ok ✓");
    }

    #[test]
    fn invalid_bytes_become_replacement() {
        let (_, lines) = record(&header(), vec![out(1, b"a\xffb\xc3(\x80")]);
        assert_eq!(lines[1][2], "a\u{fffd}b\u{fffd}(\u{fffd}");
    }

    #[test]
    fn held_bytes_flushed_before_other_events_and_at_end() {
        let events = vec![
            out(1_000, b"x\xe2\x82"),
            Event::Marker { t_micros: 2_000, label: String::new() },
            out(3_000, b"\xac"),
            out(4_000, b"\xf0\x9f"),
        ];
        let (_, lines) = record(&header(), events);
        let body: Vec<Value> = lines[1..].to_vec();
        assert_eq!(
            body,
            [
                json!([0.001, "o", "x"]),
                json!([0.0, "o", "\u{fffd}"]),
                json!([0.001, "m", ""]),
                json!([0.001, "o", "\u{fffd}"]),
                json!([0.0, "o", "\u{fffd}"]),
            ]
        );
    }

    #[test]
    fn json_escaping_of_control_chars() {
        let data = b"\x1b[31mred\x1b[0m\r\n\t\"q\" \\ \x00\x07\x7f";
        let (text, lines) = record(&header(), vec![out(0, data)]);
        assert_eq!(text.lines().count(), 2);
        assert!(text.lines().nth(1).unwrap().contains("\\u001b[31m"));
        let expected = std::str::from_utf8(data).unwrap();
        assert_eq!(lines[1], json!([0.0, "o", expected]));
    }

    #[test]
    fn empty_output_writes_nothing() {
        let (text, _) = record(&header(), vec![out(5, b""), out(7, b"a")]);
        assert_eq!(text.lines().nth(1), Some(r#"[0.000007, "o", "a"]"#));
        assert_eq!(text.lines().count(), 2);
    }

    #[test]
    fn format_interval_cases() {
        assert_eq!(format_interval(0), "0.000000");
        assert_eq!(format_interval(1), "0.000001");
        assert_eq!(format_interval(1_234), "0.001234");
        assert_eq!(format_interval(61_500_000), "61.500000");
    }

    #[test]
    fn write_errors_are_returned() {
        struct Broken;
        impl Write for Broken {
            fn write(&mut self, _: &[u8]) -> io::Result<usize> {
                Err(io::Error::other("broken"))
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        assert!(CastWriter::new(Broken, &header()).is_err());
    }
}

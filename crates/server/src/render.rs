//! Turning a stored output stream into things people read: plain text and an asciicast
//! v3 file (screens come from checkpoints: `crate::screens`).

use bytes::Bytes;
use drover_api as api;
use drover_core::SessionId;
use drover_render::asciicast::{CastWriter, Event, Header};
use drover_render::text::TextRenderer;
use drover_render::transcript::Transcript;
use drover_store::{CheckpointAt, OutputChunk, ScreenCheckpoint, SessionRow, Store, StoreError};
use futures_util::Stream;

/// Bytes read from the store per query.
const PAGE: usize = 4 * 1024 * 1024;

/// Calls `f` with every stored chunk of `session` from `from`, in order.
async fn each_chunk(store: &Store, session: SessionId, mut from: u64, mut f: impl FnMut(OutputChunk)) -> Result<u64, StoreError> {
    loop {
        let chunks = store.read_output_rows(session, from, PAGE).await?;
        if chunks.is_empty() {
            return Ok(from);
        }
        for c in chunks {
            from = c.offset + c.data.len() as u64;
            f(c);
        }
    }
}

/// What the stored output renders to as plain text: (complete lines, the unfinished
/// last line, offset just after the last complete line, offset rendered to).
pub async fn text(store: &Store, session: SessionId, from: u64) -> Result<(Vec<String>, String, u64, u64), StoreError> {
    let mut r = TextRenderer::new();
    let mut lines = Vec::new();
    let mut complete_at = from;
    let end = each_chunk(store, session, from, |c| {
        let before = lines.len();
        r.feed(&c.data, &mut lines);
        if lines.len() > before {
            if let Some(i) = c.data.iter().rposition(|b| *b == b'\n') {
                complete_at = c.offset + i as u64 + 1;
            }
        }
    })
    .await?;
    Ok((lines, r.partial(), complete_at, end))
}

/// What the session showed, as lines a person reads: its recording replayed through a
/// screen model from the size it started at, resized where it was (see
/// [`Transcript`]). With `settled_only`, the screen's rows at and below the cursor are
/// left out (they may still change); else the final screen ends the text. Also returns
/// the offset rendered to.
pub async fn screen_text(store: &Store, row: &SessionRow, settled_only: bool) -> Result<(Vec<String>, u64), StoreError> {
    transcript_from(store, row, None, settled_only).await
}

/// The last `n` lines of [`screen_text`] (the whole screen at the end), from the latest
/// screen checkpoint that leaves more than `n` lines after it: the work is that of the
/// lines wanted, not of everything the session printed.
pub async fn last_lines(store: &Store, row: &SessionRow, n: usize) -> Result<(Vec<String>, u64), StoreError> {
    let points = store.checkpoint_points(row.id).await?;
    let mut back = 1;
    while back <= points.len() {
        let (offset, _) = points[points.len() - back];
        let Some(start) = store.checkpoint(row.id, CheckpointAt::Offset(offset)).await? else { break };
        let (mut lines, end) = transcript_from(store, row, Some(start), false).await?;
        // The first line may be the end of one that began before the checkpoint.
        if lines.len() > n {
            lines.drain(..lines.len() - n);
            return Ok((lines, end));
        }
        back = back * 2 + 1;
    }
    let (mut lines, end) = screen_text(store, row, false).await?;
    lines.drain(..lines.len().saturating_sub(n));
    Ok((lines, end))
}

/// The transcript from `start` (None: the beginning) to everything stored.
async fn transcript_from(
    store: &Store,
    row: &SessionRow,
    start: Option<ScreenCheckpoint>,
    settled_only: bool,
) -> Result<(Vec<String>, u64), StoreError> {
    let (first, recorded) = crate::screens::sizes(store, row.id, (row.cols, row.rows)).await?;
    let after = start.as_ref().map(|c| c.t_micros);
    let resizes: Vec<_> = recorded.list.list.into_iter().filter(|(t, _)| after.is_none_or(|a| *t > a)).collect();
    let (t, mut end) = match &start {
        Some(c) => (Transcript::resume(c.cols, c.rows, &c.data), c.offset),
        None => (Transcript::new(first.0, first.1), 0),
    };
    let mut replay = Replay { t, resizes: resizes.into_iter().peekable(), lines: Vec::new() };
    loop {
        let chunks = store.read_output_rows(row.id, end, PAGE).await?;
        let Some(last) = chunks.last() else { break };
        end = last.offset + last.data.len() as u64;
        // A page takes the screen model up to a hundred milliseconds: off the runtime,
        // whose threads serve everyone's keystrokes and screens.
        replay = crate::screens::on_cpu(move || replay.page(chunks)).await?;
    }
    Ok((replay.end(settled_only), end))
}

/// A recording being replayed through a screen model for its text.
struct Replay {
    t: Transcript,
    /// The resizes still to come, with their times.
    resizes: std::iter::Peekable<std::vec::IntoIter<(u64, (u16, u16))>>,
    lines: Vec<String>,
}

impl Replay {
    /// Feeds a page of output, each resize before the first chunk at or after its time.
    fn page(mut self, chunks: Vec<OutputChunk>) -> Replay {
        for c in chunks {
            while let Some((_, (cols, rows))) = self.resizes.next_if(|(at, _)| *at <= c.t_micros) {
                self.lines.extend(self.t.resize(cols, rows));
            }
            self.lines.extend(self.t.feed(&c.data));
        }
        self
    }

    /// The lines, with the resizes after the last output and the screen at the end
    /// (only its settled rows with `settled_only`).
    fn end(mut self, settled_only: bool) -> Vec<String> {
        for (_, (cols, rows)) in self.resizes.by_ref() {
            self.lines.extend(self.t.resize(cols, rows));
        }
        if settled_only {
            self.lines.extend(self.t.settle());
        } else {
            self.lines.extend(self.t.finish());
        }
        self.lines
    }
}

/// The session's recording as an asciicast v3 file: the header has the size it started
/// at (later sizes are `r` events) and its command quoted so a shell reads back the same
/// argv; the exit event comes at the time the program ended, not at its last output.
/// Made a page of stored output at a time as it is sent: the server holds a page, not
/// the recording.
pub async fn asciicast(store: Store, row: SessionRow) -> Result<impl Stream<Item = Result<Bytes, StoreError>>, StoreError> {
    let (starts, marks): (Vec<_>, Vec<_>) = store.marks(row.id).await?.into_iter().partition(|m| m.kind == "s");
    // Sessions recorded before their first size was kept fall back to their size now.
    let (cols, rows) = starts.first().and_then(|m| parse_size(&m.data)).unwrap_or((row.cols, row.rows));
    let started = row.started_at.as_deref().or(Some(&row.created_at)).and_then(drover_store::parse_time);
    let header = Header {
        cols,
        rows,
        timestamp: started.map(|t| t.timestamp()),
        command: Some(drover_core::argv::join(&row.command)),
        title: Some(row.title.clone()).filter(|t| !t.is_empty()),
    };
    let w = CastWriter::new(Vec::new(), &header).map_err(corrupt)?;
    let cast = Cast { store, row, marks: marks.into_iter().peekable(), w, from: 0, last_t: 0 };
    Ok(futures_util::stream::try_unfold(Some(cast), |cast| async move {
        let Some(mut cast) = cast else { return Ok(None) };
        let more = cast.page().await?;
        let bytes = Bytes::from(std::mem::take(cast.w.get_mut()));
        Ok(Some((bytes, more.then_some(cast))))
    }))
}

/// A recording file being written: where its output is read up to, and the marks left.
struct Cast {
    store: Store,
    row: SessionRow,
    marks: std::iter::Peekable<std::vec::IntoIter<drover_store::Mark>>,
    w: CastWriter<Vec<u8>>,
    /// The output offset read up to.
    from: u64,
    /// The time of the last event written.
    last_t: u64,
}

impl Cast {
    /// Writes the next page of output with the marks that go before it (a mark before
    /// the first output at or after its time); once the output is all written, the marks
    /// after it and the exit. False once the file is complete.
    async fn page(&mut self) -> Result<bool, StoreError> {
        let chunks = self.store.read_output_rows(self.row.id, self.from, PAGE).await?;
        let Some(last) = chunks.last() else {
            for m in self.marks.by_ref() {
                self.last_t = self.last_t.max(m.t_micros);
                self.w.event(mark_event(m)).map_err(corrupt)?;
            }
            if let Some((t_micros, status)) = exit(&self.row, self.last_t) {
                self.w.event(Event::Exit { t_micros, status }).map_err(corrupt)?;
            }
            self.w.finish().map_err(corrupt)?;
            return Ok(false);
        };
        self.from = last.offset + last.data.len() as u64;
        for c in chunks {
            while let Some(m) = self.marks.next_if(|m| m.t_micros <= c.t_micros) {
                self.w.event(mark_event(m)).map_err(corrupt)?;
            }
            self.last_t = self.last_t.max(c.t_micros);
            self.w.event(Event::Output { t_micros: c.t_micros, data: c.data.into() }).map_err(corrupt)?;
        }
        Ok(true)
    }
}

/// A recording that cannot be written as asciicast.
fn corrupt(e: std::io::Error) -> StoreError {
    StoreError::Corrupt(e.to_string())
}

/// How an ended session's recording ends: its exit status, at its run's length or after
/// its last event (`last_t`), whichever is later. None while it runs.
fn exit(row: &SessionRow, last_t: u64) -> Option<(u64, i32)> {
    let (Some(code), false) = (row.exit_code, row.outcome.is_live()) else { return None };
    let ended = row.ended_at.as_deref().and_then(drover_store::parse_time);
    let ran = row.started_at.as_deref().and_then(drover_store::parse_time).zip(ended).map(|(s, e)| e - s);
    let exit_t = ran.and_then(|d| d.num_microseconds()).and_then(|us| u64::try_from(us).ok()).unwrap_or(0);
    Some((last_t.max(exit_t), code))
}

/// The stretch of a recording from output offset `from` on, about `max_bytes` of output
/// with the marks that go among it (as in [`asciicast`]: a mark before the first output
/// at or after its time), cut where no character is split: what a player fetches as it
/// plays, so neither it nor the server holds a whole recording.
pub async fn window(store: &Store, row: &SessionRow, from: u64, max_bytes: usize) -> Result<api::RecordingWindow, StoreError> {
    let (starts, marks): (Vec<_>, Vec<_>) = store.marks(row.id).await?.into_iter().partition(|m| m.kind == "s");
    let (cols, rows) = starts.first().and_then(|m| parse_size(&m.data)).unwrap_or((row.cols, row.rows));
    let last_out = store.last_output_time(row.id).await?.unwrap_or(0);
    let last_mark = marks.iter().map(|m| m.t_micros).max().unwrap_or(0);
    let length_us = exit(row, last_out.max(last_mark)).map_or(last_out.max(last_mark), |(t, _)| t);
    // Marks already given: those up to the time of the output just before `from`.
    let given_until = match from {
        0 => None,
        _ => store.read_output_rows(row.id, from - 1, 1).await?.first().map(|c| c.t_micros),
    };
    let chunks = store.read_output_rows(row.id, from, max_bytes).await?;
    let more = chunks.iter().map(|c| c.data.len()).sum::<usize>() >= max_bytes;
    let mut out = Window::new(from);
    let mut marks = marks.into_iter().filter(|m| given_until.is_none_or(|t| m.t_micros > t)).peekable();
    for c in chunks {
        while let Some(m) = marks.next_if(|m| m.t_micros <= c.t_micros) {
            out.mark(m);
        }
        out.output(c);
    }
    let mut next = None;
    if more {
        next = Some(out.end - out.carry.len() as u64);
    } else {
        out.flush();
        marks.for_each(|m| out.mark(m));
        if let Some((t_us, status)) = exit(row, out.last_t.max(length_us)) {
            out.events.push(api::RecordingEvent { t_us, code: "x".into(), data: status.to_string() });
        }
    }
    Ok(api::RecordingWindow { cols, rows, length_us, from, events: out.events, next })
}

/// A recording window's events as they are gathered, output decoded as UTF-8 across
/// chunk boundaries.
struct Window {
    events: Vec<api::RecordingEvent>,
    /// Bytes of a character a chunk ended inside, for the next chunk.
    carry: Vec<u8>,
    /// The time of the last output.
    last_t: u64,
    /// The offset after the last output.
    end: u64,
}

impl Window {
    fn new(from: u64) -> Window {
        Window { events: Vec::new(), carry: Vec::new(), last_t: 0, end: from }
    }

    fn mark(&mut self, m: drover_store::Mark) {
        self.events.push(api::RecordingEvent { t_us: m.t_micros, code: m.kind, data: m.data });
    }

    fn output(&mut self, c: OutputChunk) {
        self.carry.extend_from_slice(&c.data);
        self.end = c.offset + c.data.len() as u64;
        self.last_t = c.t_micros;
        let rest = self.carry.split_off(self.carry.len() - incomplete_tail(&self.carry));
        let text = String::from_utf8_lossy(&std::mem::replace(&mut self.carry, rest)).into_owned();
        if !text.is_empty() {
            self.events.push(api::RecordingEvent { t_us: c.t_micros, code: "o".into(), data: text });
        }
    }

    /// At the recording's end: a character cut short is shown as what it is.
    fn flush(&mut self) {
        if !self.carry.is_empty() {
            let text = String::from_utf8_lossy(&std::mem::take(&mut self.carry)).into_owned();
            self.events.push(api::RecordingEvent { t_us: self.last_t, code: "o".into(), data: text });
        }
    }
}

/// How many bytes at the end of `b` begin a character that is not finished there.
fn incomplete_tail(b: &[u8]) -> usize {
    for k in 1..=b.len().min(3) {
        let byte = b[b.len() - k];
        if byte & 0xC0 != 0x80 {
            let needs = match byte {
                0xC0..=0xDF => 2,
                0xE0..=0xEF => 3,
                0xF0..=0xF7 => 4,
                _ => 1,
            };
            return if needs > k { k } else { 0 };
        }
    }
    0
}

/// The terminal sizes a session's output was written at: the size it started at, then
/// each resize from the µs it took effect.
pub struct Sizes {
    first: Option<(u16, u16)>,
    resizes: Vec<(u64, (u16, u16))>,
}

impl Sizes {
    /// A session's sizes from its marks (`fallback` when it recorded no first size).
    pub async fn of(store: &Store, session: SessionId, fallback: (u16, u16)) -> Result<Sizes, StoreError> {
        let marks = store.marks(session).await?;
        let first = marks.iter().find(|m| m.kind == "s").and_then(|m| parse_size(&m.data)).or(Some(fallback));
        let resizes = marks.into_iter().filter(|m| m.kind == "r").filter_map(|m| parse_size(&m.data).map(|s| (m.t_micros, s))).collect();
        Ok(Sizes { first, resizes })
    }

    /// The size in effect for output written at `t_micros`, and when the next resize
    /// takes over (None: none later).
    pub fn at(&self, t_micros: u64) -> ((u16, u16), Option<u64>) {
        let done = self.resizes.partition_point(|(at, _)| *at <= t_micros);
        let size = if done == 0 { self.first.unwrap_or((80, 24)) } else { self.resizes[done - 1].1 };
        (size, self.resizes.get(done).map(|(at, _)| *at))
    }
}

/// "COLSxROWS" as numbers.
pub(crate) fn parse_size(data: &str) -> Option<(u16, u16)> {
    let (c, r) = data.split_once('x')?;
    Some((c.parse().ok()?, r.parse().ok()?))
}

fn mark_event(m: drover_store::Mark) -> Event {
    match m.kind.as_str() {
        "r" => match parse_size(&m.data) {
            Some((cols, rows)) => Event::Resize { t_micros: m.t_micros, cols, rows },
            None => Event::Marker { t_micros: m.t_micros, label: format!("resize {}", m.data) },
        },
        _ => Event::Marker { t_micros: m.t_micros, label: m.data },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_character_cut_at_the_end_is_found() {
        assert_eq!(incomplete_tail(b""), 0);
        assert_eq!(incomplete_tail(b"abc"), 0);
        let euro = "€".as_bytes(); // three bytes
        assert_eq!(incomplete_tail(euro), 0);
        assert_eq!(incomplete_tail(&euro[..1]), 1);
        assert_eq!(incomplete_tail(&euro[..2]), 2);
        let face = "😀".as_bytes(); // four bytes
        assert_eq!(incomplete_tail(&face[..3]), 3);
        assert_eq!(incomplete_tail(&[b'a', face[0]]), 1);
        // A stray continuation byte is no character's start: nothing to hold back.
        assert_eq!(incomplete_tail(&[0x80]), 0);
    }

    #[test]
    fn output_split_inside_characters_is_decoded_whole() {
        let session = SessionId::new();
        let text = "a€😀b";
        let mut w = Window::new(0);
        let mut offset = 0;
        for (t, piece) in text.as_bytes().chunks(2).enumerate() {
            w.output(OutputChunk { session, offset, t_micros: t as u64, data: Bytes::copy_from_slice(piece) });
            offset += piece.len() as u64;
        }
        w.flush();
        let joined: String = w.events.iter().map(|e| e.data.as_str()).collect();
        assert_eq!(joined, text);
        assert!(w.events.iter().all(|e| !e.data.contains('\u{fffd}')), "{:?}", w.events);
        // Cut inside a character at the end, the rest waits for the next window.
        let mut w = Window::new(0);
        w.output(OutputChunk { session, offset: 0, t_micros: 0, data: Bytes::copy_from_slice(&"x€".as_bytes()[..2]) });
        assert_eq!((w.end, w.carry.len()), (2, 1));
        assert_eq!(w.events[0].data, "x");
    }
}

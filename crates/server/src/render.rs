//! Turning a stored output stream into things people read: plain text and an asciicast
//! v3 file (screens come from checkpoints: `crate::screens`).

use drover_core::SessionId;
use drover_render::asciicast::{CastWriter, Event, Header};
use drover_render::text::TextRenderer;
use drover_render::transcript::Transcript;
use drover_store::{CheckpointAt, OutputChunk, ScreenCheckpoint, SessionRow, Store, StoreError};

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
    let mut resizes = recorded.list.list.into_iter().filter(|(t, _)| after.is_none_or(|a| *t > a)).peekable();
    let (mut t, from) = match &start {
        Some(c) => (Transcript::resume(c.cols, c.rows, &c.data), c.offset),
        None => (Transcript::new(first.0, first.1), 0),
    };
    let mut lines = Vec::new();
    let end = each_chunk(store, row.id, from, |c| {
        while let Some((_, (cols, rows))) = resizes.next_if(|(at, _)| *at <= c.t_micros) {
            lines.extend(t.resize(cols, rows));
        }
        lines.extend(t.feed(&c.data));
    })
    .await?;
    for (_, (cols, rows)) in resizes {
        lines.extend(t.resize(cols, rows));
    }
    if settled_only {
        lines.extend(t.settle());
    } else {
        lines.extend(t.finish());
    }
    Ok((lines, end))
}

/// The session's recording as an asciicast v3 file: the header has the size it started
/// at (later sizes are `r` events) and its command quoted so a shell reads back the same
/// argv; the exit event comes at the time the program ended, not at its last output.
pub async fn asciicast(store: &Store, row: &SessionRow) -> Result<Vec<u8>, StoreError> {
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
    let mut marks = marks.into_iter().peekable();
    let mut w = CastWriter::new(Vec::new(), &header).map_err(|e| StoreError::Corrupt(e.to_string()))?;
    let mut last_t = 0;
    let mut failed = None;
    let mut emit = |w: &mut CastWriter<Vec<u8>>, e: Event| {
        if let Err(err) = w.event(e) {
            failed = Some(err.to_string());
        }
    };
    let mut chunks = Vec::new();
    each_chunk(store, row.id, 0, |c| chunks.push(c)).await?;
    for c in chunks {
        while let Some(m) = marks.next_if(|m| m.t_micros <= c.t_micros) {
            emit(&mut w, mark_event(m));
        }
        last_t = last_t.max(c.t_micros);
        emit(&mut w, Event::Output { t_micros: c.t_micros, data: c.data.into() });
    }
    for m in marks {
        last_t = last_t.max(m.t_micros);
        emit(&mut w, mark_event(m));
    }
    if let (Some(code), false) = (row.exit_code, row.outcome.is_live()) {
        let ended = row.ended_at.as_deref().and_then(drover_store::parse_time);
        let ran = row.started_at.as_deref().and_then(drover_store::parse_time).zip(ended).map(|(s, e)| e - s);
        let exit_t = ran.and_then(|d| d.num_microseconds()).and_then(|us| u64::try_from(us).ok()).unwrap_or(0);
        emit(&mut w, Event::Exit { t_micros: last_t.max(exit_t), status: code });
    }
    if let Some(e) = failed {
        return Err(StoreError::Corrupt(e));
    }
    w.into_inner().map_err(|e| StoreError::Corrupt(e.to_string()))
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

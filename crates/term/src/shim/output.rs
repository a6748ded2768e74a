//! The PTY reader thread: record first, then publish; answer terminal queries when no
//! interactive viewer is attached.

use std::io::Read;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::queries::{self, QueryScanner};
use crate::recording::RecordingWriter;

use super::Shared;

/// Bytes recorded and published at a time, at most.
const READ_BUF: usize = 64 * 1024;

/// Reads the PTY until it closes. Returns when the program and everything holding the
/// terminal have gone.
///
/// The kernel hands a PTY's output over at most 4 KB per read; whatever more is already
/// waiting (`readable(false)`) is read into the same buffer first, so a flood is recorded
/// and published in batches of up to 64 KB (one file write, one wake-up) without
/// delaying output that trickles. The reader may be non-blocking (the PTY's input is
/// written from the shim's runtime): with nothing to read, it waits in `readable(true)`.
pub fn pump(shared: Arc<Shared>, mut reader: Box<dyn Read + Send>, readable: impl Fn(bool) -> bool, mut recording: RecordingWriter) {
    let mut buf = vec![0u8; READ_BUF];
    let mut scanner = QueryScanner::new();
    let mut found = Vec::new();
    let mut closed = false;
    while !closed {
        let mut n = 0;
        loop {
            match reader.read(&mut buf[n..]) {
                Ok(0) => closed = true,
                Ok(got) => n += got,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock && n == 0 => {
                    readable(true);
                    continue;
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(_) => closed = true,
            }
            if closed || n == 0 || n + 4096 > buf.len() || !readable(false) {
                break;
            }
        }
        if n == 0 {
            continue;
        }
        let data = &buf[..n];
        let t_micros = shared.now_micros();
        record(&shared, &mut recording, data, t_micros);
        scanner.scan(data, &mut found);
        if !found.is_empty() {
            answer_queries(&shared, &found);
            found.clear();
        }
    }
    let _ = recording.sync();
}

fn record(shared: &Shared, recording: &mut RecordingWriter, data: &[u8], t_micros: u64) {
    let failed_before = shared.out.lock().expect("out lock").failed.is_some();
    let mut newly_failed = None;
    if !failed_before {
        if let Err(e) = recording.append(data, t_micros) {
            newly_failed = Some(format!(
                "the recording could not be written ({e}); the session keeps running, output is forwarded but not kept on this device"
            ));
        }
    }
    let failed = failed_before || newly_failed.is_some();
    if failed {
        shared.screen.feed(data);
    }
    {
        let mut out = shared.out.lock().expect("out lock");
        let offset = out.written;
        if newly_failed.is_some() {
            out.failed = newly_failed;
        }
        if !failed {
            out.file_until = recording.len();
        }
        out.push(offset, t_micros, bytes::Bytes::copy_from_slice(data));
    }
    if !failed {
        shared.progress.recorded.store(recording.len(), Ordering::Release);
    }
    shared.bump();
}

fn answer_queries(shared: &Shared, found: &[queries::Query]) {
    if !shared.headless() {
        return;
    }
    for q in found {
        let cursor = match q {
            queries::Query::CursorPosition => shared.screen.modes_blocking().cursor,
            _ => (0, 0),
        };
        // Dropped, not waited for, when the program is not reading its input.
        let _ = shared.queue_input(queries::answer(*q, cursor), false);
    }
}

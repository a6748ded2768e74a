//! The PTY reader thread: record first, then publish; answer terminal queries when no
//! interactive viewer is attached.

use std::io::Read;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::queries::{self, QueryScanner};
use crate::recording::{Chunk, RecordingWriter};

use super::Shared;

/// Bytes read from the PTY at a time.
const READ_BUF: usize = 64 * 1024;

/// Reads the PTY until it closes. Returns when the program and everything holding the
/// terminal have gone.
pub fn pump(shared: Arc<Shared>, mut reader: Box<dyn Read + Send>, mut recording: RecordingWriter) {
    let mut buf = vec![0u8; READ_BUF];
    let mut scanner = QueryScanner::new();
    let mut found = Vec::new();
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
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
        shared.screen.feed(data.to_vec());
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
        out.push(Chunk { offset, t_micros, data: data.to_vec() });
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
    let tx = shared.input.lock().expect("input lock").clone();
    let Some(tx) = tx else { return };
    for q in found {
        let cursor = match q {
            queries::Query::CursorPosition => shared.screen.modes_blocking().map(|m| m.cursor).unwrap_or((0, 0)),
            _ => (0, 0),
        };
        let bytes = queries::answer(*q, cursor);
        let _ = tx.blocking_send(super::state::InputItem { bytes, done: None });
    }
}

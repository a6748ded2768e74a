//! A session's output stream on disk, as the shim writes it on the device and the server
//! keeps it. `output.raw` holds every byte the program printed,
//! byte N at offset N; `output.idx` holds one 16-byte record per read from the PTY:
//! `(u64 offset_end, u64 t_micros)`, big-endian, so a range can be replayed with its
//! timing. The writer appends the bytes before anyone is shown them.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;

/// Size of one index record.
pub const INDEX_RECORD: usize = 16;

/// Appends output to a session's recording.
pub struct RecordingWriter {
    raw: File,
    idx: File,
    len: u64,
    /// Index records of bytes appended by [`RecordingWriter::append_bytes`], not yet
    /// written.
    unindexed: Vec<u8>,
}

impl RecordingWriter {
    /// Opens (creating or continuing) the recording at `raw` and `idx`.
    pub fn open(raw: &Path, idx: &Path) -> io::Result<Self> {
        let raw = OpenOptions::new().create(true).append(true).open(raw)?;
        let idx = OpenOptions::new().create(true).append(true).open(idx)?;
        let len = raw.metadata()?.len();
        Ok(RecordingWriter { raw, idx, len, unindexed: Vec::new() })
    }

    /// Opens the recording and cuts it back to exactly `len` bytes (and the index records
    /// that end within them): what a crash between writing bytes and committing their
    /// offset elsewhere may have left beyond `len` is dropped, so it is not stored twice.
    pub fn open_at(raw: &Path, idx: &Path, len: u64) -> io::Result<Self> {
        let mut w = Self::open(raw, idx)?;
        if w.len > len {
            w.raw.set_len(len)?;
        }
        let records = w.idx.metadata()?.len() / INDEX_RECORD as u64;
        let reader = RecordingReader::open(raw, idx)?;
        let mut keep = records;
        while keep > 0 {
            match reader.record(keep - 1)? {
                Some((end, _)) if end > len => keep -= 1,
                _ => break,
            }
        }
        w.idx.set_len(keep * INDEX_RECORD as u64)?;
        w.len = w.len.min(len);
        Ok(w)
    }

    /// Bytes recorded so far.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True when nothing was recorded yet.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Appends `data`, read at `t_micros`, with its index record. When the bytes cannot
    /// be written nothing is counted as recorded.
    pub fn append(&mut self, data: &[u8], t_micros: u64) -> io::Result<()> {
        self.append_bytes(data, t_micros)?;
        self.write_index()
    }

    /// Appends `data`, read at `t_micros`, and keeps its index record for the next
    /// [`RecordingWriter::write_index`]: the bytes are what must be on file before
    /// anyone is shown them, their timing can follow. On error nothing is counted as
    /// recorded.
    pub fn append_bytes(&mut self, data: &[u8], t_micros: u64) -> io::Result<()> {
        self.raw.write_all(data)?;
        self.len += data.len() as u64;
        self.unindexed.extend_from_slice(&self.len.to_be_bytes());
        self.unindexed.extend_from_slice(&t_micros.to_be_bytes());
        Ok(())
    }

    /// Writes the index records kept by [`RecordingWriter::append_bytes`], in one write.
    /// On error they are dropped: the bytes stay recorded, without their timing.
    pub fn write_index(&mut self) -> io::Result<()> {
        if self.unindexed.is_empty() {
            return Ok(());
        }
        let written = self.idx.write_all(&self.unindexed);
        self.unindexed.clear();
        written
    }

    /// Writes any index records kept back, then forces what was written to stable
    /// storage: the bytes even when their index cannot be written (the first error is
    /// returned).
    pub fn sync(&mut self) -> io::Result<()> {
        let indexed = self.write_index();
        let raw = self.raw.sync_data();
        let idx = self.idx.sync_data();
        indexed.and(raw).and(idx)
    }
}

impl Drop for RecordingWriter {
    /// Index records kept back are written, however the writer goes.
    fn drop(&mut self) {
        let _ = self.write_index();
    }
}

/// One piece of output read back: where it starts, when it was read, the bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    /// Offset of the first byte.
    pub offset: u64,
    /// µs since the session started.
    pub t_micros: u64,
    /// What the program wrote, from `offset` on.
    pub data: Vec<u8>,
}

/// Reads a recording back by offset.
pub struct RecordingReader {
    raw: File,
    idx: File,
}

impl RecordingReader {
    /// Opens the recording files.
    pub fn open(raw: &Path, idx: &Path) -> io::Result<Self> {
        Ok(RecordingReader { raw: File::open(raw)?, idx: File::open(idx)? })
    }

    /// Reads up to `max` bytes starting at `from`, as is (no timing).
    pub fn read_raw(&self, from: u64, max: usize) -> io::Result<Vec<u8>> {
        let mut buf = vec![0u8; max];
        let mut filled = 0;
        while filled < max {
            let n = self.raw.read_at(&mut buf[filled..], from + filled as u64)?;
            if n == 0 {
                break;
            }
            filled += n;
        }
        buf.truncate(filled);
        Ok(buf)
    }

    fn record(&self, i: u64) -> io::Result<Option<(u64, u64)>> {
        let mut rec = [0u8; INDEX_RECORD];
        match self.idx.read_exact_at(&mut rec, i * INDEX_RECORD as u64) {
            Ok(()) => Ok(Some((u64::from_be_bytes(rec[..8].try_into().expect("8")), u64::from_be_bytes(rec[8..].try_into().expect("8"))))),
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The time of the index's last record; `None` when it has none.
    fn last_time(&self) -> io::Result<Option<u64>> {
        let n = self.idx.metadata()?.len() / INDEX_RECORD as u64;
        match n {
            0 => Ok(None),
            _ => Ok(self.record(n - 1)?.map(|(_, t)| t)),
        }
    }

    /// The time at which the byte at `offset` was read (binary search of the index);
    /// `None` when the index does not cover it.
    pub fn time_of(&self, offset: u64) -> io::Result<Option<u64>> {
        let n = self.idx.metadata()?.len() / INDEX_RECORD as u64;
        let (mut lo, mut hi) = (0u64, n);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match self.record(mid)? {
                Some((end, _)) if end <= offset => lo = mid + 1,
                Some(_) => hi = mid,
                None => hi = mid,
            }
        }
        Ok(self.record(lo)?.map(|(_, t)| t))
    }

    /// Reads the recording from `from` as chunks of about `max` bytes, split where the
    /// time between reads exceeds `gap_micros` (so replays keep their timing).
    pub fn chunks(&self, from: u64, max: usize, gap_micros: u64) -> io::Result<Vec<Chunk>> {
        let n = self.idx.metadata()?.len() / INDEX_RECORD as u64;
        let (mut lo, mut hi) = (0u64, n);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match self.record(mid)? {
                Some((end, _)) if end <= from => lo = mid + 1,
                _ => hi = mid,
            }
        }
        let mut out: Vec<Chunk> = Vec::new();
        let (mut start, mut total) = (from, 0usize);
        let mut i = lo;
        while total < max {
            let Some((end, t)) = self.record(i)? else { break };
            i += 1;
            let len = (end - start) as usize;
            let extend = out.last().is_some_and(|c| c.data.len() + len <= max && t.saturating_sub(c.t_micros) <= gap_micros);
            let data = self.read_raw(start, len)?;
            if data.len() < len {
                break;
            }
            match out.last_mut() {
                Some(c) if extend => c.data.extend_from_slice(&data),
                _ => out.push(Chunk { offset: start, t_micros: t, data }),
            }
            total += len;
            start = end;
        }
        Ok(out)
    }

    /// Reads `[from, from + max)` (clipped to what is recorded) as one chunk carrying the
    /// time of its first byte (bytes the index does not cover yet, as a crash may leave
    /// them, carry the last time it has); `None` when nothing is recorded at `from`.
    pub fn read_chunk(&self, from: u64, max: usize) -> io::Result<Option<Chunk>> {
        let data = self.read_raw(from, max)?;
        if data.is_empty() {
            return Ok(None);
        }
        let t_micros = match self.time_of(from)? {
            Some(t) => t,
            None => self.last_time()?.unwrap_or(0),
        };
        Ok(Some(Chunk { offset: from, t_micros, data }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A directory for a recording, and its two files' paths.
    fn files() -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let (raw, idx) = (dir.path().join("o.raw"), dir.path().join("o.idx"));
        (dir, raw, idx)
    }

    #[test]
    fn append_and_read_back_by_offset_with_timing() {
        let (_dir, raw, idx) = files();
        let mut w = RecordingWriter::open(&raw, &idx).unwrap();
        w.append(b"hello ", 10).unwrap();
        w.append(b"world", 20).unwrap();
        w.sync().unwrap();
        assert_eq!(w.len(), 11);
        let r = RecordingReader::open(&raw, &idx).unwrap();
        assert_eq!(r.read_chunk(0, 100).unwrap().unwrap(), Chunk { offset: 0, t_micros: 10, data: b"hello world".to_vec() });
        let c = r.read_chunk(6, 3).unwrap().unwrap();
        assert_eq!((c.t_micros, c.data.as_slice()), (20, &b"wor"[..]));
        assert_eq!(r.time_of(5).unwrap(), Some(10));
        assert_eq!(r.time_of(11).unwrap(), None);
        assert!(r.read_chunk(11, 10).unwrap().is_none());
    }

    #[test]
    fn bytes_are_readable_at_once_and_their_timing_once_the_index_is_written() {
        let (_dir, raw, idx) = files();
        let mut w = RecordingWriter::open(&raw, &idx).unwrap();
        w.append(b"ab", 7).unwrap();
        w.append_bytes(b"cd", 8).unwrap();
        w.append_bytes(b"ef", 9).unwrap();
        assert_eq!(w.len(), 6);
        let r = RecordingReader::open(&raw, &idx).unwrap();
        assert_eq!(r.read_raw(0, 10).unwrap(), b"abcdef");
        assert_eq!((r.time_of(1).unwrap(), r.time_of(2).unwrap()), (Some(7), None));
        // Bytes the index does not cover yet carry the last time it has.
        assert_eq!(r.read_chunk(2, 10).unwrap().unwrap().t_micros, 7);
        w.write_index().unwrap();
        assert_eq!((r.time_of(2).unwrap(), r.time_of(5).unwrap()), (Some(8), Some(9)));
        // Nothing kept back: no write at all; and sync writes what is.
        w.write_index().unwrap();
        w.append_bytes(b"g", 10).unwrap();
        w.sync().unwrap();
        assert_eq!(std::fs::metadata(&idx).unwrap().len(), 4 * INDEX_RECORD as u64);
        assert_eq!(r.time_of(6).unwrap(), Some(10));
        // A writer that goes writes what it kept back.
        w.append_bytes(b"h", 11).unwrap();
        drop(w);
        assert_eq!(r.time_of(7).unwrap(), Some(11));
    }

    #[test]
    fn chunks_follow_the_index_and_split_on_time_gaps() {
        let (_dir, raw, idx) = files();
        let mut w = RecordingWriter::open(&raw, &idx).unwrap();
        w.append(b"ab", 0).unwrap();
        w.append(b"cd", 5).unwrap();
        w.append(b"ef", 1000).unwrap();
        let r = RecordingReader::open(&raw, &idx).unwrap();
        let c = r.chunks(1, 100, 10).unwrap();
        assert_eq!(
            c,
            vec![Chunk { offset: 1, t_micros: 0, data: b"bcd".to_vec() }, Chunk { offset: 4, t_micros: 1000, data: b"ef".to_vec() }]
        );
        assert!(r.chunks(6, 100, 10).unwrap().is_empty());
        assert_eq!(r.chunks(0, 2, 10).unwrap().len(), 1);
    }

    #[test]
    fn open_at_cuts_back_what_was_never_committed() {
        let (_dir, raw, idx) = files();
        let mut w = RecordingWriter::open(&raw, &idx).unwrap();
        w.append(b"abc", 1).unwrap();
        w.append(b"def", 2).unwrap();
        let mut w = RecordingWriter::open_at(&raw, &idx, 3).unwrap();
        assert_eq!(w.len(), 3);
        w.append(b"XYZ", 3).unwrap();
        let r = RecordingReader::open(&raw, &idx).unwrap();
        assert_eq!(r.read_raw(0, 10).unwrap(), b"abcXYZ");
        assert_eq!(r.time_of(4).unwrap(), Some(3));
    }

    #[test]
    fn reopening_continues_the_stream() {
        let (_dir, raw, idx) = files();
        RecordingWriter::open(&raw, &idx).unwrap().append(b"abc", 1).unwrap();
        let mut w = RecordingWriter::open(&raw, &idx).unwrap();
        assert_eq!(w.len(), 3);
        w.append(b"de", 2).unwrap();
        let r = RecordingReader::open(&raw, &idx).unwrap();
        assert_eq!(r.read_raw(0, 10).unwrap(), b"abcde");
        assert_eq!(r.time_of(3).unwrap(), Some(2));
    }
}

//! Recent output kept in memory, addressed by stream offset: what live forwarding and
//! re-syncing viewers read instead of the stored stream.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};

/// How much a ring keeps.
#[derive(Debug, Clone, Copy)]
pub struct RingLimits {
    /// The most bytes held; the oldest pieces leave first (the newest always stays).
    pub bytes: usize,
    /// A piece that continues the newest one is joined onto it while the two together
    /// are no bigger than this (0: never), so small writes do not cost a piece each.
    pub join_up_to: usize,
    /// ... and while the newest piece began less than this long ago: a quiet session's
    /// occasional lines are pieces of their own, which leave as they age, rather than one
    /// piece kept young by each line until it holds `join_up_to` bytes.
    pub join_within: Duration,
    /// Pieces last added to longer ago than this leave (the newest always stays).
    pub max_age: Option<Duration>,
}

/// One stretch of output: where it starts in the stream, when it was written (µs since
/// the program started, of its first byte), its bytes.
#[derive(Debug, Clone)]
struct Piece {
    offset: u64,
    t_micros: u64,
    data: Bytes,
    added: Instant,
    /// When its first byte came (joining stops once this is `join_within` ago).
    began: Instant,
}

impl Piece {
    fn end(&self) -> u64 {
        self.offset + self.data.len() as u64
    }

    /// Its bytes from `offset` on (`offset` within or before it).
    fn from(&self, offset: u64) -> Bytes {
        if self.offset < offset {
            self.data.slice((offset - self.offset) as usize..)
        } else {
            self.data.clone()
        }
    }
}

/// A bounded window of the output stream's most recent bytes.
#[derive(Debug)]
pub struct OutputRing {
    pieces: VecDeque<Piece>,
    held: usize,
    limits: RingLimits,
}

impl OutputRing {
    /// An empty ring keeping at most `limits`.
    pub fn new(limits: RingLimits) -> OutputRing {
        OutputRing { pieces: VecDeque::new(), held: 0, limits }
    }

    /// Adds `data` written at `offset` (at or after what the ring holds), then lets the
    /// oldest pieces go while the ring is over its limits.
    pub fn push(&mut self, offset: u64, t_micros: u64, data: Bytes, now: Instant) {
        self.held += data.len();
        match self.pieces.back_mut() {
            Some(last)
                if last.end() == offset
                    && last.data.len() + data.len() <= self.limits.join_up_to
                    && now.saturating_duration_since(last.began) < self.limits.join_within =>
            {
                let mut joined = BytesMut::with_capacity(last.data.len() + data.len());
                joined.extend_from_slice(&last.data);
                joined.extend_from_slice(&data);
                last.data = joined.freeze();
                last.added = now;
            }
            _ => self.pieces.push_back(Piece { offset, t_micros, data, added: now, began: now }),
        }
        while self.pieces.len() > 1 && (self.held > self.limits.bytes || self.front_expired(now)) {
            let old = self.pieces.pop_front().expect("non-empty");
            self.held -= old.data.len();
        }
    }

    fn front_expired(&self, now: Instant) -> bool {
        let Some(age) = self.limits.max_age else { return false };
        self.pieces.front().is_some_and(|p| now.saturating_duration_since(p.added) > age)
    }

    /// The offset of the oldest byte held (None: empty).
    pub fn start(&self) -> Option<u64> {
        self.pieces.front().map(|p| p.offset)
    }

    /// Bytes held.
    pub fn held(&self) -> usize {
        self.held
    }

    /// Pieces held.
    pub fn pieces(&self) -> usize {
        self.pieces.len()
    }

    /// What the ring holds from `offset` on, as the pieces it keeps (no copy).
    pub fn since(&self, offset: u64) -> Vec<Bytes> {
        self.pieces.iter().filter(|p| p.end() > offset).map(|p| p.from(offset)).collect()
    }

    /// Up to `max` contiguous bytes from `from` and when the first of them was written;
    /// None when the ring holds nothing at `from`. A range inside one piece is a slice of
    /// it (no copy).
    pub fn range(&self, from: u64, max: usize) -> Option<(u64, Bytes)> {
        let idx = self.pieces.partition_point(|p| p.end() <= from);
        let first = self.pieces.get(idx).filter(|p| p.offset <= from)?;
        let first_bytes = first.from(from);
        if first_bytes.len() >= max || self.pieces.get(idx + 1).is_none_or(|next| next.offset != first.end()) {
            return Some((first.t_micros, first_bytes.slice(..first_bytes.len().min(max))));
        }
        let mut out = BytesMut::with_capacity(max.min(self.held));
        let mut expect = from;
        for p in self.pieces.range(idx..) {
            if p.end() <= expect || p.offset > expect || out.len() >= max {
                break;
            }
            let part = p.from(expect);
            let take = part.len().min(max - out.len());
            out.extend_from_slice(&part[..take]);
            expect += take as u64;
        }
        Some((first.t_micros, out.freeze()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLAIN: RingLimits = RingLimits { bytes: 100, join_up_to: 0, join_within: Duration::ZERO, max_age: None };

    fn ring_of(limits: RingLimits, pieces: &[(u64, &str)]) -> OutputRing {
        let mut ring = OutputRing::new(limits);
        let now = Instant::now();
        for (offset, s) in pieces {
            ring.push(*offset, offset * 10, Bytes::copy_from_slice(s.as_bytes()), now);
        }
        ring
    }

    fn joined(parts: Vec<Bytes>) -> Vec<u8> {
        parts.iter().flat_map(|b| b.to_vec()).collect()
    }

    #[test]
    fn ranges_span_pieces_and_carry_the_first_piece_time() {
        let ring = ring_of(PLAIN, &[(0, "abc"), (3, "defg")]);
        let (t, data) = ring.range(2, 3).unwrap();
        assert_eq!((t, &data[..]), (0, &b"cde"[..]));
        let (t, data) = ring.range(4, 100).unwrap();
        assert_eq!((t, &data[..]), (30, &b"efg"[..]));
        assert_eq!(&ring.range(0, 2).unwrap().1[..], b"ab");
        assert!(ring.range(7, 10).is_none());
    }

    #[test]
    fn a_range_never_bridges_a_gap() {
        let ring = ring_of(PLAIN, &[(0, "abc"), (10, "xyz")]);
        assert_eq!(&ring.range(1, 100).unwrap().1[..], b"bc");
        assert!(ring.range(5, 100).is_none());
        let ring = ring_of(PLAIN, &[(0, "abc"), (3, "de"), (10, "xyz")]);
        assert_eq!(&ring.range(1, 100).unwrap().1[..], b"bcde", "joined up to the gap, not across it");
    }

    #[test]
    fn the_oldest_pieces_leave_past_the_byte_limit_but_the_newest_stays() {
        let ring = ring_of(PLAIN, &[(0, &"a".repeat(60)), (60, &"b".repeat(60)), (120, &"c".repeat(60))]);
        assert_eq!((ring.start(), ring.held(), ring.pieces()), (Some(120), 60, 1));
        let ring = ring_of(PLAIN, &[(0, &"a".repeat(500))]);
        assert_eq!((ring.start(), ring.held()), (Some(0), 500));
    }

    #[test]
    fn small_continuing_pieces_are_joined_up_to_the_limit() {
        let limits = RingLimits { bytes: 100, join_up_to: 4, join_within: Duration::from_secs(1), max_age: None };
        let ring = ring_of(limits, &[(0, "ab"), (2, "cd"), (4, "ef"), (9, "gh")]);
        assert_eq!(ring.pieces(), 3, "joined while ≤ 4 bytes and only when contiguous");
        assert_eq!(joined(ring.since(1)), b"bcdefgh");
        assert_eq!(joined(ring.since(5)), b"fgh");
    }

    #[test]
    fn old_pieces_expire_but_the_newest_stays() {
        let limits = RingLimits { bytes: 100, join_up_to: 0, join_within: Duration::ZERO, max_age: Some(Duration::from_secs(60)) };
        let mut ring = OutputRing::new(limits);
        let then = Instant::now();
        ring.push(0, 0, Bytes::from_static(b"old"), then);
        ring.push(3, 0, Bytes::from_static(b"mid"), then + Duration::from_secs(30));
        assert_eq!(ring.start(), Some(0));
        ring.push(6, 0, Bytes::from_static(b"new"), then + Duration::from_secs(61));
        assert_eq!((ring.start(), ring.held()), (Some(3), 6));
        ring.push(9, 0, Bytes::from_static(b"!"), then + Duration::from_secs(200));
        assert_eq!((ring.start(), ring.held()), (Some(9), 1));
    }

    #[test]
    fn a_quiet_sessions_lines_are_not_joined_and_age_out() {
        let limits = RingLimits {
            bytes: 1 << 20,
            join_up_to: 16 << 10,
            join_within: Duration::from_secs(1),
            max_age: Some(Duration::from_secs(60)),
        };
        let mut ring = OutputRing::new(limits);
        let then = Instant::now();
        // A burst is joined; a line every 10 s for an hour is not, and only the last
        // minute's lines stay.
        ring.push(0, 0, Bytes::from_static(b"burst-"), then);
        ring.push(6, 0, Bytes::from_static(b"more"), then + Duration::from_millis(500));
        assert_eq!(ring.pieces(), 1);
        let line = [b'x'; 80];
        for i in 1..=360u64 {
            ring.push(10 + (i - 1) * 80, 0, Bytes::copy_from_slice(&line), then + Duration::from_secs(i * 10));
        }
        assert!(ring.pieces() <= 7, "{} pieces", ring.pieces());
        assert!(ring.held() <= 7 * 80, "{} bytes held", ring.held());
        assert_eq!(joined(ring.since(10 + 359 * 80)), line.to_vec());
    }
}

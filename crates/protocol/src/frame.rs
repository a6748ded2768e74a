//! Binary framing helpers.
//!
//! Shim socket frames are `[u32 big-endian length][payload]`, the payload at most
//! [`MAX_FRAME_LEN`] bytes. Inside payloads, integers are big-endian and fixed-width;
//! ids are 16 raw UUID bytes. A reader that finds a longer length, a short body or an
//! unknown tag returns [`FrameError`] and the link is closed.

use std::io::IoSlice;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// The largest payload accepted on any framed link.
pub const MAX_FRAME_LEN: usize = 16 * 1024 * 1024;

/// A frame that cannot be decoded.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// The declared length is over [`MAX_FRAME_LEN`].
    #[error("frame of {0} bytes is over the {MAX_FRAME_LEN}-byte limit")]
    TooLong(usize),
    /// The payload ended before a field did.
    #[error("frame is truncated: needed {needed} bytes at {at}, have {have}")]
    Truncated {
        /// Bytes needed.
        needed: usize,
        /// Position of the field.
        at: usize,
        /// Bytes available.
        have: usize,
    },
    /// The payload is empty.
    #[error("empty frame")]
    Empty,
    /// The tag byte is not one this version knows.
    #[error("unknown frame tag {0}")]
    UnknownTag(u8),
    /// A JSON control message did not parse.
    #[error("bad control message: {0}")]
    Json(#[from] serde_json::Error),
    /// The link failed.
    #[error("link error: {0}")]
    Io(#[from] std::io::Error),
}

/// Reads one length-prefixed frame; `Ok(None)` at a clean end of stream.
pub async fn read_frame<R: AsyncRead + Unpin>(r: &mut R) -> Result<Option<Vec<u8>>, FrameError> {
    let mut len = [0u8; 4];
    match r.read_exact(&mut len).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e.into()),
    }
    let len = u32::from_be_bytes(len) as usize;
    if len > MAX_FRAME_LEN {
        return Err(FrameError::TooLong(len));
    }
    let mut buf = vec![0u8; len];
    r.read_exact(&mut buf).await?;
    Ok(Some(buf))
}

/// Writes one length-prefixed frame made of `parts` (written without copying them
/// together): in one system call when the writer takes it all, so the reader is woken
/// once for the whole frame, not once for its length and again for its body.
pub async fn write_frame<W: AsyncWrite + Unpin>(w: &mut W, parts: &[&[u8]]) -> Result<(), FrameError> {
    let len: usize = parts.iter().map(|p| p.len()).sum();
    if len > MAX_FRAME_LEN {
        return Err(FrameError::TooLong(len));
    }
    let prefix = (len as u32).to_be_bytes();
    let mut slices: Vec<IoSlice<'_>> = std::iter::once(&prefix[..]).chain(parts.iter().copied()).map(IoSlice::new).collect();
    let mut rest = &mut slices[..];
    while !rest.is_empty() {
        match w.write_vectored(rest).await? {
            0 => return Err(std::io::Error::from(std::io::ErrorKind::WriteZero).into()),
            n => IoSlice::advance_slices(&mut rest, n),
        }
    }
    Ok(())
}

/// Reads length-prefixed frames, cancel-safely: what was read of a frame stays in its
/// buffer, so `next` may be one branch of a `select!` that another branch wins.
pub struct FrameReader<R> {
    inner: R,
    buf: bytes::BytesMut,
}

impl<R: AsyncRead + Unpin> FrameReader<R> {
    /// Reads frames from `inner`.
    pub fn new(inner: R) -> Self {
        FrameReader { inner, buf: bytes::BytesMut::with_capacity(64 * 1024) }
    }

    /// The next frame's payload; `Ok(None)` at a clean end of stream (between frames).
    pub async fn next(&mut self) -> Result<Option<bytes::Bytes>, FrameError> {
        loop {
            if self.buf.len() >= 4 {
                let len = u32::from_be_bytes(self.buf[..4].try_into().expect("four bytes")) as usize;
                if len > MAX_FRAME_LEN {
                    return Err(FrameError::TooLong(len));
                }
                if self.buf.len() >= 4 + len {
                    let mut frame = self.buf.split_to(4 + len);
                    return Ok(Some(frame.split_off(4).freeze()));
                }
                self.buf.reserve(4 + len - self.buf.len());
            }
            if self.inner.read_buf(&mut self.buf).await? == 0 {
                return match self.buf.is_empty() {
                    true => Ok(None),
                    false => Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof).into()),
                };
            }
        }
    }
}

/// A cursor over a payload that reads fixed-width fields with bounds checks.
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// Starts reading `buf` at its beginning.
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    /// The next `n` bytes.
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], FrameError> {
        let have = self.buf.len() - self.pos;
        if have < n {
            return Err(FrameError::Truncated { needed: n, at: self.pos, have });
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    /// A tag byte.
    pub fn u8(&mut self) -> Result<u8, FrameError> {
        Ok(self.take(1)?[0])
    }

    /// A big-endian u16.
    pub fn u16(&mut self) -> Result<u16, FrameError> {
        Ok(u16::from_be_bytes(self.take(2)?.try_into().expect("2 bytes")))
    }

    /// A big-endian u64.
    pub fn u64(&mut self) -> Result<u64, FrameError> {
        Ok(u64::from_be_bytes(self.take(8)?.try_into().expect("8 bytes")))
    }

    /// A 16-byte UUID.
    pub fn uuid(&mut self) -> Result<uuid::Uuid, FrameError> {
        Ok(uuid::Uuid::from_bytes(self.take(16)?.try_into().expect("16 bytes")))
    }

    /// Everything left.
    pub fn rest(&mut self) -> &'a [u8] {
        let s = &self.buf[self.pos..];
        self.pos = self.buf.len();
        s
    }
}

/// Serde helper: bytes as a base64 string in JSON control messages.
pub mod b64 {
    use base64::Engine;
    use serde::{Deserialize, Deserializer, Serializer};

    /// Serialises bytes as standard base64.
    pub fn serialize<S: Serializer>(v: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(v))
    }

    /// Parses standard base64.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let s = String::deserialize(d)?;
        base64::engine::general_purpose::STANDARD.decode(s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_frame_reader_survives_being_cancelled_mid_frame() {
        let (mut tx, rx) = tokio::io::duplex(64);
        let mut frames = FrameReader::new(rx);
        let mut wire = Vec::new();
        write_frame(&mut wire, &[b"hello"]).await.unwrap();
        write_frame(&mut wire, &[&[7u8; 300]]).await.unwrap();
        // Half of the first frame, then a read that is given up on.
        tx.write_all(&wire[..6]).await.unwrap();
        let gave_up = tokio::time::timeout(std::time::Duration::from_millis(20), frames.next()).await;
        assert!(gave_up.is_err(), "a partial frame is not handed on");
        let rest = wire[6..].to_vec();
        let writer = tokio::spawn(async move {
            tx.write_all(&rest).await.unwrap();
        });
        assert_eq!(&frames.next().await.unwrap().unwrap()[..], b"hello");
        assert_eq!(&frames.next().await.unwrap().unwrap()[..], &[7u8; 300][..]);
        writer.await.unwrap();
        assert!(frames.next().await.unwrap().is_none(), "a clean end between frames");
    }

    #[tokio::test]
    async fn a_frame_reader_refuses_a_cut_frame_and_an_oversized_length() {
        let mut cut = Vec::new();
        write_frame(&mut cut, &[b"abcdef"]).await.unwrap();
        cut.truncate(7);
        assert!(FrameReader::new(&cut[..]).next().await.is_err());
        let huge = ((MAX_FRAME_LEN + 1) as u32).to_be_bytes();
        assert!(matches!(FrameReader::new(&huge[..]).next().await, Err(FrameError::TooLong(_))));
    }

    #[tokio::test]
    async fn frames_round_trip_and_end_cleanly() {
        let mut buf = Vec::new();
        write_frame(&mut buf, &[b"ab", b"cd"]).await.unwrap();
        write_frame(&mut buf, &[]).await.unwrap();
        let mut r = &buf[..];
        assert_eq!(read_frame(&mut r).await.unwrap().unwrap(), b"abcd");
        assert_eq!(read_frame(&mut r).await.unwrap().unwrap(), b"");
        assert!(read_frame(&mut r).await.unwrap().is_none());
    }

    /// A writer that takes at most three bytes a call, as a full socket may.
    struct Trickle(Vec<u8>);

    impl tokio::io::AsyncWrite for Trickle {
        fn poll_write(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            buf: &[u8],
        ) -> std::task::Poll<std::io::Result<usize>> {
            let n = buf.len().min(3);
            self.0.extend_from_slice(&buf[..n]);
            std::task::Poll::Ready(Ok(n))
        }
        fn poll_flush(self: std::pin::Pin<&mut Self>, _: &mut std::task::Context<'_>) -> std::task::Poll<std::io::Result<()>> {
            std::task::Poll::Ready(Ok(()))
        }
        fn poll_shutdown(self: std::pin::Pin<&mut Self>, _: &mut std::task::Context<'_>) -> std::task::Poll<std::io::Result<()>> {
            std::task::Poll::Ready(Ok(()))
        }
    }

    #[tokio::test]
    async fn a_frame_written_in_pieces_arrives_whole() {
        let mut w = Trickle(Vec::new());
        write_frame(&mut w, &[b"", b"hello", b"", b" world", b""]).await.unwrap();
        write_frame(&mut w, &[b"", b""]).await.unwrap();
        let mut r = &w.0[..];
        assert_eq!(read_frame(&mut r).await.unwrap().unwrap(), b"hello world");
        assert_eq!(read_frame(&mut r).await.unwrap().unwrap(), b"");
        assert!(read_frame(&mut r).await.unwrap().is_none());
    }

    #[tokio::test]
    async fn oversized_length_is_refused_without_allocating() {
        let buf = (u32::MAX).to_be_bytes();
        let mut r = &buf[..];
        assert!(matches!(read_frame(&mut r).await, Err(FrameError::TooLong(_))));
    }

    #[tokio::test]
    async fn truncated_body_is_an_error() {
        let mut buf = 10u32.to_be_bytes().to_vec();
        buf.extend_from_slice(b"abc");
        let mut r = &buf[..];
        assert!(matches!(read_frame(&mut r).await, Err(FrameError::Io(_))));
    }

    #[test]
    fn reader_checks_bounds() {
        let mut r = Reader::new(&[0, 1, 2]);
        assert_eq!(r.u16().unwrap(), 1);
        assert!(matches!(r.u64(), Err(FrameError::Truncated { needed: 8, at: 2, have: 1 })));
    }
}

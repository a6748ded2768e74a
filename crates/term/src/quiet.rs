//! A unix stream the runtime wakes for what arrives, not for what the peer took.
//!
//! A tokio `UnixStream` is watched for writing as well as reading, and a unix socket
//! signals "writable" each time its peer reads. So a process that sends a frame is woken
//! again when the other side reads it: per keystroke, once in `drover session attach`
//! and once per connection in the shim, each on a two-core machine taking a core from
//! the processes that carry the echo. [`QuietStream`] is watched for reading only; a
//! write goes straight to the socket, and only one the socket cannot take waits to be
//! woken, through a registration made for that wait and dropped once the write is done.
//!
//! It also carries a descriptor beside a frame (`SCM_RIGHTS`): how a local viewer hands
//! its terminal to the shim ([`QuietWrite::send_frame_with_fd`], [`QuietRead::take_fd`]).

use std::io::{IoSlice, IoSliceMut};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{ready, Context, Poll};

use nix::sys::socket::{recvmsg, sendmsg, ControlMessage, ControlMessageOwned, MsgFlags};
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, Interest, ReadBuf};

/// Descriptors received and not yet taken, at most: any more are closed at once.
const HELD_FDS: usize = 2;
/// The most descriptors one message can carry (the kernel's `SCM_MAX_FD`): room for all
/// of them, so none is left open in this process unseen.
const MAX_FDS_PER_MESSAGE: usize = 253;

/// A connected unix stream, watched for reading only.
pub struct QuietStream {
    fd: Arc<AsyncFd<UnixStream>>,
}

impl QuietStream {
    /// Takes over a tokio stream (which stops being watched for writing).
    pub fn new(stream: tokio::net::UnixStream) -> std::io::Result<QuietStream> {
        // Still non-blocking: tokio's streams are, and `into_std` leaves it so.
        let stream = stream.into_std()?;
        // SAFETY: the stream owns its descriptor, open until the `AsyncFd` drops it.
        let fd = unsafe { AsyncFd::register_with_interest(stream, Interest::READABLE) }.map_err(|e| e.into_parts().1)?;
        Ok(QuietStream { fd: Arc::new(fd) })
    }

    /// Splits the stream into a half that reads and one that writes, each usable from
    /// its own task.
    pub fn into_split(self) -> (QuietRead, QuietWrite) {
        let received = Received { fds: Vec::new(), space: nix::cmsg_space!([RawFd; MAX_FDS_PER_MESSAGE]) };
        (QuietRead { fd: self.fd.clone(), received: Mutex::new(received) }, QuietWrite { fd: self.fd, waiting: None })
    }
}

/// The reading half of a [`QuietStream`].
pub struct QuietRead {
    fd: Arc<AsyncFd<UnixStream>>,
    received: Mutex<Received>,
}

/// Descriptors that came with what was read, and the room each read gives them.
struct Received {
    /// Oldest first.
    fds: Vec<OwnedFd>,
    /// The control buffer, made once rather than for every read.
    space: Vec<u8>,
}

impl QuietRead {
    /// The oldest descriptor that came with what was read so far (a frame's descriptor
    /// has come by the time the frame has been read).
    pub fn take_fd(&self) -> Option<OwnedFd> {
        let fds = &mut self.received.lock().expect("received lock").fds;
        (!fds.is_empty()).then(|| fds.remove(0))
    }

    /// Reads what the socket holds now into `buf`, keeping any descriptors that came
    /// with it (closed on exec).
    fn recv(&self, buf: &mut [u8]) -> std::io::Result<usize> {
        let mut iov = [IoSliceMut::new(buf)];
        let mut received = self.received.lock().expect("received lock");
        let Received { fds, space } = &mut *received;
        let flags = MsgFlags::MSG_CMSG_CLOEXEC | MsgFlags::MSG_DONTWAIT;
        let msg = recvmsg::<()>(self.fd.get_ref().as_raw_fd(), &mut iov, Some(space), flags)?;
        for cmsg in msg.cmsgs()? {
            if let ControlMessageOwned::ScmRights(got) = cmsg {
                for raw in got {
                    // SAFETY: the kernel just installed `raw` in this process for us alone.
                    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
                    if fds.len() < HELD_FDS {
                        fds.push(fd);
                    }
                }
            }
        }
        Ok(msg.bytes)
    }
}

impl AsyncRead for QuietRead {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        loop {
            let mut ready = ready!(self.fd.poll_read_ready(cx))?;
            let unfilled = buf.initialize_unfilled();
            match ready.try_io(|_| self.recv(unfilled)) {
                Ok(Ok(n)) => {
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                Ok(Err(e)) => return Poll::Ready(Err(e)),
                Err(_would_block) => continue,
            }
        }
    }
}

/// The writing half of a [`QuietStream`].
pub struct QuietWrite {
    fd: Arc<AsyncFd<UnixStream>>,
    /// Watches a copy of the socket for room, while a write waits for it.
    waiting: Option<AsyncFd<OwnedFd>>,
}

impl QuietWrite {
    /// Sends what the socket takes now of `bufs` (and `fds` with its first byte), without
    /// waiting, and never raising SIGPIPE (a peer that is gone is an error).
    fn send(&self, bufs: &[IoSlice<'_>], fds: &[RawFd]) -> std::io::Result<usize> {
        let rights = [ControlMessage::ScmRights(fds)];
        let cmsgs: &[ControlMessage<'_>] = if fds.is_empty() { &[] } else { &rights };
        let flags = MsgFlags::MSG_NOSIGNAL | MsgFlags::MSG_DONTWAIT;
        Ok(sendmsg::<()>(self.fd.get_ref().as_raw_fd(), bufs, cmsgs, flags, None)?)
    }

    /// Sends one length-prefixed frame with `payload`, and `fd` beside it.
    pub async fn send_frame_with_fd(&mut self, payload: &[u8], fd: BorrowedFd<'_>) -> std::io::Result<()> {
        let mut frame = (payload.len() as u32).to_be_bytes().to_vec();
        frame.extend_from_slice(payload);
        let fds = [fd.as_raw_fd()];
        let sent = std::future::poll_fn(|cx| self.poll_send(cx, &[IoSlice::new(&frame)], &fds)).await?;
        // The descriptor went with the first byte; the rest of the frame follows.
        self.write_all(&frame[sent..]).await
    }

    /// Waits until the socket may have room, registering a copy of it for that.
    fn poll_room(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        if self.waiting.is_none() {
            self.waiting = Some(room_watch(self.fd.get_ref())?);
        }
        let waiting = self.waiting.as_ref().expect("registered above");
        let mut ready = ready!(waiting.poll_write_ready(cx))?;
        ready.clear_ready();
        Poll::Ready(Ok(()))
    }

    fn poll_send(&mut self, cx: &mut Context<'_>, bufs: &[IoSlice<'_>], fds: &[RawFd]) -> Poll<std::io::Result<usize>> {
        loop {
            match self.send(bufs, fds) {
                Ok(n) => {
                    // Done waiting: the copy's registration would wake the runtime for
                    // every read the peer makes.
                    self.waiting = None;
                    return Poll::Ready(Ok(n));
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => ready!(self.poll_room(cx))?,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }
}

/// A copy of `fd`, watched for room to write (and nothing else) until dropped.
pub(crate) fn room_watch(fd: &impl AsFd) -> std::io::Result<AsyncFd<OwnedFd>> {
    let copy = fd.as_fd().try_clone_to_owned()?;
    // SAFETY: the copy owns its descriptor, open until the `AsyncFd` drops it.
    unsafe { AsyncFd::register_with_interest(copy, Interest::WRITABLE) }.map_err(|e| e.into_parts().1)
}

impl AsyncWrite for QuietWrite {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        self.get_mut().poll_send(cx, &[IoSlice::new(buf)], &[])
    }

    fn poll_write_vectored(self: Pin<&mut Self>, cx: &mut Context<'_>, bufs: &[IoSlice<'_>]) -> Poll<std::io::Result<usize>> {
        self.get_mut().poll_send(cx, bufs, &[])
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(self.fd.get_ref().shutdown(std::net::Shutdown::Write))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn a_write_the_socket_cannot_take_waits_for_room_and_loses_nothing() {
        let (a, b) = tokio::net::UnixStream::pair().unwrap();
        let (mut rd, _w) = QuietStream::new(b).unwrap().into_split();
        let (_r, mut wr) = QuietStream::new(a).unwrap().into_split();
        let sent: Vec<u8> = (0..8 << 20).map(|i: u32| (i % 251) as u8).collect();
        let expect = sent.clone();
        let writer = tokio::spawn(async move {
            wr.write_all(&sent).await.unwrap();
            wr.shutdown().await.unwrap();
        });
        let mut got = Vec::new();
        rd.read_to_end(&mut got).await.unwrap();
        writer.await.unwrap();
        assert!(got == expect, "{} bytes read of {}", got.len(), expect.len());
    }

    #[tokio::test]
    async fn a_descriptor_sent_beside_a_frame_is_taken_by_its_reader() {
        let (a, b) = tokio::net::UnixStream::pair().unwrap();
        let (mut rd, _w) = QuietStream::new(b).unwrap().into_split();
        let (_r, mut wr) = QuietStream::new(a).unwrap().into_split();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("handed");
        let file = std::fs::File::create(&path).unwrap();
        wr.send_frame_with_fd(b"take this", file.as_fd()).await.unwrap();
        drop(file);
        let frame = drover_protocol::frame::read_frame(&mut rd).await.unwrap().expect("a frame");
        assert_eq!(frame, b"take this");
        // The reader's copy writes to the same file, once.
        let mut handed = std::fs::File::from(rd.take_fd().expect("the descriptor came with the frame"));
        std::io::Write::write_all(&mut handed, b"written through the copy").unwrap();
        assert!(rd.take_fd().is_none(), "one descriptor was sent");
        assert_eq!(std::fs::read(&path).unwrap(), b"written through the copy");
    }

    #[tokio::test]
    async fn a_peer_that_is_gone_is_an_error_not_a_signal() {
        let (a, b) = tokio::net::UnixStream::pair().unwrap();
        drop(b);
        let (_r, mut wr) = QuietStream::new(a).unwrap().into_split();
        let err = wr.write_all(b"anyone?").await.unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::BrokenPipe);
    }
}

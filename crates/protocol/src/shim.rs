//! Device daemon ⇄ shim, over the session's unix socket (`shim.sock` in its directory).
//!
//! Each frame's payload starts with a tag byte:
//!
//! | tag | direction | body |
//! |---|---|---|
//! | 1 `OUTPUT` | shim → device | `u64 offset, u64 t_micros, bytes` |
//! | 2 `INPUT` | device → shim | keystroke bytes, written to the PTY as they are |
//! | 3 `CONTROL` | both | a JSON [`ShimRequest`] or [`ShimEvent`] |
//! | 4 `SNAPSHOT` | shim → device | `u64 req, u64 offset, u16 cols, u16 rows, bytes` |
//!
//! `offset` is the position of the first byte in the session's output stream and
//! `t_micros` the time it was read, in microseconds since the session started. The shim
//! appends output to its recording before it sends it, so a device that reconnects
//! asks for everything from the offset the server says it holds.

use bytes::Bytes;
use drover_core::{ExitStatus, SessionId};
use serde::{Deserialize, Serialize};

use crate::frame::{FrameError, Reader};

const OUTPUT: u8 = 1;
const INPUT: u8 = 2;
const CONTROL: u8 = 3;
const SNAPSHOT: u8 = 4;

/// What the shim needs to start the program: written by the device as `spec.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionSpec {
    /// The session this shim runs.
    pub session: SessionId,
    /// Program and arguments (no shell involved).
    pub command: Vec<String>,
    /// Working directory.
    pub cwd: String,
    /// Extra environment variables.
    #[serde(default)]
    pub env: Vec<(String, String)>,
    /// Terminal columns.
    pub cols: u16,
    /// Terminal rows.
    pub rows: u16,
    /// The agent's harness, when the run is an agent's: its state directories are the
    /// ones the sandbox grants (None: a session started by hand, which may run any).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub harness: Option<drover_core::harness::Harness>,
    /// An owner or admin started this one run outside the sandbox (audited).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unconfined: bool,
    /// The sandbox the shim puts the program in, decided by the device (whatever the
    /// server sent here is replaced); None runs it unconfined.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<drover_core::confinement::Policy>,
    /// What a connection to the shim's socket must present first (set by the device;
    /// None: any connection of the device's user is served, as by earlier versions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_secret: Option<String>,
}

/// How a shim's program ended (also written as `exit.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShimExit {
    /// The exit status, when the program ran.
    pub status: Option<ExitStatus>,
    /// Why it could not start, when it did not.
    pub start_error: Option<String>,
    /// A Stop was requested before it ended.
    pub stop_requested: bool,
    /// When it ended (RFC 3339, UTC).
    pub ended_at: String,
    /// The length of the output stream at the end.
    pub final_offset: u64,
}

/// Control requests the device sends to the shim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ShimRequest {
    /// Send output from `from_offset` on (replaying from the recording first).
    Subscribe {
        /// First offset wanted.
        from_offset: u64,
    },
    /// Resize the terminal.
    Resize {
        /// The terminal's width, in columns.
        cols: u16,
        /// The terminal's height, in rows.
        rows: u16,
    },
    /// Audited text: encode (bracketed paste if enabled), write, press Enter, mark.
    SendText {
        /// Request id echoed in [`ShimEvent::Delivered`].
        req: u64,
        /// What to type, as one line (Enter is pressed after it).
        text: String,
    },
    /// SIGTERM the process group, then SIGKILL after `grace_ms`.
    Stop {
        /// Grace period before SIGKILL.
        grace_ms: u64,
    },
    /// Ask for a screen snapshot (answered with a `SNAPSHOT` frame).
    Snapshot {
        /// Request id.
        req: u64,
        /// A viewer's first screen, answered at once: only a re-sync's screen may wait
        /// for the screen's follower to parse a flood first (absent: false).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        first: bool,
    },
    /// How many interactive viewers are attached; with none, the shim answers terminal queries.
    Viewers {
        /// Count of viewers that can type.
        interactive: u32,
    },
    /// The device holds everything up to the end; a finished shim may exit.
    Release,
    /// Serve a local viewer's terminal, whose descriptor comes with this frame (as
    /// `SCM_RIGHTS`), as `tmux attach` hands its terminal to the tmux server: the shim
    /// writes the output from `from_offset` on straight to it and reads the keys typed
    /// there, until `detach_key` is typed, [`ShimRequest::ReleaseTerminal`] comes or the
    /// output ends (answered by [`ShimEvent::TerminalReleased`] or
    /// [`ShimEvent::Exited`]). Offered only by a shim whose hello says `terminal`.
    TakeTerminal {
        /// First offset to write.
        from_offset: u64,
        /// Keys are not sent to the program (the detach key still works).
        read_only: bool,
        /// The key that hands the terminal back.
        detach_key: u8,
    },
    /// Stop touching the terminal taken by [`ShimRequest::TakeTerminal`].
    ReleaseTerminal,
    /// The first frame of every connection: the link secret from `spec.json`, which only
    /// the device can read (a run cannot), so no process of a run talks to a shim.
    Authenticate {
        /// [`SessionSpec::link_secret`].
        secret: String,
    },
}

/// Control events the shim sends to the device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ShimEvent {
    /// First message on every connection: the shim's state.
    Hello {
        /// Which session this shim runs (a device checks it is the one it expected).
        session: SessionId,
        /// The program's process id (its process group id), if it started.
        pid: Option<u32>,
        /// Current size.
        cols: u16,
        /// Current size.
        rows: u16,
        /// Bytes of output recorded so far.
        written: u64,
        /// When the program started (RFC 3339).
        started_at: String,
        /// Set once the program has ended.
        exit: Option<ShimExit>,
        /// This shim takes a viewer's terminal ([`ShimRequest::TakeTerminal`]).
        #[serde(default)]
        terminal: bool,
    },
    /// Audited text was written to the PTY.
    Delivered {
        /// The [`ShimRequest::SendText`] this answers.
        req: u64,
        /// Whether it went as a bracketed paste.
        bracketed_paste: bool,
        /// Output offset at the moment it was written.
        offset: u64,
        /// Time of writing, µs since start.
        t_micros: u64,
    },
    /// Audited text could not be written.
    NotDelivered {
        /// The [`ShimRequest::SendText`] this answers.
        req: u64,
        /// Why it could not be written, for a person.
        reason: String,
    },
    /// The terminal was resized.
    Resized {
        /// µs since start.
        t_micros: u64,
        /// The terminal's width, in columns.
        cols: u16,
        /// The terminal's height, in rows.
        rows: u16,
    },
    /// The program ended; all output up to `final_offset` has been sent before this (or,
    /// to a terminal taken, written to it; the shim no longer touches it).
    Exited(ShimExit),
    /// The shim no longer touches the terminal it took: its detach key was typed
    /// (`detached`), it was asked to let go, or it could not be used.
    TerminalReleased {
        /// The detach key was typed.
        detached: bool,
    },
    /// The recording could not be written (e.g. disk full); the program keeps running.
    RecordingError {
        /// What failed.
        message: String,
    },
    /// A Subscribe took effect: output after this event comes from `from_offset` on;
    /// output before it belonged to the previous subscription.
    Subscribed {
        /// Where the new subscription starts.
        from_offset: u64,
    },
}

/// One decoded frame on the shim link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ShimFrame {
    /// Terminal output.
    Output {
        /// Offset of the first byte.
        offset: u64,
        /// µs since start.
        t_micros: u64,
        /// What the program wrote, as it wrote it.
        data: Bytes,
    },
    /// Bytes to write to the program's terminal as typed (not audited).
    Input(Vec<u8>),
    /// A request to the shim.
    Request(ShimRequest),
    /// An event from the shim.
    Event(ShimEvent),
    /// A screen snapshot.
    Snapshot(Snapshot),
}

/// A screen snapshot: escape sequences that redraw the screen as of `offset`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// The request it answers.
    pub req: u64,
    /// Output offset the screen reflects.
    pub offset: u64,
    /// The screen's width, in columns.
    pub cols: u16,
    /// The screen's height, in rows.
    pub rows: u16,
    /// What redraws the screen on a terminal of this size.
    pub data: Vec<u8>,
}

/// The header of an output frame (the data follows it in the same frame).
pub fn output_header(offset: u64, t_micros: u64) -> [u8; 17] {
    let mut h = [0u8; 17];
    h[0] = OUTPUT;
    h[1..9].copy_from_slice(&offset.to_be_bytes());
    h[9..17].copy_from_slice(&t_micros.to_be_bytes());
    h
}

impl ShimFrame {
    /// Encodes the frame's payload.
    pub fn encode(&self) -> Vec<u8> {
        match self {
            ShimFrame::Output { offset, t_micros, data } => {
                let mut v = output_header(*offset, *t_micros).to_vec();
                v.extend_from_slice(data);
                v
            }
            ShimFrame::Input(data) => {
                let mut v = vec![INPUT];
                v.extend_from_slice(data);
                v
            }
            ShimFrame::Request(r) => control(r),
            ShimFrame::Event(e) => control(e),
            ShimFrame::Snapshot(s) => {
                let mut v = vec![SNAPSHOT];
                v.extend_from_slice(&s.req.to_be_bytes());
                v.extend_from_slice(&s.offset.to_be_bytes());
                v.extend_from_slice(&s.cols.to_be_bytes());
                v.extend_from_slice(&s.rows.to_be_bytes());
                v.extend_from_slice(&s.data);
                v
            }
        }
    }

    /// Decodes a payload sent by the shim (its output copied out of `buf`).
    pub fn decode_from_shim(buf: &[u8]) -> Result<ShimFrame, FrameError> {
        ShimFrame::decode_shared_from_shim(&Bytes::copy_from_slice(buf))
    }

    /// Decodes a payload sent by the shim as read; output is a slice of `buf`, not a
    /// copy.
    pub fn decode_shared_from_shim(buf: &Bytes) -> Result<ShimFrame, FrameError> {
        let mut r = Reader::new(buf);
        match r.u8().map_err(|_| FrameError::Empty)? {
            OUTPUT => {
                let (offset, t_micros) = (r.u64()?, r.u64()?);
                Ok(ShimFrame::Output { offset, t_micros, data: buf.slice(buf.len() - r.rest().len()..) })
            }
            CONTROL => Ok(ShimFrame::Event(serde_json::from_slice(r.rest())?)),
            SNAPSHOT => Ok(ShimFrame::Snapshot(Snapshot {
                req: r.u64()?,
                offset: r.u64()?,
                cols: r.u16()?,
                rows: r.u16()?,
                data: r.rest().to_vec(),
            })),
            tag => Err(FrameError::UnknownTag(tag)),
        }
    }

    /// Decodes a payload sent by the device.
    pub fn decode_from_device(buf: &[u8]) -> Result<ShimFrame, FrameError> {
        let mut r = Reader::new(buf);
        match r.u8().map_err(|_| FrameError::Empty)? {
            INPUT => Ok(ShimFrame::Input(r.rest().to_vec())),
            CONTROL => Ok(ShimFrame::Request(serde_json::from_slice(r.rest())?)),
            tag => Err(FrameError::UnknownTag(tag)),
        }
    }
}

fn control<T: Serialize>(msg: &T) -> Vec<u8> {
    let mut v = vec![CONTROL];
    serde_json::to_writer(&mut v, msg).expect("control messages serialise");
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shim_frames_round_trip() {
        let frames = [
            ShimFrame::Output { offset: 7, t_micros: 9, data: Bytes::from_static(b"\x1b[31mhi\xff") },
            ShimFrame::Event(ShimEvent::Resized { t_micros: 1, cols: 80, rows: 24 }),
            ShimFrame::Snapshot(Snapshot { req: 1, offset: 2, cols: 3, rows: 4, data: b"x".to_vec() }),
        ];
        for f in frames {
            assert_eq!(ShimFrame::decode_from_shim(&f.encode()).unwrap(), f);
        }
    }

    #[test]
    fn shared_output_is_a_slice_of_the_frame() {
        let frame = Bytes::from(ShimFrame::Output { offset: 3, t_micros: 4, data: Bytes::from_static(b"hello") }.encode());
        let Ok(ShimFrame::Output { data, offset: 3, t_micros: 4 }) = ShimFrame::decode_shared_from_shim(&frame) else {
            panic!("not output")
        };
        assert_eq!(&data[..], b"hello");
        assert_eq!(data.as_ptr(), frame[frame.len() - 5..].as_ptr(), "a slice of the frame, not a copy");
    }

    #[test]
    fn device_frames_round_trip() {
        let frames = [
            ShimFrame::Input(b"\x03".to_vec()),
            ShimFrame::Request(ShimRequest::SendText { req: 4, text: "a\nb".into() }),
            ShimFrame::Request(ShimRequest::Subscribe { from_offset: 99 }),
        ];
        for f in frames {
            assert_eq!(ShimFrame::decode_from_device(&f.encode()).unwrap(), f);
        }
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        for buf in [&b""[..], &[1, 0, 0], &[9], &[3, b'{'], &[4, 0, 0, 0, 0, 0, 0, 0, 1]] {
            assert!(ShimFrame::decode_from_shim(buf).is_err(), "{buf:?}");
        }
        assert!(ShimFrame::decode_from_device(&[1, 0]).is_err());
    }
}

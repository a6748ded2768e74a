//! Device daemon ⇄ server, over a WebSocket that the device opens to
//! `/api/v1/device/connect` with its bearer token (so devices work behind NAT).
//!
//! Text frames carry JSON: [`DeviceMessage`] up, [`ServerMessage`] down. Binary frames
//! carry terminal bytes, tagged:
//!
//! | tag | direction | body |
//! |---|---|---|
//! | 1 `OUTPUT` | device → server | `16-byte session uuid, u64 offset, u64 t_micros, bytes` |
//! | 2 `SNAPSHOT` | device → server | `16-byte session uuid, u64 req, u64 offset, u16 cols, u16 rows, bytes` |
//! | 3 `INPUT` | server → device | `16-byte session uuid, keystroke bytes` |
//!
//! On every (re)connection the server's [`ServerMessage::Welcome`] says, per live
//! session, the offset it holds durably; the device resumes each stream from there.

use bytes::Bytes;
use drover_core::{RunEnd, SandboxId, SessionId};
use serde::{Deserialize, Serialize};

use crate::frame::{FrameError, Reader};
use crate::shim::{SessionSpec, Snapshot};

const OUTPUT: u8 = 1;
const SNAPSHOT: u8 = 2;
const INPUT: u8 = 3;

/// A session as the device reports it in its hello.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionReport {
    /// The session this report describes.
    pub session: SessionId,
    /// Bytes of output its shim has recorded.
    pub written: u64,
    /// Whether its program is still running.
    pub running: bool,
}

/// JSON messages from the device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum DeviceMessage {
    /// First message: who the device is and what it runs.
    Hello {
        /// [`crate::PROTOCOL_VERSION`].
        version: u32,
        /// The device's name.
        name: String,
        /// How many sessions it may run at once; 0: as registered on the server.
        slots: u32,
        /// Sessions it knows about (running, or ended but not yet released).
        sessions: Vec<SessionReport>,
        /// What it does with the runs it is given (older devices say nothing).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sandbox: Option<drover_core::confinement::Offer>,
    },
    /// A session's program started.
    Started {
        /// The session whose program started.
        session: SessionId,
        /// Its process (group) id.
        pid: u32,
        /// The working directory it started in.
        cwd: String,
    },
    /// A session ended; all its output up to `final_offset` was sent before this.
    Ended {
        /// The session that ended.
        session: SessionId,
        /// How it ended.
        end: RunEnd,
        /// When the program started (RFC 3339), if it did.
        started_at: Option<String>,
        /// When (RFC 3339); the device's clock.
        ended_at: String,
        /// Total output length.
        final_offset: u64,
    },
    /// Audited text was written to the session's terminal.
    Delivered {
        /// The session the text was written to.
        session: SessionId,
        /// The request id.
        req: u64,
        /// Whether it went as a bracketed paste.
        bracketed_paste: bool,
        /// Output offset at that moment.
        offset: u64,
        /// µs since the session started.
        t_micros: u64,
    },
    /// Audited text or a command could not be carried out.
    Failed {
        /// The session the text or command was for.
        session: SessionId,
        /// The request id, if the command had one.
        req: Option<u64>,
        /// Why.
        reason: String,
    },
    /// The terminal was resized.
    Resized {
        /// The session whose terminal was resized.
        session: SessionId,
        /// µs since start.
        t_micros: u64,
        /// Columns.
        cols: u16,
        /// Rows.
        rows: u16,
    },
    /// A session's recording could not be written on the device.
    RecordingError {
        /// The session whose recording failed.
        session: SessionId,
        /// What failed.
        message: String,
    },
    /// Still here.
    Heartbeat,
    /// New commits in a task run's worktree: evidence of progress.
    Commit {
        /// The task run whose worktree gained the commits.
        session: SessionId,
        /// The new HEAD.
        head: String,
        /// Its subject line.
        subject: String,
    },
    /// A session's model usage so far, read from its harness's own records (the whole
    /// of it each time: a repeated or late report changes nothing).
    Usage {
        /// The run whose usage this is.
        session: SessionId,
        /// What it used.
        usage: UsageReport,
    },
    /// Which of the workspace's skills reached a run, before it started.
    Skills {
        /// The run the skills were given to.
        session: SessionId,
        /// One report per skill.
        skills: Vec<SkillReport>,
    },
    /// The answer to [`ServerMessage::Merge`].
    Merged {
        /// The request id.
        req: u64,
        /// What happened.
        result: MergeResult,
    },
    /// The answer to [`ServerMessage::Prepare`].
    Prepared {
        /// The sandbox.
        sandbox: SandboxId,
        /// Why it could not be set up; None when it was.
        problem: Option<String>,
    },
    /// The answer to [`ServerMessage::CheckRepo`].
    RepoChecked {
        /// The request id.
        req: u64,
        /// Why the clone is not fit for tasks; None when it is.
        problem: Option<String>,
    },
}

impl DeviceMessage {
    /// The session the message speaks for, if it names one: the server checks that it
    /// runs on the sending device before acting on it.
    pub fn session(&self) -> Option<SessionId> {
        match self {
            DeviceMessage::Started { session, .. }
            | DeviceMessage::Ended { session, .. }
            | DeviceMessage::Delivered { session, .. }
            | DeviceMessage::Failed { session, .. }
            | DeviceMessage::Resized { session, .. }
            | DeviceMessage::RecordingError { session, .. }
            | DeviceMessage::Commit { session, .. }
            | DeviceMessage::Usage { session, .. }
            | DeviceMessage::Skills { session, .. } => Some(*session),
            DeviceMessage::Hello { .. }
            | DeviceMessage::Heartbeat
            | DeviceMessage::Merged { .. }
            | DeviceMessage::RepoChecked { .. }
            | DeviceMessage::Prepared { .. } => None,
        }
    }
}

/// A session's usage: tokens, responses, cost (priced on the device from the shipped
/// table), per model, and the route changes seen.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsageReport {
    /// Every token.
    pub tokens: drover_core::spend::Tokens,
    /// Model responses.
    pub turns: u64,
    /// What the priced responses cost (nano-dollars).
    pub cost: drover_core::spend::Cost,
    /// Responses on models with no price (the cost is then unknown).
    pub unpriced_turns: u64,
    /// The model of the latest response.
    pub model: Option<String>,
    /// Tokens and responses per model.
    pub models: Vec<ModelUsage>,
    /// Model switches seen, oldest first.
    pub route_changes: Vec<RouteChangeReport>,
}

/// One model's share of a session's usage.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelUsage {
    /// The model.
    pub model: String,
    /// Its tokens.
    pub tokens: drover_core::spend::Tokens,
    /// Its responses.
    pub turns: u64,
    /// What its priced responses cost (nano-dollars).
    #[serde(default)]
    pub cost: drover_core::spend::Cost,
    /// Its responses with no price.
    #[serde(default)]
    pub unpriced_turns: u64,
}

/// A model switch in a session (`/model`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouteChangeReport {
    /// The model before.
    pub from: String,
    /// The model after.
    pub to: String,
    /// When the first response on the new model was written.
    pub at: Option<String>,
}

/// A skill to install: its name, where the run's harness looks for skills (relative to
/// the sandbox; None when it has no such folder), and its files.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkillBundle {
    /// The skill's name (its folder's name).
    pub name: String,
    /// The harness's skills folder, relative to the sandbox.
    pub folder: Option<String>,
    /// (relative path, content).
    pub files: Vec<(String, String)>,
}

/// Whether a skill reached a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkillReport {
    /// The skill.
    pub name: String,
    /// `installed`, `unsupported` (the harness has no skills folder) or `failed`.
    pub outcome: String,
    /// Where it was installed, or why not.
    pub detail: String,
}

/// What a merge of a task's branch into its base branch came to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum MergeResult {
    /// The base branch now contains the task's branch.
    Merged {
        /// The base branch.
        into: String,
        /// The base branch's new head (a merge commit), or its head as it was when the
        /// branch had already been merged.
        commit: String,
        /// The branch was already in the base branch: nothing was changed.
        already: bool,
    },
    /// Nothing was changed, and why (conflicts, uncommitted work, a moved base…),
    /// worded for whoever must fix it.
    Refused {
        /// Why.
        reason: String,
    },
}

/// JSON messages from the server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ServerMessage {
    /// Accepted; resume each listed session's output from the given offset.
    Welcome {
        /// The device's name as registered.
        name: String,
        /// (session, offset the server holds) for each session it expects output from.
        resume: Vec<(SessionId, u64)>,
        /// Sessions the server no longer considers live: stop them and clean up.
        release: Vec<SessionId>,
    },
    /// Output up to `offset` is stored durably. No longer sent (the device resumes from
    /// the [`ServerMessage::Welcome`]'s offsets); still decoded, so an older server's is
    /// ignored rather than refused.
    Ack {
        /// The session whose output is stored.
        session: SessionId,
        /// How far its output is stored: every byte before this offset.
        offset: u64,
    },
    /// The workspace's own prices (they win over the shipped table); sent after the
    /// welcome and whenever they change. The device prices usage with them.
    Prices {
        /// Model name → price.
        overrides: Vec<(String, drover_core::spend::Price)>,
    },
    /// Start a session.
    Start {
        /// Skills to install into the sandbox before the run starts (task runs).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        skills: Vec<SkillBundle>,
        /// What to run (boxed: it is most of the message's size).
        spec: Box<SessionSpec>,
        /// For a task's run: the git worktree to run it in (created if missing); the
        /// spec's working directory is then the worktree.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        worktree: Option<Worktree>,
    },
    /// Merge a task's branch into its base branch in the device's clone, without
    /// touching the task's worktree; answered with [`DeviceMessage::Merged`].
    Merge {
        /// Request id for the reply.
        req: u64,
        /// The task's worktree (its branch is what is merged).
        worktree: Worktree,
        /// The merge commit's message.
        message: String,
    },
    /// Set a task's sandbox up without starting a run (a stage that starts on Activate):
    /// make its worktree and place its skills; answered with [`DeviceMessage::Prepared`].
    Prepare {
        /// The sandbox.
        sandbox: SandboxId,
        /// The task's worktree.
        worktree: Worktree,
        /// The workspace's skills, placed where the harness looks for them.
        #[serde(default)]
        skills: Vec<SkillBundle>,
    },
    /// Check that a clone is fit for tasks (it exists, is a git repository, has the
    /// base branch); answered with [`DeviceMessage::RepoChecked`].
    CheckRepo {
        /// Request id for the reply.
        req: u64,
        /// The clone's path on the device.
        path: String,
        /// The branch tasks start from, if one is named.
        base: Option<String>,
    },
    /// Remove a task's worktree (its branch is kept).
    RemoveWorktree {
        /// The worktree.
        worktree: Worktree,
        /// Remove even with uncommitted changes (Abandon); otherwise a dirty worktree is kept.
        force: bool,
    },
    /// Send audited text.
    SendText {
        /// The session to type into.
        session: SessionId,
        /// Request id for the reply.
        req: u64,
        /// The text.
        text: String,
    },
    /// Resize a session's terminal.
    Resize {
        /// The session to resize.
        session: SessionId,
        /// Columns.
        cols: u16,
        /// Rows.
        rows: u16,
    },
    /// Stop a session (process group SIGTERM, SIGKILL after the grace).
    Stop {
        /// The session to stop.
        session: SessionId,
        /// Grace before SIGKILL.
        grace_ms: u64,
    },
    /// Ask for a screen snapshot.
    Snapshot {
        /// The session whose screen is wanted.
        session: SessionId,
        /// Request id.
        req: u64,
        /// A viewer's first screen, answered at once: only a re-sync's screen may wait
        /// for the screen's follower to parse a flood first (absent: false).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        first: bool,
    },
    /// How many interactive viewers a session has.
    Viewers {
        /// The session the count is for.
        session: SessionId,
        /// Viewers that can type.
        interactive: u32,
    },
    /// The server holds the whole ended session; the device may clean it up.
    Release {
        /// The ended session the device may clean up.
        session: SessionId,
    },
    /// The connection is refused; the device should not retry until the cause is fixed.
    Refused {
        /// Why.
        reason: String,
    },
}

/// A binary frame on the device link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeviceBinary {
    /// Terminal output from a session.
    Output {
        /// The session that printed it.
        session: SessionId,
        /// Offset of the first byte.
        offset: u64,
        /// µs since start.
        t_micros: u64,
        /// What the program wrote: shared with the frame it was decoded from, so
        /// passing it on (to the live viewers' hub) copies nothing.
        data: Bytes,
    },
    /// A snapshot answering a request.
    Snapshot {
        /// The session whose screen this is.
        session: SessionId,
        /// The snapshot.
        snapshot: Snapshot,
    },
    /// Keystrokes for a session.
    Input {
        /// The session to type into.
        session: SessionId,
        /// Bytes.
        data: Vec<u8>,
    },
}

impl DeviceBinary {
    /// Encodes the frame.
    pub fn encode(&self) -> Vec<u8> {
        match self {
            DeviceBinary::Output { session, offset, t_micros, data } => {
                let mut v = Vec::with_capacity(33 + data.len());
                v.push(OUTPUT);
                v.extend_from_slice(session.uuid().as_bytes());
                v.extend_from_slice(&offset.to_be_bytes());
                v.extend_from_slice(&t_micros.to_be_bytes());
                v.extend_from_slice(data);
                v
            }
            DeviceBinary::Snapshot { session, snapshot: s } => {
                let mut v = vec![SNAPSHOT];
                v.extend_from_slice(session.uuid().as_bytes());
                v.extend_from_slice(&s.req.to_be_bytes());
                v.extend_from_slice(&s.offset.to_be_bytes());
                v.extend_from_slice(&s.cols.to_be_bytes());
                v.extend_from_slice(&s.rows.to_be_bytes());
                v.extend_from_slice(&s.data);
                v
            }
            DeviceBinary::Input { session, data } => {
                let mut v = vec![INPUT];
                v.extend_from_slice(session.uuid().as_bytes());
                v.extend_from_slice(data);
                v
            }
        }
    }

    /// Decodes a binary frame (its output copied out of `buf`).
    pub fn decode(buf: &[u8]) -> Result<DeviceBinary, FrameError> {
        DeviceBinary::decode_shared(&Bytes::copy_from_slice(buf))
    }

    /// Decodes a binary frame as received; output is a slice of `buf`, not a copy.
    pub fn decode_shared(buf: &Bytes) -> Result<DeviceBinary, FrameError> {
        let mut r = Reader::new(buf);
        let tag = r.u8().map_err(|_| FrameError::Empty)?;
        let session = SessionId::from_uuid(r.uuid()?);
        match tag {
            OUTPUT => {
                let (offset, t_micros) = (r.u64()?, r.u64()?);
                let data = buf.slice(buf.len() - r.rest().len()..);
                Ok(DeviceBinary::Output { session, offset, t_micros, data })
            }
            SNAPSHOT => Ok(DeviceBinary::Snapshot {
                session,
                snapshot: Snapshot { req: r.u64()?, offset: r.u64()?, cols: r.u16()?, rows: r.u16()?, data: r.rest().to_vec() },
            }),
            INPUT => Ok(DeviceBinary::Input { session, data: r.rest().to_vec() }),
            tag => Err(FrameError::UnknownTag(tag)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_round_trip() {
        let s = SessionId::new();
        let frames = [
            DeviceBinary::Output { session: s, offset: 1, t_micros: 2, data: Bytes::from_static(&[0, 255]) },
            DeviceBinary::Snapshot { session: s, snapshot: Snapshot { req: 1, offset: 2, cols: 80, rows: 24, data: b"x".to_vec() } },
            DeviceBinary::Input { session: s, data: b"ls\r".to_vec() },
        ];
        for f in frames {
            assert_eq!(DeviceBinary::decode(&f.encode()).unwrap(), f);
        }
    }

    #[test]
    fn output_decoded_as_received_shares_the_frame() {
        let frame = Bytes::from(
            DeviceBinary::Output { session: SessionId::new(), offset: 3, t_micros: 4, data: Bytes::from_static(b"hello") }.encode(),
        );
        let Ok(DeviceBinary::Output { data, offset: 3, t_micros: 4, .. }) = DeviceBinary::decode_shared(&frame) else {
            panic!("not output")
        };
        assert_eq!(&data[..], b"hello");
        assert_eq!(data.as_ptr(), frame[frame.len() - 5..].as_ptr(), "a slice of the frame, not a copy");
    }

    #[test]
    fn a_first_screen_is_asked_for_as_such_and_older_peers_read_as_before() {
        let session = SessionId::new();
        let json = |m: &ServerMessage| serde_json::to_value(m).unwrap();
        let first = ServerMessage::Snapshot { session, req: 3, first: true };
        assert_eq!(json(&first)["first"], true);
        assert_eq!(serde_json::from_value::<ServerMessage>(json(&first)).unwrap(), first);
        // A re-sync's request is what older devices know: no `first` at all.
        let resync = json(&ServerMessage::Snapshot { session, req: 4, first: false });
        assert!(resync.get("first").is_none(), "{resync}");
        // And a request from an older server, without it, is a re-sync's.
        let old = serde_json::json!({ "type": "snapshot", "session": session, "req": 5 });
        assert_eq!(serde_json::from_value::<ServerMessage>(old).unwrap(), ServerMessage::Snapshot { session, req: 5, first: false });
    }

    #[test]
    fn malformed_binary_is_an_error() {
        for buf in [&b""[..], &[1, 2, 3], &[7; 40]] {
            assert!(DeviceBinary::decode(buf).is_err());
        }
    }

    #[test]
    fn json_messages_are_tagged() {
        let m = DeviceMessage::Heartbeat;
        assert_eq!(serde_json::to_string(&m).unwrap(), r#"{"type":"heartbeat"}"#);
        let back: ServerMessage =
            serde_json::from_str(r#"{"type":"ack","session":"ses_0190b8c2d7e87c3d8a0a2d9f3e4b5c6d","offset":5}"#).unwrap();
        assert!(matches!(back, ServerMessage::Ack { offset: 5, .. }));
    }
}

/// A task's git worktree on a device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Worktree {
    /// The device's clone of the repository.
    pub repo_path: String,
    /// The worktree's folder name under the device's worktree directory.
    pub dir: String,
    /// The task's branch (created from `base`, or the clone's HEAD, the first time).
    pub branch: String,
    /// The branch the task starts from and merges into; None: the branch the clone has
    /// checked out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<String>,
}

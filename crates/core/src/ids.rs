//! Typed identifiers. Each is a UUIDv7 shown with a short type prefix (`ses_…`), so an id
//! pasted into the wrong command is rejected with a message naming the expected kind.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use uuid::Uuid;

/// Why a string is not a valid id of the expected kind.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    /// The string does not start with the kind's prefix.
    #[error("`{value}` is not a {kind} id: {kind} ids start with `{prefix}_`")]
    WrongPrefix {
        /// The kind of id that was expected, e.g. "session".
        kind: &'static str,
        /// The prefix that was expected, e.g. "ses".
        prefix: &'static str,
        /// What was given (shortened).
        value: String,
    },
    /// The part after the prefix is not 32 hex digits.
    #[error("`{value}` is not a valid {kind} id: expected `{prefix}_` and 32 hex digits")]
    Malformed {
        /// The kind of id that was expected.
        kind: &'static str,
        /// The prefix that was expected.
        prefix: &'static str,
        /// What was given (shortened).
        value: String,
    },
}

fn shorten(s: &str) -> String {
    s.chars().take(64).collect()
}

macro_rules! typed_id {
    ($(#[$doc:meta])* $name:ident, $prefix:literal, $kind:literal) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(Uuid);

        impl $name {
            /// The prefix this kind of id is shown with.
            pub const PREFIX: &'static str = $prefix;

            /// A new, time-ordered id.
            pub fn new() -> Self {
                Self(Uuid::now_v7())
            }

            /// Wraps an existing UUID.
            pub fn from_uuid(uuid: Uuid) -> Self {
                Self(uuid)
            }

            /// The UUID inside.
            pub fn uuid(&self) -> Uuid {
                self.0
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self::new()
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}_{}", $prefix, self.0.simple())
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(self, f)
            }
        }

        impl FromStr for $name {
            type Err = IdError;

            fn from_str(s: &str) -> Result<Self, IdError> {
                let rest = s
                    .strip_prefix(concat!($prefix, "_"))
                    .ok_or_else(|| IdError::WrongPrefix {
                        kind: $kind,
                        prefix: $prefix,
                        value: shorten(s),
                    })?;
                if rest.len() != 32 || !rest.bytes().all(|b| b.is_ascii_hexdigit()) {
                    return Err(IdError::Malformed { kind: $kind, prefix: $prefix, value: shorten(s) });
                }
                Uuid::parse_str(rest)
                    .map(Self)
                    .map_err(|_| IdError::Malformed { kind: $kind, prefix: $prefix, value: shorten(s) })
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                s.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}

typed_id!(
    /// A session: one harness process in a PTY (a run).
    SessionId, "ses", "session"
);
typed_id!(
    /// A sandbox: the durable workspace a session runs in.
    SandboxId, "sbx", "sandbox"
);
typed_id!(
    /// A registered device (machine running the device daemon).
    DeviceId, "dev", "device"
);
typed_id!(
    /// A workspace: a team's space.
    WorkspaceId, "wsp", "workspace"
);
typed_id!(
    /// A member: a human with a role in a workspace.
    MemberId, "mbr", "member"
);
typed_id!(
    /// One line of the activity record.
    EventId, "evt", "event"
);
typed_id!(
    /// An API or device credential (stored hashed).
    TokenId, "tok", "token"
);
typed_id!(
    /// A task: one unit of work filed in plain language.
    TaskId, "tsk", "task"
);
typed_id!(
    /// An agent: a registered principal that runs a harness.
    AgentId, "agt", "agent"
);
typed_id!(
    /// A repository devices check worktrees out of.
    RepoId, "rep", "repo"
);
typed_id!(
    /// A blocker or a question filed on a task.
    NoteId, "not", "note"
);
typed_id!(
    /// Something a run waits on a person for: a held tool call, a finished turn, a guess.
    AttentionId, "att", "attention item"
);
typed_id!(
    /// A webhook endpoint a workspace registered.
    WebhookId, "whk", "webhook"
);
typed_id!(
    /// One webhook message to one endpoint: its `webhook-id` and idempotency key.
    MessageId, "msg", "webhook message"
);
typed_id!(
    /// An invitation to join a workspace (its code is stored hashed).
    InviteId, "inv", "invite"
);
typed_id!(
    /// A browser's Web Push subscription, registered by a member.
    PushSubscriptionId, "psb", "push subscription"
);
typed_id!(
    /// One Web Push message to one subscription.
    PushMessageId, "psh", "push message"
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_through_display_and_parse() {
        let id = SessionId::new();
        let shown = id.to_string();
        assert!(shown.starts_with("ses_"));
        assert_eq!(shown.len(), 4 + 32);
        assert_eq!(shown.parse::<SessionId>().unwrap(), id);
    }

    #[test]
    fn wrong_prefix_names_the_expected_kind() {
        let sbx = SandboxId::new().to_string();
        let err = sbx.parse::<SessionId>().unwrap_err();
        assert!(matches!(err, IdError::WrongPrefix { kind: "session", .. }));
        assert!(err.to_string().contains("session ids start with `ses_`"));
    }

    #[test]
    fn malformed_ids_are_rejected() {
        for bad in ["ses_", "ses_123", "ses_zz000000000000000000000000000000", "ses_0123456789abcdef0123456789abcdef0"] {
            assert!(matches!(bad.parse::<SessionId>(), Err(IdError::Malformed { .. })), "{bad}");
        }
    }

    #[test]
    fn ids_are_time_ordered() {
        let a = SessionId::new();
        let b = SessionId::new();
        assert!(a < b);
    }
}

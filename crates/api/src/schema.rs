//! OpenAPI schemas of the core and protocol types the bodies carry: those crates stay free
//! of the OpenAPI dependency, so each type here stands in for one of theirs
//! (`#[schema(value_type = …)]`), built from the real type's own word lists where it has
//! them, and checked against its serialised form in this file's tests.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};
use utoipa::openapi::RefOr;
use utoipa::{PartialSchema, ToSchema};

/// A string schema that is one of `words`, described by `doc`.
fn words(doc: &str, words: impl IntoIterator<Item = &'static str>) -> RefOr<Schema> {
    let values: Vec<&str> = words.into_iter().collect();
    ObjectBuilder::new().schema_type(Type::String).enum_values(Some(values)).description(Some(doc)).into()
}

/// Stands in for [`drover_core::Outcome`]: its words, from `Outcome::ALL`.
pub struct Outcome;

impl PartialSchema for Outcome {
    fn schema() -> RefOr<Schema> {
        words(
            "A run's outcome: Drover's answer to \"did this run finish its work?\" (`GET /api/v1/outcomes` explains each).",
            drover_core::Outcome::ALL.map(drover_core::Outcome::as_str),
        )
    }
}

impl ToSchema for Outcome {}

/// Stands in for [`drover_core::SandboxState`]: its words, from `SandboxState::ALL`.
pub struct SandboxState;

impl PartialSchema for SandboxState {
    fn schema() -> RefOr<Schema> {
        words("A sandbox's own lifecycle state (distinct from a run's outcome).", drover_core::SandboxState::ALL.map(|s| s.as_str()))
    }
}

impl ToSchema for SandboxState {}

/// Declares stand-ins for core's typed ids: strings of the id's prefix, `_`, and a UUID.
macro_rules! id_schemas {
    ($($name:ident),* $(,)?) => {$(
        #[doc = concat!("Stands in for [`drover_core::", stringify!($name), "`]: its prefix, `_`, a UUID in 32 hex digits.")]
        pub struct $name;

        impl PartialSchema for $name {
            fn schema() -> RefOr<Schema> {
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .pattern(Some(format!("^{}_[0-9a-f]{{32}}$", drover_core::$name::PREFIX)))
                    .into()
            }
        }

        impl ToSchema for $name {
            fn name() -> Cow<'static, str> {
                Cow::Borrowed(stringify!($name))
            }
        }
    )*};
}

id_schemas!(SessionId, SandboxId, DeviceId, MemberId, InviteId, TokenId, TaskId, WebhookId, MessageId);

/// Stands in for [`drover_core::confinement::Offer`]: what a device does with its runs.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum SandboxOffer {
    /// Every run is sandboxed by `mechanism` (unless an owner or admin starts one unconfined).
    Sandboxed {
        /// How, as people read it (e.g. "Landlock ABI 7, child subreaper, rlimits").
        mechanism: String,
    },
    /// Its owner started it `--unsandboxed`: runs reach everything the device's user can.
    Unsandboxed {
        /// What the kernel would have offered (or why it offers nothing).
        kernel: String,
    },
    /// The kernel cannot sandbox and the owner did not allow unsandboxed runs: it refuses
    /// every run.
    Unavailable {
        /// Why the kernel cannot sandbox, for the device's owner.
        reason: String,
    },
}

/// Stands in for [`drover_core::spend::Tokens`]: token counts split the way they are priced.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Tokens {
    /// Prompt tokens read uncached.
    pub input: u64,
    /// Tokens generated (reasoning included).
    pub output: u64,
    /// Prompt tokens written to a 5-minute cache.
    pub cache_write_5m: u64,
    /// Prompt tokens written to a 1-hour cache.
    pub cache_write_1h: u64,
    /// Prompt tokens read from a cache.
    pub cache_read: u64,
}

/// Stands in for [`drover_core::spend::Cost`]: what priced responses cost, nano-dollars.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
pub struct Cost {
    /// Generating: uncached input, output and cache writes.
    pub generation: u64,
    /// Reading from caches.
    pub cache_read: u64,
}

/// Stands in for [`drover_protocol::device::ModelUsage`]: one model's share of a run's usage.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ModelUsage {
    /// The model id, as the harness reported it.
    pub model: String,
    /// Tokens of this model's responses.
    pub tokens: Tokens,
    /// How many responses this model gave.
    pub turns: u64,
    /// What its priced responses cost.
    #[serde(default)]
    pub cost: Cost,
    /// How many of its responses had no price.
    #[serde(default)]
    pub unpriced_turns: u64,
}

/// Stands in for [`drover_protocol::device::SkillReport`]: whether a skill reached a run.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SkillReport {
    /// The skill's name.
    pub name: String,
    /// `installed`, `unsupported` (the harness has no skills folder) or `failed`.
    pub outcome: String,
    /// Where it was installed, or why not.
    pub detail: String,
}

/// Stands in for [`drover_protocol::viewer::ViewerEvent`]: the JSON text frames of the
/// terminal WebSocket.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ViewerEvent {
    /// The first message: which session, its size, whether typing is ignored.
    Hello {
        /// The session joined.
        #[schema(value_type = SessionId)]
        session: String,
        /// Terminal columns now.
        cols: u16,
        /// Terminal rows now.
        rows: u16,
        /// Whether this viewer's keystrokes are ignored.
        read_only: bool,
    },
    /// Another viewer resized the terminal.
    Resize {
        /// Terminal columns now.
        cols: u16,
        /// Terminal rows now.
        rows: u16,
    },
    /// The viewer fell behind; a fresh snapshot follows.
    Resync,
    /// The session ended; the socket closes after this.
    Ended {
        /// How it ended.
        #[schema(value_type = Outcome)]
        outcome: drover_core::Outcome,
        /// The exit code, when the process exited.
        exit_code: Option<i32>,
        /// Why it ended, for a person.
        reason: Option<String>,
    },
    /// Something went wrong for this viewer.
    Error {
        /// What went wrong, for a person.
        message: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;
    use std::collections::BTreeSet;

    /// The keys of `v` serialised.
    fn keys<T: Serialize>(v: &T) -> BTreeSet<String> {
        serde_json::to_value(v).expect("serialises").as_object().expect("an object").keys().cloned().collect()
    }

    /// The properties a schema declares.
    fn props(schema: RefOr<Schema>) -> BTreeSet<String> {
        let v = serde_json::to_value(schema).expect("serialises");
        v["properties"].as_object().expect("properties").keys().cloned().collect()
    }

    /// The string values a schema allows.
    fn allowed(schema: RefOr<Schema>) -> Vec<String> {
        let v = serde_json::to_value(schema).expect("serialises");
        v["enum"].as_array().expect("enum").iter().map(|w| w.as_str().expect("a word").to_string()).collect()
    }

    #[test]
    fn word_schemas_allow_exactly_what_the_core_types_serialise_to() {
        let outcomes: Vec<String> =
            drover_core::Outcome::ALL.iter().map(|o| serde_json::to_value(o).unwrap().as_str().unwrap().into()).collect();
        assert_eq!(allowed(Outcome::schema()), outcomes);
        let states: Vec<String> =
            drover_core::SandboxState::ALL.iter().map(|s| serde_json::to_value(s).unwrap().as_str().unwrap().into()).collect();
        assert_eq!(allowed(SandboxState::schema()), states);
    }

    #[test]
    fn struct_stand_ins_have_the_real_types_fields() {
        let tokens = drover_core::spend::Tokens::default();
        assert_eq!(props(Tokens::schema()), keys(&tokens));
        assert_eq!(props(Cost::schema()), keys(&drover_core::spend::Cost::default()));
        let usage = drover_protocol::device::ModelUsage {
            model: "m".into(),
            tokens,
            turns: 1,
            cost: drover_core::spend::Cost::default(),
            unpriced_turns: 0,
        };
        assert_eq!(props(ModelUsage::schema()), keys(&usage));
        let skill = drover_protocol::device::SkillReport { name: "s".into(), outcome: "installed".into(), detail: String::new() };
        assert_eq!(props(SkillReport::schema()), keys(&skill));
    }

    #[test]
    fn the_offer_stand_in_serialises_like_the_real_offer() {
        use drover_core::confinement::Offer;
        let pairs = [
            (Offer::Sandboxed { mechanism: "m".into() }, SandboxOffer::Sandboxed { mechanism: "m".into() }),
            (Offer::Unsandboxed { kernel: "k".into() }, SandboxOffer::Unsandboxed { kernel: "k".into() }),
            (Offer::Unavailable { reason: "r".into() }, SandboxOffer::Unavailable { reason: "r".into() }),
        ];
        for (real, stand_in) in pairs {
            assert_eq!(serde_json::to_value(&real).unwrap(), serde_json::to_value(&stand_in).unwrap());
        }
        let v: Value = serde_json::to_value(SandboxOffer::schema()).unwrap();
        assert_eq!(v["oneOf"].as_array().map(Vec::len), Some(3), "{v}");
    }

    #[test]
    fn the_viewer_event_stand_in_serialises_like_the_real_one() {
        use drover_protocol::viewer::ViewerEvent as Real;
        let id = drover_core::SessionId::new();
        let pairs = [
            (
                Real::Hello { session: id, cols: 80, rows: 24, read_only: true },
                ViewerEvent::Hello { session: id.to_string(), cols: 80, rows: 24, read_only: true },
            ),
            (Real::Resize { cols: 1, rows: 2 }, ViewerEvent::Resize { cols: 1, rows: 2 }),
            (Real::Resync, ViewerEvent::Resync),
            (
                Real::Ended { outcome: drover_core::Outcome::Lost, exit_code: None, reason: Some("r".into()) },
                ViewerEvent::Ended { outcome: drover_core::Outcome::Lost, exit_code: None, reason: Some("r".into()) },
            ),
            (Real::Error { message: "m".into() }, ViewerEvent::Error { message: "m".into() }),
        ];
        for (real, stand_in) in pairs {
            assert_eq!(serde_json::to_value(&real).unwrap(), serde_json::to_value(&stand_in).unwrap());
        }
    }

    #[test]
    fn id_schemas_match_real_ids() {
        let id = drover_core::SessionId::new().to_string();
        let v = serde_json::to_value(SessionId::schema()).unwrap();
        let pattern = v["pattern"].as_str().unwrap();
        assert_eq!(pattern, "^ses_[0-9a-f]{32}$");
        let hex = id.strip_prefix("ses_").expect("the prefix");
        assert!(hex.len() == 32 && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)), "{id}");
    }
}

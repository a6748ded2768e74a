//! The outcome words and their explanations, as the API serves them once
//! (`GET /api/v1/outcomes`) for the web app and the CLI to show instead of local copies.

use drover_core::Outcome;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// What one outcome word means, for a badge, its hover text and whether to show a run as live.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct OutcomeWords {
    /// The word itself, as every body carrying an outcome spells it.
    #[schema(value_type = crate::schema::Outcome)]
    pub outcome: Outcome,
    /// Whether a run with this outcome has not ended yet (its terminal can be joined).
    pub live: bool,
    /// The explanation shown when hovering its badge and by `drover session show`.
    pub explanation: String,
}

impl From<Outcome> for OutcomeWords {
    fn from(outcome: Outcome) -> Self {
        OutcomeWords { outcome, live: outcome.is_live(), explanation: outcome.meaning().to_string() }
    }
}

/// `GET /api/v1/outcomes`: every outcome word, in the order the design lists them.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct OutcomeGuide {
    /// One entry per outcome.
    pub outcomes: Vec<OutcomeWords>,
}

impl OutcomeGuide {
    /// The guide for every outcome core knows.
    pub fn new() -> Self {
        OutcomeGuide { outcomes: Outcome::ALL.into_iter().map(OutcomeWords::from).collect() }
    }
}

impl Default for OutcomeGuide {
    fn default() -> Self {
        OutcomeGuide::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_guide_has_each_outcome_once_with_core_s_words() {
        let guide = OutcomeGuide::new();
        assert_eq!(guide.outcomes.iter().map(|w| w.outcome).collect::<Vec<_>>(), Outcome::ALL.to_vec());
        for w in &guide.outcomes {
            assert_eq!(w.live, matches!(w.outcome, Outcome::Starting | Outcome::Running), "{w:?}");
            assert_eq!(w.explanation, w.outcome.meaning());
        }
        let json = serde_json::to_value(&guide).unwrap();
        assert_eq!(json["outcomes"][5], serde_json::json!({"outcome": "failed", "live": false, "explanation": Outcome::Failed.meaning()}));
    }
}

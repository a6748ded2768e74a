//! Spend caps, prices and spend reports.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// `PUT /api/v1/spend/cap` and `PUT /api/v1/tasks/{id}/spend-cap`: a cap in USD, or null
/// for none.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SpendCap {
    /// The cap, USD (the workspace's per calendar month, a task's over its life).
    pub usd: Option<f64>,
}

/// A model's price in USD per million tokens, as people write prices.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct PriceView {
    /// The model id (or the start of dated ids: `claude-sonnet-4-5` prices `claude-sonnet-4-5-20250929`).
    pub model: String,
    /// USD per million uncached input tokens.
    pub input: f64,
    /// USD per million output tokens.
    pub output: f64,
    /// Cache writes, 5-minute (default: the input price).
    pub cache_write_5m: Option<f64>,
    /// Cache writes, 1-hour (default: the 5-minute price).
    pub cache_write_1h: Option<f64>,
    /// Cache reads (default: the input price).
    pub cache_read: Option<f64>,
    /// Above this many prompt tokens in one response, `long` prices apply to all of it.
    #[serde(default)]
    pub long_context_above: Option<u64>,
    /// The long-context prices: [input, output, cache write 5 m, cache write 1 h, cache read].
    #[serde(default)]
    pub long: Option<[f64; 5]>,
}

/// `GET /api/v1/prices` and `PUT /api/v1/prices`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Prices {
    /// The workspace's own prices (they win over the shipped ones).
    pub overrides: Vec<PriceView>,
    /// The shipped table (read-only).
    #[serde(default)]
    pub shipped: Vec<PriceView>,
}

/// One row of the spend view.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SpendRowView {
    /// The agent, model or day (`2026-11-30`).
    pub key: String,
    /// USD of priced responses.
    pub usd: f64,
    /// True when some responses were on models with no price (the cost is then a floor).
    pub unknown: bool,
    /// Model responses.
    pub turns: u64,
    /// Tokens of every kind, added up.
    pub tokens: u64,
    /// How many runs the row's spend came from.
    pub runs: u64,
}

/// `GET /api/v1/spend`: the workspace's spend by agent, model and day.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SpendReport {
    /// From when (RFC 3339).
    pub since: String,
    /// The workspace's monthly cap, USD.
    pub cap_usd: Option<f64>,
    /// What this calendar month's runs cost, USD.
    pub month_usd: f64,
    /// By agent, dearest first.
    pub by_agent: Vec<SpendRowView>,
    /// By model, most tokens first.
    pub by_model: Vec<SpendRowView>,
    /// By day, oldest first.
    pub by_day: Vec<SpendRowView>,
}

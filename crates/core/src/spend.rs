//! Model spend, exactly: token counts split the way providers price them, a price table
//! (the shipped one, which a workspace can override), and cost in whole nano-dollars, so
//! sums never drift. A turn on a model with no price is counted in tokens and makes the
//! cost *unknown*: never a guessed number.

use serde::{Deserialize, Serialize};

/// Token counts of one or more model responses, split the way they are priced.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
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

impl Tokens {
    /// All prompt tokens: uncached, written to a cache, read from one.
    pub fn prompt(&self) -> u64 {
        self.input.saturating_add(self.cache_write_5m).saturating_add(self.cache_write_1h).saturating_add(self.cache_read)
    }

    /// Every token.
    pub fn total(&self) -> u64 {
        self.prompt().saturating_add(self.output)
    }

    /// The sum of two counts.
    pub fn plus(self, o: Tokens) -> Tokens {
        Tokens {
            input: self.input.saturating_add(o.input),
            output: self.output.saturating_add(o.output),
            cache_write_5m: self.cache_write_5m.saturating_add(o.cache_write_5m),
            cache_write_1h: self.cache_write_1h.saturating_add(o.cache_write_1h),
            cache_read: self.cache_read.saturating_add(o.cache_read),
        }
    }

    /// `self` less `o` (counts never go below zero).
    pub fn minus(self, o: Tokens) -> Tokens {
        Tokens {
            input: self.input.saturating_sub(o.input),
            output: self.output.saturating_sub(o.output),
            cache_write_5m: self.cache_write_5m.saturating_sub(o.cache_write_5m),
            cache_write_1h: self.cache_write_1h.saturating_sub(o.cache_write_1h),
            cache_read: self.cache_read.saturating_sub(o.cache_read),
        }
    }
}

/// Cache-hit percentage: cache reads ÷ all prompt tokens (None without prompt tokens).
pub fn cache_hit_pct(t: &Tokens) -> Option<f64> {
    let prompt = t.prompt();
    (prompt > 0).then(|| t.cache_read as f64 * 100.0 / prompt as f64)
}

/// Prices of one model in nano-dollars per token (= USD per million tokens × 1000), so
/// every published price is a whole number and costs add up exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rates {
    /// Uncached prompt tokens.
    pub input: u64,
    /// Generated tokens.
    pub output: u64,
    /// Prompt tokens written to a 5-minute cache (at the input rate when not priced).
    pub cache_write_5m: Option<u64>,
    /// Prompt tokens written to a 1-hour cache.
    pub cache_write_1h: Option<u64>,
    /// Prompt tokens read from a cache (at the input rate when not priced).
    pub cache_read: Option<u64>,
}

/// A model's prices, with a dearer tier for long prompts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Price {
    /// The usual rates.
    pub base: Rates,
    /// Above this many prompt tokens in one turn, `long` applies to the whole turn.
    pub long_context: Option<(u64, Rates)>,
}

/// What a turn (or a sum of turns) cost, in nano-dollars.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cost {
    /// Generating: uncached input, output and cache writes.
    pub generation: u64,
    /// Reading from caches.
    pub cache_read: u64,
}

impl Cost {
    /// Both parts.
    pub fn total(&self) -> u64 {
        self.generation.saturating_add(self.cache_read)
    }

    /// The sum of two costs.
    pub fn plus(self, o: Cost) -> Cost {
        Cost { generation: self.generation.saturating_add(o.generation), cache_read: self.cache_read.saturating_add(o.cache_read) }
    }

    /// `self` less `o`.
    pub fn minus(self, o: Cost) -> Cost {
        Cost { generation: self.generation.saturating_sub(o.generation), cache_read: self.cache_read.saturating_sub(o.cache_read) }
    }
}

/// Nano-dollars as US dollars (for display).
pub fn usd(nano: u64) -> f64 {
    nano as f64 / 1e9
}

/// Nano-dollars for people, rounded half up in integers: to the cent from $1
/// (`$5.01`), else to a hundredth of a cent (`$0.0098`).
pub fn format_usd(nano: u64) -> String {
    let (unit, digits) = if nano >= 1_000_000_000 { (10_000_000, 2) } else { (100_000, 4) };
    let n = (nano + unit / 2) / unit;
    let scale = 10u64.pow(digits);
    format!("${}.{:0width$}", n / scale, n % scale, width = digits as usize)
}

impl Price {
    /// The cost of one turn with `t` tokens.
    pub fn turn(&self, t: &Tokens) -> Cost {
        let rates = match self.long_context {
            Some((threshold, long)) if t.prompt() > threshold => long,
            _ => self.base,
        };
        // Saturating: counts come from files anyone could write.
        let generation = [
            t.input.saturating_mul(rates.input),
            t.output.saturating_mul(rates.output),
            t.cache_write_5m.saturating_mul(rates.cache_write_5m.unwrap_or(rates.input)),
            t.cache_write_1h.saturating_mul(rates.cache_write_1h.or(rates.cache_write_5m).unwrap_or(rates.input)),
        ]
        .into_iter()
        .fold(0u64, u64::saturating_add);
        Cost { generation, cache_read: t.cache_read.saturating_mul(rates.cache_read.unwrap_or(rates.input)) }
    }
}

/// Rates from USD per million tokens given in thousandths (3.75 → 3750).
const fn rates(input: u64, output: u64, write_5m: u64, write_1h: u64, read: u64) -> Rates {
    Rates { input, output, cache_write_5m: Some(write_5m), cache_write_1h: Some(write_1h), cache_read: Some(read) }
}

/// OpenAI-style rates: no cache-write price, a cache-read price.
const fn openai(input: u64, output: u64, read: u64) -> Rates {
    Rates { input, output, cache_write_5m: None, cache_write_1h: None, cache_read: Some(read) }
}

const SONNET: Price =
    Price { base: rates(3_000, 15_000, 3_750, 6_000, 300), long_context: Some((200_000, rates(6_000, 22_500, 7_500, 12_000, 600))) };
const OPUS: Price = Price { base: rates(5_000, 25_000, 6_250, 10_000, 500), long_context: None };
const OPUS_41: Price = Price { base: rates(15_000, 75_000, 18_750, 30_000, 1_500), long_context: None };
const HAIKU: Price = Price { base: rates(1_000, 5_000, 1_250, 2_000, 100), long_context: None };
const GPT5: Price = Price { base: openai(1_250, 10_000, 125), long_context: None };
const GPT5_MINI: Price = Price { base: openai(250, 2_000, 25), long_context: None };

/// The price table the project ships (HARNESSES.md, from LiteLLM's public list, 2026).
/// A name matches a model id equal to it, or it followed by a date or `-latest`
/// (`claude-sonnet-4-5-20250929`, `gpt-5-2025-08-07`): never another model that merely
/// starts the same (`gpt-5-nano` is not `gpt-5`).
pub const SHIPPED: &[(&str, Price)] = &[
    ("claude-sonnet-4-5", SONNET),
    ("claude-sonnet-4-6", SONNET),
    ("claude-opus-4-5", OPUS),
    ("claude-opus-4-6", OPUS),
    ("claude-opus-4-7", OPUS),
    ("claude-opus-4-1", OPUS_41),
    ("claude-haiku-4-5", HAIKU),
    ("gpt-5", GPT5),
    ("gpt-5-codex", GPT5),
    ("gpt-5.1-codex", GPT5),
    ("gpt-5-mini", GPT5_MINI),
    ("gpt-5.1-codex-mini", GPT5_MINI),
];

/// Prices to look models up in: a workspace's overrides before the shipped table.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PriceTable {
    /// The workspace's own prices (model name → price); they win over the shipped ones.
    pub overrides: Vec<(String, Price)>,
}

fn matches(name: &str, model: &str) -> bool {
    let Some(rest) = model.strip_prefix(name) else { return false };
    let dated = |d: &str| {
        (d.len() == 8 && d.bytes().all(|b| b.is_ascii_digit()))
            || (d.len() == 10 && d.split('-').map(str::len).eq([4, 2, 2]) && d.bytes().all(|b| b.is_ascii_digit() || b == b'-'))
    };
    match rest.strip_prefix('-') {
        None => rest.is_empty(),
        Some(suffix) => suffix == "latest" || dated(suffix),
    }
}

/// The model id without a provider prefix (`anthropic/claude-…`, `openai/gpt-5`).
fn bare(model: &str) -> &str {
    model.rsplit_once('/').map(|(_, m)| m).unwrap_or(model)
}

impl PriceTable {
    /// The price of `model`, if the table knows it.
    pub fn price(&self, model: &str) -> Option<Price> {
        let model = bare(model.trim());
        // A workspace's price wins over a shipped one of the same name.
        let own = self.overrides.iter().map(|(n, p)| (n.as_str(), *p, 1));
        let shipped = SHIPPED.iter().map(|(n, p)| (*n, *p, 0));
        own.chain(shipped).filter(|(n, _, _)| matches(n, model)).max_by_key(|(n, _, own)| (n.len(), *own)).map(|(_, p, _)| p)
    }
}

/// Spend of a run, sandbox, task or workspace: tokens, turns and cost.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Spend {
    /// Every token.
    pub tokens: Tokens,
    /// Model responses.
    pub turns: u64,
    /// What the priced turns cost.
    pub cost: Cost,
    /// Turns on models with no price: while any, the total cost is unknown.
    pub unpriced_turns: u64,
}

impl Spend {
    /// One turn on `model` with `t` tokens, priced from `table`.
    pub fn turn(table: &PriceTable, model: &str, t: Tokens) -> Spend {
        match table.price(model) {
            Some(p) => Spend { tokens: t, turns: 1, cost: p.turn(&t), unpriced_turns: 0 },
            None => Spend { tokens: t, turns: 1, cost: Cost::default(), unpriced_turns: 1 },
        }
    }

    /// The sum of two spends.
    pub fn plus(self, o: Spend) -> Spend {
        Spend {
            tokens: self.tokens.plus(o.tokens),
            turns: self.turns.saturating_add(o.turns),
            cost: self.cost.plus(o.cost),
            unpriced_turns: self.unpriced_turns.saturating_add(o.unpriced_turns),
        }
    }

    /// `self` less `o` (a response's copy replaced by a fuller one).
    pub fn minus(self, o: Spend) -> Spend {
        Spend {
            tokens: self.tokens.minus(o.tokens),
            turns: self.turns.saturating_sub(o.turns),
            cost: self.cost.minus(o.cost),
            unpriced_turns: self.unpriced_turns.saturating_sub(o.unpriced_turns),
        }
    }

    /// The cost in nano-dollars, or None ("unknown") when a turn had no price.
    pub fn known_cost(&self) -> Option<Cost> {
        (self.unpriced_turns == 0).then_some(self.cost)
    }
}

/// Which spend cap a run's spending crossed, if any.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CapCrossed {
    /// The task's lifetime cap.
    Task {
        /// The cap, nano-dollars.
        cap: u64,
        /// What the task's runs have cost.
        spent: u64,
    },
    /// The workspace's monthly cap.
    Workspace {
        /// The cap, nano-dollars.
        cap: u64,
        /// What the workspace's runs cost this month.
        spent: u64,
    },
}

impl CapCrossed {
    /// The run's reason for ending ("spend cap: …").
    pub fn reason(&self) -> String {
        match self {
            CapCrossed::Task { cap, spent } => {
                format!("spend cap: the task has cost {} of its {} cap", format_usd(*spent), format_usd(*cap))
            }
            CapCrossed::Workspace { cap, spent } => {
                format!("spend cap: the workspace has spent {} this month of its {} cap", format_usd(*spent), format_usd(*cap))
            }
        }
    }
}

/// Whether spending crossed a cap: the task's first, then the workspace's. Costs of
/// responses on unpriced models are not in `spent` (a cap is never crossed by a guess).
pub fn cap_crossed(task: Option<(u64, u64)>, workspace: Option<(u64, u64)>) -> Option<CapCrossed> {
    match (task, workspace) {
        (Some((cap, spent)), _) if spent >= cap => Some(CapCrossed::Task { cap, spent }),
        (_, Some((cap, spent))) if spent >= cap => Some(CapCrossed::Workspace { cap, spent }),
        _ => None,
    }
}

/// USD (as people type it) in nano-dollars; None unless it is a finite amount ≥ 0.
pub fn nano_from_usd(usd: f64) -> Option<u64> {
    (usd.is_finite() && (0.0..=1e9).contains(&usd)).then(|| (usd * 1e9).round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_are_crossed_at_or_above_and_the_task_is_named_first() {
        assert_eq!(cap_crossed(Some((100, 99)), Some((1000, 10))), None);
        assert_eq!(cap_crossed(Some((100, 100)), Some((1000, 2000))), Some(CapCrossed::Task { cap: 100, spent: 100 }));
        assert_eq!(cap_crossed(None, Some((1000, 2000))), Some(CapCrossed::Workspace { cap: 1000, spent: 2000 }));
        assert_eq!(cap_crossed(None, None), None);
        assert_eq!(
            CapCrossed::Task { cap: 5_000_000_000, spent: 5_010_000_000 }.reason(),
            "spend cap: the task has cost $5.01 of its $5.00 cap"
        );
        assert_eq!(
            CapCrossed::Workspace { cap: 25_000_000, spent: 33_250_000 }.reason(),
            "spend cap: the workspace has spent $0.0333 this month of its $0.0250 cap"
        );
        assert_eq!((format_usd(9_750_000), format_usd(0), format_usd(1_234_567_890)), ("$0.0098".into(), "$0.0000".into(), "$1.23".into()));
        assert_eq!(nano_from_usd(0.5), Some(500_000_000));
        assert_eq!(nano_from_usd(-1.0), None);
        assert_eq!(nano_from_usd(f64::NAN), None);
    }

    fn t(input: u64, output: u64, w5: u64, w1: u64, read: u64) -> Tokens {
        Tokens { input, output, cache_write_5m: w5, cache_write_1h: w1, cache_read: read }
    }

    #[test]
    fn sonnet_turns_cost_exactly_by_hand() {
        let table = PriceTable::default();
        // 1,000 in × $3/M + 500 out × $15/M + 2,000 5m-writes × $3.75/M + 100 1h-writes × $6/M
        // = $0.003 + $0.0075 + $0.0075 + $0.0006 = $0.0186; 10,000 reads × $0.30/M = $0.003.
        let s = Spend::turn(&table, "claude-sonnet-4-5-20250929", t(1_000, 500, 2_000, 100, 10_000));
        assert_eq!(s.known_cost(), Some(Cost { generation: 18_600_000, cache_read: 3_000_000 }));
        assert_eq!(usd(s.cost.total()), 0.0216);
    }

    #[test]
    fn long_prompts_are_priced_at_the_long_context_tier_for_the_whole_turn() {
        let p = PriceTable::default().price("claude-sonnet-4-6").unwrap();
        // 150k uncached + 60k cache reads = 210k prompt > 200k: $6/M and $0.60/M.
        let c = p.turn(&t(150_000, 1_000, 0, 0, 60_000));
        assert_eq!(c, Cost { generation: 150_000 * 6_000 + 1_000 * 22_500, cache_read: 60_000 * 600 });
        // Exactly 200k is not above the threshold.
        assert_eq!(p.turn(&t(200_000, 0, 0, 0, 0)).generation, 200_000 * 3_000);
    }

    #[test]
    fn openai_has_no_cache_write_price_and_reads_are_cheap() {
        let p = PriceTable::default().price("openai/gpt-5-codex").unwrap();
        // Codex: 10,000 input of which 8,000 cached → 2,000 uncached + 8,000 reads; 300 out.
        let c = p.turn(&t(2_000, 300, 0, 0, 8_000));
        assert_eq!(c, Cost { generation: 2_000 * 1_250 + 300 * 10_000, cache_read: 8_000 * 125 });
    }

    #[test]
    fn unknown_models_count_tokens_but_their_cost_is_unknown() {
        let table = PriceTable::default();
        let known = Spend::turn(&table, "claude-haiku-4-5", t(10, 10, 0, 0, 0));
        let unknown = Spend::turn(&table, "some-new-model", t(5, 5, 0, 0, 0));
        let sum = known.plus(unknown);
        assert_eq!((sum.tokens.total(), sum.turns), (30, 2));
        assert_eq!(sum.known_cost(), None, "never a guessed number");
        assert_eq!(sum.minus(unknown).known_cost(), Some(known.cost));
    }

    #[test]
    fn names_match_whole_ids_or_dated_ones_and_the_longest_wins() {
        let table = PriceTable::default();
        assert_eq!(table.price("gpt-5-mini").unwrap().base.input, 250, "not gpt-5's");
        assert_eq!(table.price("gpt-5.1-codex-mini").unwrap().base.input, 250);
        assert!(table.price("gpt-50").is_none());
        assert!(table.price("claude-sonnet-4").is_none());
        for other in ["gpt-5-nano", "gpt-5-pro", "gpt-5-codex-mini"] {
            assert!(table.price(other).is_none(), "{other} is another model, not gpt-5's: unknown, not mispriced");
        }
        assert_eq!(table.price("gpt-5-2025-08-07").unwrap().base.input, 1_250);
        assert_eq!(table.price("claude-haiku-4-5-latest").unwrap().base.input, 1_000);
        let own_gpt5 = PriceTable { overrides: vec![("gpt-5".into(), HAIKU)] };
        assert_eq!(own_gpt5.price("gpt-5-mini").unwrap().base.input, 250, "an override of gpt-5 does not reprice gpt-5-mini");
        let own = PriceTable { overrides: vec![("claude-haiku-4-5".into(), SONNET)] };
        assert_eq!(own.price("claude-haiku-4-5-20251001"), Some(SONNET), "a workspace's price wins");
    }

    #[test]
    fn absurd_counts_saturate_instead_of_overflowing() {
        let huge = t(u64::MAX, u64::MAX, u64::MAX, u64::MAX, u64::MAX);
        let s = Spend::turn(&PriceTable::default(), "claude-opus-4-1", huge);
        assert_eq!((s.tokens.total(), s.cost.total()), (u64::MAX, u64::MAX));
        assert_eq!(s.plus(s).cost.total(), u64::MAX);
    }

    #[test]
    fn cache_hit_is_reads_over_all_prompt_tokens() {
        assert_eq!(cache_hit_pct(&t(100, 50, 100, 0, 800)), Some(80.0));
        assert_eq!(cache_hit_pct(&Tokens::default()), None);
    }
}

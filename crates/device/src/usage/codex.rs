//! Codex's session rollouts (`$CODEX_HOME/sessions/YYYY/MM/DD/rollout-….jsonl`):
//! `turn_context` lines name the model; `event_msg` lines of type `token_count` carry
//! the running total (`total_token_usage`), in which cached input is counted inside
//! input and reasoning inside output. A turn is what the running total grew by, so a
//! repeated `token_count` counts nothing.

use drover_core::spend::Tokens;
use serde::Deserialize;

use super::Turn;

#[derive(Deserialize)]
struct Line {
    timestamp: Option<String>,
    #[serde(rename = "type")]
    kind: Option<String>,
    payload: Option<Payload>,
}

#[derive(Deserialize)]
struct Payload {
    #[serde(rename = "type")]
    kind: Option<String>,
    model: Option<String>,
    info: Option<Info>,
}

#[derive(Deserialize)]
struct Info {
    total_token_usage: Option<Usage>,
}

#[derive(Deserialize, Clone, Copy, Default, PartialEq, Eq)]
struct Usage {
    #[serde(default)]
    input_tokens: u64,
    #[serde(default)]
    cached_input_tokens: u64,
    #[serde(default)]
    output_tokens: u64,
}

/// Reads one rollout: keeps the current model and the last running total.
#[derive(Debug, Default)]
pub struct Reader {
    file: String,
    model: Option<String>,
    total: (u64, u64, u64),
    turns: u64,
}

impl Reader {
    /// A reader of the rollout at `path` (its turns' keys name the file, so two rollouts
    /// of one run never take each other's turns for copies).
    pub fn for_file(path: &std::path::Path) -> Reader {
        Reader { file: path.file_name().unwrap_or_default().to_string_lossy().into_owned(), ..Reader::default() }
    }

    /// The response a rollout line records, if it records new usage.
    pub fn turn(&mut self, line: &[u8]) -> Option<Turn> {
        let context = super::contains(line, b"\"turn_context\"");
        if !context && !super::contains(line, b"\"token_count\"") {
            return None;
        }
        let l: Line = serde_json::from_slice(line).ok()?;
        let p = l.payload?;
        if l.kind.as_deref() == Some("turn_context") {
            if let Some(m) = p.model {
                self.model = Some(m);
            }
            return None;
        }
        if l.kind.as_deref() != Some("event_msg") || p.kind.as_deref() != Some("token_count") {
            return None;
        }
        let u = p.info?.total_token_usage?;
        let clamp = super::clamp;
        let now = (clamp(u.input_tokens), clamp(u.cached_input_tokens), clamp(u.output_tokens));
        if now.0 < self.total.0 || now.2 < self.total.2 {
            // A new running total (a resumed rollout starts over): take it from here.
            self.total = (0, 0, 0);
        }
        let (input, cached, output) = (now.0 - self.total.0, now.1.saturating_sub(self.total.1), now.2 - self.total.2);
        self.total = now;
        if input + output == 0 {
            return None;
        }
        self.turns += 1;
        let cached = cached.min(input);
        Some(Turn {
            key: format!("codex-{}-{}", self.file, self.turns),
            model: self.model.clone().unwrap_or_else(|| "unknown".into()),
            tokens: Tokens { input: input - cached, output, cache_read: cached, ..Tokens::default() },
            at: l.timestamp,
            sidechain: false,
        })
    }
}

/// The working directory a rollout's `session_meta` line names, if `line` is one.
pub fn rollout_cwd(line: &[u8]) -> Option<String> {
    #[derive(Deserialize)]
    struct Meta {
        #[serde(rename = "type")]
        kind: String,
        payload: MetaPayload,
    }
    #[derive(Deserialize)]
    struct MetaPayload {
        cwd: Option<String>,
    }
    let m: Meta = serde_json::from_slice(line).ok()?;
    (m.kind == "session_meta").then_some(m.payload.cwd).flatten()
}

#[cfg(test)]
mod tests {
    use super::super::Ledger;
    use super::*;
    use drover_core::spend::{Cost, PriceTable};

    const ROLLOUT: &str = r#"{"timestamp":"2026-11-30T10:00:00.000Z","type":"session_meta","payload":{"id":"0199","cwd":"/w/app","cli_version":"0.50.0"}}
{"timestamp":"2026-11-30T10:00:01.000Z","type":"turn_context","payload":{"cwd":"/w/app","approval_policy":"on-request","model":"gpt-5-codex","effort":"medium"}}
{"timestamp":"2026-11-30T10:00:02.000Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"count the token_count lines"}]}}
{"timestamp":"2026-11-30T10:00:03.000Z","type":"event_msg","payload":{"type":"token_count","info":null}}
{"timestamp":"2026-11-30T10:00:09.000Z","type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":10000,"cached_input_tokens":8000,"output_tokens":300,"reasoning_output_tokens":100,"total_tokens":10300},"last_token_usage":{"input_tokens":10000,"cached_input_tokens":8000,"output_tokens":300,"reasoning_output_tokens":100,"total_tokens":10300},"model_context_window":272000}}}
{"timestamp":"2026-11-30T10:00:09.500Z","type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":10000,"cached_input_tokens":8000,"output_tokens":300,"reasoning_output_tokens":100,"total_tokens":10300},"last_token_usage":{"input_tokens":10000,"cached_input_tokens":8000,"output_tokens":300,"reasoning_output_tokens":100,"total_tokens":10300}},"rate_limits":{"primary":{"used_percent":5.0}}}}
{"timestamp":"2026-11-30T10:02:00.000Z","type":"turn_context","payload":{"cwd":"/w/app","model":"gpt-5-mini"}}
{"timestamp":"2026-11-30T10:02:05.000Z","type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":22000,"cached_input_tokens":19000,"output_tokens":500,"reasoning_output_tokens":150,"total_tokens":22500},"last_token_usage":{"input_tokens":12000,"cached_input_tokens":11000,"output_tokens":200,"reasoning_output_tokens":50,"total_tokens":12200}}}}
"#;

    #[test]
    fn a_real_format_rollout_adds_up_by_hand() {
        let (mut reader, mut ledger) = (Reader::default(), Ledger::new(PriceTable::default()));
        for line in ROLLOUT.lines() {
            if let Some(t) = reader.turn(line.as_bytes()) {
                ledger.record(t);
            }
        }
        assert_eq!(ledger.turns(), 2, "the repeated token_count counts nothing");
        let spend = ledger.spend();
        // Turn 1 (gpt-5-codex): 2,000 uncached × 1250 + 300 × 10000 = 5,500,000; 8,000 cached × 125 = 1,000,000.
        // Turn 2 (gpt-5-mini): 1,000 uncached × 250 + 200 × 2000 = 650,000; 11,000 cached × 25 = 275,000.
        assert_eq!(spend.known_cost(), Some(Cost { generation: 5_500_000 + 650_000, cache_read: 1_000_000 + 275_000 }));
        assert_eq!(ledger.route_changes()[0].to, "gpt-5-mini");
        assert_eq!(drover_core::spend::cache_hit_pct(&spend.tokens), Some(19_000.0 * 100.0 / 22_000.0));
    }
}

//! Gemini CLI's chats (`~/.gemini/tmp/<sha256 of the project dir>/chats/*.json`): one
//! JSON document per conversation, rewritten as it grows; its `gemini` messages carry
//! `tokens` {input (cached included), output, cached, thoughts, tool, total} and `model`.

use std::path::{Path, PathBuf};

use drover_core::spend::Tokens;
use serde::Deserialize;
use sha2::{Digest, Sha256};

use super::Turn;

#[derive(Deserialize)]
struct Chat {
    #[serde(default)]
    messages: Vec<Message>,
}

#[derive(Deserialize)]
struct Message {
    id: Option<String>,
    timestamp: Option<String>,
    #[serde(rename = "type")]
    kind: Option<String>,
    model: Option<String>,
    tokens: Option<Usage>,
}

#[derive(Deserialize)]
struct Usage {
    #[serde(default)]
    input: u64,
    #[serde(default)]
    output: u64,
    #[serde(default)]
    cached: u64,
    #[serde(default)]
    thoughts: u64,
}

/// The folder Gemini CLI keeps `cwd`'s chats in, under its home (`~/.gemini`).
pub fn chats_dir(gemini_home: &Path, cwd: &Path) -> PathBuf {
    let hash: String = Sha256::digest(cwd.to_string_lossy().as_bytes()).iter().map(|b| format!("{b:02x}")).collect();
    gemini_home.join("tmp").join(hash).join("chats")
}

/// The responses a chat document records (none if it is not one, or half written).
pub fn turns(doc: &[u8]) -> Vec<Turn> {
    let Ok(chat) = serde_json::from_slice::<Chat>(doc) else { return Vec::new() };
    chat.messages
        .into_iter()
        .filter(|m| m.kind.as_deref() == Some("gemini"))
        .filter_map(|m| {
            let u = m.tokens?;
            let c = super::clamp;
            let (input, cached, output, thoughts) = (c(u.input), c(u.cached), c(u.output), c(u.thoughts));
            let cached = cached.min(input);
            Some(Turn {
                key: format!("gemini-{}", m.id?),
                model: m.model.unwrap_or_else(|| "unknown".into()),
                // Thinking is billed as output.
                tokens: Tokens { input: input - cached, output: output + thoughts, cache_read: cached, ..Tokens::default() },
                at: m.timestamp,
                sidechain: false,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::Ledger;
    use super::*;
    use drover_core::spend::PriceTable;

    const CHAT: &str = r#"{"sessionId":"5f1c","projectHash":"ab12","startTime":"2026-11-30T10:00:00.000Z","lastUpdated":"2026-11-30T10:01:00.000Z","messages":[
      {"id":"u1","timestamp":"2026-11-30T10:00:00.000Z","type":"user","content":"list the files"},
      {"id":"g1","timestamp":"2026-11-30T10:00:04.000Z","type":"gemini","content":"Here they are.","thoughts":[{"subject":"Listing","description":"…"}],
       "tokens":{"input":12000,"output":300,"cached":8000,"thoughts":120,"tool":0,"total":12420},"model":"gemini-2.5-pro"},
      {"id":"i1","timestamp":"2026-11-30T10:00:05.000Z","type":"info","content":"switched model"},
      {"id":"g2","timestamp":"2026-11-30T10:01:00.000Z","type":"gemini","content":"Done.","tokens":{"input":13000,"output":50,"cached":12500,"thoughts":0,"tool":0,"total":13050},"model":"gemini-2.5-flash"}
    ]}"#;

    #[test]
    fn a_real_format_chat_adds_up_by_hand_and_a_half_written_one_counts_nothing() {
        let mut ledger = Ledger::new(PriceTable::default());
        for t in turns(CHAT.as_bytes()) {
            ledger.record(t);
        }
        // Reading the rewritten document again counts nothing twice.
        for t in turns(CHAT.as_bytes()) {
            ledger.record(t);
        }
        let s = ledger.spend();
        assert_eq!(s.turns, 2);
        // g1: 4,000 uncached + 8,000 cached, 420 out (300 + 120 thinking); g2: 500 + 12,500, 50 out.
        assert_eq!((s.tokens.input, s.tokens.cache_read, s.tokens.output), (4_500, 20_500, 470));
        assert_eq!(s.known_cost(), None, "Gemini has no price in the shipped table: unknown, not guessed");
        assert_eq!(ledger.route_changes()[0].to, "gemini-2.5-flash");
        assert!(turns(&CHAT.as_bytes()[..200]).is_empty());
    }

    #[test]
    fn chats_are_filed_by_the_sha256_of_the_project_dir() {
        let d = chats_dir(Path::new("/h/.gemini"), Path::new("/w/app"));
        assert!(d.starts_with("/h/.gemini/tmp") && d.ends_with("chats"));
        assert_eq!(d.parent().unwrap().file_name().unwrap().len(), 64);
    }
}

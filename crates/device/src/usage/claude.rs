//! Claude Code's transcripts (`~/.claude/projects/<cwd with / and . as ->/<id>.jsonl`):
//! assistant lines carry `message.usage`; one response can be written on several lines
//! (deduplicated by `message.id` + `requestId`, keeping the fullest); `input_tokens` is
//! only the uncached part of the prompt.

use std::path::{Path, PathBuf};

use drover_core::spend::Tokens;
use serde::Deserialize;

use super::Turn;

#[derive(Deserialize)]
struct Line {
    #[serde(rename = "type")]
    kind: Option<String>,
    #[serde(rename = "requestId")]
    request_id: Option<String>,
    timestamp: Option<String>,
    #[serde(rename = "isSidechain", default)]
    sidechain: bool,
    message: Option<Message>,
}

#[derive(Deserialize)]
struct Message {
    id: Option<String>,
    model: Option<String>,
    usage: Option<Usage>,
}

#[derive(Deserialize)]
struct Usage {
    #[serde(default)]
    input_tokens: u64,
    #[serde(default)]
    output_tokens: u64,
    #[serde(default)]
    cache_creation_input_tokens: u64,
    #[serde(default)]
    cache_read_input_tokens: u64,
    cache_creation: Option<CacheCreation>,
}

#[derive(Deserialize)]
struct CacheCreation {
    #[serde(default)]
    ephemeral_5m_input_tokens: u64,
    #[serde(default)]
    ephemeral_1h_input_tokens: u64,
}

/// The response a transcript line records, if it records one with usage.
pub fn turn(line: &[u8]) -> Option<Turn> {
    // Most of a transcript is prompts and tool output: skip lines that cannot be usage
    // before parsing them.
    if !super::contains(line, b"\"usage\"") || !super::contains(line, b"\"assistant\"") {
        return None;
    }
    let l: Line = serde_json::from_slice(line).ok()?;
    if l.kind.as_deref() != Some("assistant") {
        return None;
    }
    let m = l.message?;
    let u = m.usage?;
    let (w5, w1) = match u.cache_creation {
        Some(c) if c.ephemeral_5m_input_tokens + c.ephemeral_1h_input_tokens > 0 => {
            (c.ephemeral_5m_input_tokens, c.ephemeral_1h_input_tokens)
        }
        _ => (u.cache_creation_input_tokens, 0),
    };
    let c = super::clamp;
    let tokens = Tokens {
        input: c(u.input_tokens),
        output: c(u.output_tokens),
        cache_write_5m: c(w5),
        cache_write_1h: c(w1),
        cache_read: c(u.cache_read_input_tokens),
    };
    let key = format!("{}|{}", m.id.as_deref().unwrap_or(""), l.request_id.as_deref().unwrap_or(""));
    Some(Turn { key, model: m.model.unwrap_or_else(|| "unknown".into()), tokens, at: l.timestamp, sidechain: l.sidechain })
}

/// The folder Claude Code keeps `cwd`'s transcripts in, under its config dir
/// (`$CLAUDE_CONFIG_DIR`, else `~/.claude`): the path with every character other than
/// an ASCII letter or digit made `-`.
pub fn project_dir(config_dir: &Path, cwd: &Path) -> PathBuf {
    let name: String = cwd.to_string_lossy().chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '-' }).collect();
    config_dir.join("projects").join(name)
}

#[cfg(test)]
mod tests {
    use super::super::{Ledger, Tail};
    use super::*;
    use drover_core::spend::{Cost, PriceTable};
    use std::io::Write;

    /// A transcript as Claude Code writes it: a user line, a response written twice (the
    /// second copy with the final output count), a sub-agent's response, a synthetic
    /// line without usage, a `/model` switch to Opus, and a line still being written.
    const TRANSCRIPT: &str = r#"{"type":"user","message":{"role":"user","content":"fix the \"usage\" bug"},"uuid":"u1","timestamp":"2026-11-30T10:00:00.000Z","sessionId":"s1","cwd":"/w/app"}
{"type":"assistant","requestId":"req_1","timestamp":"2026-11-30T10:00:05.000Z","isSidechain":false,"sessionId":"s1","cwd":"/w/app","message":{"id":"msg_1","model":"claude-sonnet-4-5-20250929","role":"assistant","usage":{"input_tokens":12,"output_tokens":1,"cache_creation_input_tokens":3000,"cache_read_input_tokens":10000,"cache_creation":{"ephemeral_5m_input_tokens":2000,"ephemeral_1h_input_tokens":1000}}}}
{"type":"assistant","requestId":"req_1","timestamp":"2026-11-30T10:00:07.000Z","isSidechain":false,"sessionId":"s1","cwd":"/w/app","message":{"id":"msg_1","model":"claude-sonnet-4-5-20250929","role":"assistant","usage":{"input_tokens":12,"output_tokens":480,"cache_creation_input_tokens":3000,"cache_read_input_tokens":10000,"cache_creation":{"ephemeral_5m_input_tokens":2000,"ephemeral_1h_input_tokens":1000}}}}
{"type":"assistant","requestId":"req_2","timestamp":"2026-11-30T10:00:09.000Z","isSidechain":true,"message":{"id":"msg_2","model":"claude-haiku-4-5-20251001","usage":{"input_tokens":400,"output_tokens":100,"cache_creation_input_tokens":0,"cache_read_input_tokens":0}}}
{"type":"assistant","requestId":"req_x","timestamp":"2026-11-30T10:00:10.000Z","message":{"id":"msg_x","model":"<synthetic>","usage":{"input_tokens":0,"output_tokens":0,"cache_creation_input_tokens":0,"cache_read_input_tokens":0}}}
{"type":"assistant","requestId":"req_3","timestamp":"2026-11-30T10:01:00.000Z","isSidechain":false,"message":{"id":"msg_3","model":"claude-opus-4-5-20251101","usage":{"input_tokens":5,"output_tokens":200,"cache_creation_input_tokens":100,"cache_read_input_tokens":13000}}}
{"type":"assistant","requestId":"req_4","message":{"id":"msg_4","model":"claude-opus-4-5-20251101","usage":{"input_tokens":9"#;

    #[test]
    fn a_real_format_transcript_adds_up_by_hand() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s1.jsonl");
        std::fs::write(&path, TRANSCRIPT).unwrap();
        let (mut tail, mut ledger) = (Tail::new(&path), Ledger::new(PriceTable::default()));
        tail.read(|l| {
            if let Some(t) = turn(l) {
                ledger.record(t)
            }
        })
        .unwrap();
        assert_eq!(ledger.turns(), 3, "msg_1 once, msg_2 (sidechain), msg_3; synthetic and partial lines not counted");
        let spend = ledger.spend();
        // msg_1 (Sonnet): 12 in × 3000 + 480 out × 15000 + 2000 × 3750 + 1000 × 6000 = 36,000 + 7,200,000 + 7,500,000 + 6,000,000
        //                 = 20,736,000 generation; 10,000 reads × 300 = 3,000,000.
        // msg_2 (Haiku):  400 × 1000 + 100 × 5000 = 900,000.
        // msg_3 (Opus):   5 × 5000 + 200 × 25000 + 100 × 6250 = 25,000 + 5,000,000 + 625,000 = 5,650,000; 13,000 × 500 = 6,500,000.
        assert_eq!(spend.known_cost(), Some(Cost { generation: 20_736_000 + 900_000 + 5_650_000, cache_read: 3_000_000 + 6_500_000 }));
        assert_eq!(spend.tokens.cache_read, 23_000);
        assert_eq!(spend.tokens.output, 780);
        assert_eq!(ledger.route_changes().len(), 1);
        assert_eq!(ledger.route_changes()[0].to, "claude-opus-4-5-20251101");
        assert_eq!(ledger.route_changes()[0].at.as_deref(), Some("2026-11-30T10:01:00.000Z"));

        // The last line is finished later: it counts then, once.
        let mut f = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(br#","output_tokens":50,"cache_creation_input_tokens":0,"cache_read_input_tokens":14000}}}"#).unwrap();
        f.write_all(b"\n").unwrap();
        tail.read(|l| {
            if let Some(t) = turn(l) {
                ledger.record(t)
            }
        })
        .unwrap();
        assert_eq!(ledger.turns(), 4);
        assert_eq!(ledger.spend().tokens.cache_read, 37_000);
    }

    #[test]
    fn malformed_and_foreign_lines_are_skipped() {
        for line in [
            &b""[..],
            b"{",
            b"not json",
            br#"{"type":"assistant","usage":1}"#,
            br#"{"type":"assistant","message":{"usage":{"input_tokens":-1}}}"#,
        ] {
            assert!(turn(line).is_none(), "{}", String::from_utf8_lossy(line));
        }
    }

    #[test]
    fn project_dirs_follow_claude_codes_naming() {
        assert_eq!(project_dir(Path::new("/h/.claude"), Path::new("/w/my.app/wt")), Path::new("/h/.claude/projects/-w-my-app-wt"));
        assert_eq!(
            project_dir(Path::new("/h"), Path::new("/home/a_b/Application Support/x")),
            Path::new("/h/projects/-home-a-b-Application-Support-x")
        );
    }
}

//! Watching one session's harness records: Claude Code's transcripts and Gemini CLI's
//! chats for the session's directory (its sandbox's worktree, so other sandboxes'
//! records are never read) and Codex's rollouts whose `session_meta` names that
//! directory, counting only responses from the run's start on (earlier runs in the same
//! sandbox have their own sessions).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use drover_core::spend::PriceTable;
use drover_protocol::device::{ModelUsage, RouteChangeReport, UsageReport};

use super::{claude, codex, Ledger, Tail};

/// Rollout files a Codex reader follows: the tail, its reader, and whether it is ours.
struct Rollout {
    tail: Tail,
    reader: codex::Reader,
    ours: Option<bool>,
}

/// One session's usage, read incrementally from its harness's own records.
pub struct Watch {
    cwd: PathBuf,
    since: String,
    claude_dirs: Vec<PathBuf>,
    codex_home: Option<PathBuf>,
    claude: HashMap<PathBuf, Tail>,
    codex: HashMap<PathBuf, Rollout>,
    gemini_home: Option<PathBuf>,
    /// Gemini chats are rewritten whole: each is read again when its size or time changes.
    gemini: HashMap<PathBuf, (u64, std::time::SystemTime)>,
    ledger: Ledger,
    prices: PriceTable,
    /// How far OpenCode's store was read (its messages' latest update, Unix ms).
    opencode_cursor: i64,
    /// Whether it prices with the shared table (the workspace's prices from the server).
    follow: bool,
    /// The version of the shared prices the ledger was priced with.
    prices_version: Option<u64>,
}

/// Where the harnesses keep their records, from the daemon's environment: Claude Code's
/// config folders, Codex's home, Gemini CLI's home.
fn homes() -> (Vec<PathBuf>, Option<PathBuf>, Option<PathBuf>) {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let claude = match std::env::var_os("CLAUDE_CONFIG_DIR").filter(|v| !v.is_empty()) {
        Some(d) => vec![PathBuf::from(d)],
        None => home.iter().flat_map(|h| [h.join(".claude"), h.join(".config/claude")]).collect(),
    };
    let codex =
        std::env::var_os("CODEX_HOME").filter(|v| !v.is_empty()).map(PathBuf::from).or_else(|| home.as_ref().map(|h| h.join(".codex")));
    let gemini = std::env::var_os("GEMINI_DIR").filter(|v| !v.is_empty()).map(PathBuf::from).or_else(|| home.map(|h| h.join(".gemini")));
    (claude, codex, gemini)
}

impl Watch {
    /// A watch of the records of a run in `cwd` that started at `since` (RFC 3339, UTC).
    pub fn new(cwd: &Path, since: &str, prices: PriceTable) -> Watch {
        let (claude_dirs, codex_home, gemini_home) = homes();
        let mut w = Watch::with_homes(cwd, since, prices, claude_dirs, codex_home);
        w.gemini_home = gemini_home;
        w
    }

    /// [`Watch::new`] with the harnesses' record folders given.
    pub fn with_homes(cwd: &Path, since: &str, prices: PriceTable, claude_dirs: Vec<PathBuf>, codex_home: Option<PathBuf>) -> Watch {
        Watch {
            cwd: cwd.to_path_buf(),
            since: since.to_string(),
            claude_dirs,
            codex_home,
            claude: HashMap::new(),
            codex: HashMap::new(),
            gemini_home: None,
            gemini: HashMap::new(),
            ledger: Ledger::new(prices.clone()),
            prices,
            opencode_cursor: 0,
            follow: false,
            prices_version: None,
        }
    }

    /// Prices with the shared table from now on (the workspace's prices, from the server),
    /// repricing what was read whenever it changes.
    pub fn follow_shared_prices(mut self) -> Watch {
        self.follow = true;
        self
    }

    /// Reads what was added since the last poll; true if the usage changed.
    pub fn poll(&mut self) -> bool {
        let before = (self.ledger.spend(), self.ledger.route_changes().len());
        if self.follow {
            let (version, table) = super::prices();
            if Some(version) != self.prices_version {
                self.prices_version = Some(version);
                self.prices = table.clone();
                self.ledger.reprice(table);
            }
        }
        self.poll_claude();
        self.poll_codex();
        self.poll_gemini();
        before != (self.ledger.spend(), self.ledger.route_changes().len())
    }

    fn poll_claude(&mut self) {
        for base in &self.claude_dirs {
            let dir = claude::project_dir(base, &self.cwd);
            // The conversations, and their sub-agents' (`<session>/subagents/*.jsonl`).
            for path in jsonl_files(&dir, 2) {
                self.claude.entry(path.clone()).or_insert_with(|| Tail::new(&path));
            }
        }
        let (ledger, since) = (&mut self.ledger, self.since.as_str());
        for tail in self.claude.values_mut() {
            // A rewritten or truncated transcript is read again from its start: responses
            // already counted count once (by their ids), and none is ever taken back, so
            // spend never goes down.
            let _ = tail.read(|l| {
                if let Some(t) = claude::turn(l).filter(|t| t.in_run(since)) {
                    ledger.record(t);
                }
            });
        }
    }

    fn poll_gemini(&mut self) {
        let Some(home) = &self.gemini_home else { return };
        let Ok(entries) = std::fs::read_dir(super::gemini::chats_dir(home, &self.cwd)) else { return };
        for e in entries.flatten() {
            let path = e.path();
            let Ok(meta) = e.metadata() else { continue };
            let stamp = (meta.len(), meta.modified().unwrap_or(std::time::UNIX_EPOCH));
            if path.extension().is_none_or(|x| x != "json") || self.gemini.get(&path) == Some(&stamp) {
                continue;
            }
            let Ok(doc) = std::fs::read(&path) else { continue };
            let turns = super::gemini::turns(&doc);
            if turns.is_empty() && !doc.is_empty() && serde_json::from_slice::<serde_json::Value>(&doc).is_err() {
                continue; // half written: read it again next time
            }
            self.gemini.insert(path, stamp);
            for t in turns.into_iter().filter(|t| t.in_run(&self.since)) {
                self.ledger.record(t);
            }
        }
    }

    /// Sets where Gemini CLI's chats are (tests).
    pub fn with_gemini(mut self, home: PathBuf) -> Watch {
        self.gemini_home = Some(home);
        self
    }

    fn poll_codex(&mut self) {
        let Some(home) = &self.codex_home else { return };
        // Rollouts are filed by the machine's local day: look from the day before the run's
        // start (UTC) through the day after today, and let each rollout's own directory
        // and timestamps decide.
        let start =
            chrono::DateTime::parse_from_rfc3339(&self.since).map(|t| t.with_timezone(&chrono::Utc)).unwrap_or_else(|_| chrono::Utc::now());
        let mut day = start.date_naive() - chrono::Days::new(1);
        let last = chrono::Utc::now().date_naive() + chrono::Days::new(1);
        while day <= last {
            let dir = home.join("sessions").join(day.format("%Y/%m/%d").to_string());
            if let Ok(entries) = std::fs::read_dir(&dir) {
                for e in entries.flatten() {
                    let path = e.path();
                    if path.extension().is_some_and(|x| x == "jsonl") {
                        self.codex.entry(path.clone()).or_insert_with(|| Rollout {
                            tail: Tail::new(&path),
                            reader: codex::Reader::for_file(&path),
                            ours: None,
                        });
                    }
                }
            }
            day = day.succ_opt().unwrap_or(last + chrono::Days::new(1));
        }
        let (ledger, since, cwd) = (&mut self.ledger, self.since.as_str(), self.cwd.as_path());
        for r in self.codex.values_mut() {
            if r.ours.is_none() {
                // Whose it is is in its first line: read just that (other sandboxes'
                // rollouts are never read further).
                r.ours = first_line(r.tail.path()).map(|l| codex::rollout_cwd(&l).is_some_and(|c| Path::new(&c) == cwd));
            }
            if r.ours != Some(true) {
                continue;
            }
            if std::fs::metadata(r.tail.path()).is_ok_and(|m| m.len() < r.tail.offset()) {
                // Rewritten from its start: read again, its running totals from zero.
                r.reader = codex::Reader::for_file(r.tail.path());
            }
            let reader = &mut r.reader;
            let _ = r.tail.read(|l| {
                if let Some(t) = reader.turn(l).filter(|t| t.in_run(since)) {
                    ledger.record(t);
                }
            });
        }
    }

    /// Records responses read elsewhere (OpenCode's store, read asynchronously); those
    /// from before the run's start are left out.
    pub fn record(&mut self, turns: Vec<super::Turn>) {
        for t in turns.into_iter().filter(|t| t.in_run(&self.since)) {
            self.ledger.record(t);
        }
    }

    /// Reads OpenCode's store (SQLite, so asynchronously) for what changed since the
    /// last read.
    pub async fn poll_opencode(&mut self, db: &Path) {
        let since = chrono::DateTime::parse_from_rfc3339(&self.since).map(|t| t.timestamp_millis()).unwrap_or(0);
        let (turns, cursor) = super::opencode::turns(db, &self.cwd, since, self.opencode_cursor).await;
        self.opencode_cursor = cursor;
        self.record(turns);
    }

    /// The usage so far, as reported to the server.
    pub fn report(&self) -> UsageReport {
        let spend = self.ledger.spend();
        UsageReport {
            tokens: spend.tokens,
            turns: spend.turns,
            cost: spend.cost,
            unpriced_turns: spend.unpriced_turns,
            model: self.ledger.model().map(str::to_string),
            models: self
                .ledger
                .by_model()
                .into_iter()
                .map(|(model, s)| ModelUsage { model, tokens: s.tokens, turns: s.turns, cost: s.cost, unpriced_turns: s.unpriced_turns })
                .collect(),
            route_changes: self
                .ledger
                .route_changes()
                .iter()
                .map(|c| RouteChangeReport { from: c.from.clone(), to: c.to.clone(), at: c.at.clone() })
                .collect(),
        }
    }
}

/// The first line of `path`, once it is complete (at most 64 KiB read).
fn first_line(path: &Path) -> Option<Vec<u8>> {
    use std::io::Read;
    let mut buf = vec![0u8; 64 * 1024];
    let n = std::fs::File::open(path).ok()?.read(&mut buf).ok()?;
    let end = buf[..n].iter().position(|b| *b == b'\n')?;
    buf.truncate(end);
    Some(buf)
}

/// The `.jsonl` files in `dir` and in its folders up to `depth` levels down.
fn jsonl_files(dir: &Path, depth: usize) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else { return out };
    for e in entries.flatten() {
        let path = e.path();
        match e.file_type() {
            Ok(t) if t.is_dir() && depth > 0 => out.extend(jsonl_files(&path, depth - 1)),
            Ok(t) if t.is_file() && path.extension().is_some_and(|x| x == "jsonl") => out.push(path),
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn line(id: &str, at: &str, model: &str, output: u64) -> String {
        format!(
            r#"{{"type":"assistant","requestId":"r{id}","timestamp":"{at}","message":{{"id":"m{id}","model":"{model}","usage":{{"input_tokens":10,"output_tokens":{output},"cache_creation_input_tokens":0,"cache_read_input_tokens":90}}}}}}"#
        ) + "\n"
    }

    #[test]
    fn a_watch_reads_only_its_own_directory_and_run() {
        let home = tempfile::tempdir().unwrap();
        let claude = home.path().join(".claude");
        let ours = Path::new("/w/app/.drover/worktrees/t1");
        let dir = claude::project_dir(&claude, ours);
        std::fs::create_dir_all(&dir).unwrap();
        let other = claude::project_dir(&claude, Path::new("/w/app/.drover/worktrees/t2"));
        std::fs::create_dir_all(&other).unwrap();
        std::fs::write(other.join("x.jsonl"), line("9", "2026-11-30T10:00:00Z", "claude-sonnet-4-5", 999)).unwrap();
        let mut f = std::fs::File::create(dir.join("a.jsonl")).unwrap();
        // A response from an earlier run in the same sandbox, then two of this run's.
        f.write_all(line("0", "2026-11-30T09:00:00Z", "claude-sonnet-4-5", 500).as_bytes()).unwrap();
        f.write_all(line("1", "2026-11-30T10:00:01Z", "claude-sonnet-4-5", 5).as_bytes()).unwrap();
        let mut w = Watch::with_homes(ours, "2026-11-30T10:00:00Z", PriceTable::default(), vec![claude.clone()], None);
        assert!(w.poll());
        assert_eq!((w.report().turns, w.report().tokens.output), (1, 5));
        assert!(!w.poll(), "nothing new");
        f.write_all(line("2", "2026-11-30T10:00:09Z", "claude-opus-4-5", 7).as_bytes()).unwrap();
        assert!(w.poll());
        let r = w.report();
        assert_eq!((r.turns, r.tokens.output, r.route_changes.len()), (2, 12, 1));
        assert_eq!(r.model.as_deref(), Some("claude-opus-4-5"));
    }

    #[test]
    fn gemini_chats_are_read_again_when_rewritten() {
        let home = tempfile::tempdir().unwrap();
        let dir = super::super::gemini::chats_dir(home.path(), Path::new("/w/g"));
        std::fs::create_dir_all(&dir).unwrap();
        let msg = |id: &str, out: u64| {
            format!(
                r#"{{"id":"{id}","timestamp":"2026-11-30T10:00:05Z","type":"gemini","tokens":{{"input":100,"output":{out},"cached":0,"thoughts":0}},"model":"gemini-2.5-pro"}}"#
            )
        };
        std::fs::write(dir.join("session-1.json"), format!(r#"{{"messages":[{}]}}"#, msg("a", 5))).unwrap();
        let mut w = Watch::with_homes(Path::new("/w/g"), "2026-11-30T10:00:00Z", PriceTable::default(), vec![], None)
            .with_gemini(home.path().to_path_buf());
        assert!(w.poll());
        std::fs::write(dir.join("session-1.json"), format!(r#"{{"messages":[{},{}]}}"#, msg("a", 5), msg("b", 7))).unwrap();
        assert!(w.poll());
        let r = w.report();
        assert_eq!((r.turns, r.tokens.output, r.unpriced_turns), (2, 12, 2));
    }

    #[test]
    fn truncating_or_deleting_a_transcript_never_lowers_spend() {
        let home = tempfile::tempdir().unwrap();
        let claude = home.path().join(".claude");
        let cwd = Path::new("/w/t");
        let dir = claude::project_dir(&claude, cwd);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("a.jsonl"),
            line("1", "2026-11-30T10:00:01Z", "claude-sonnet-4-5", 5) + &line("2", "2026-11-30T10:00:02Z", "claude-sonnet-4-5", 6),
        )
        .unwrap();
        std::fs::create_dir_all(dir.join("s1/subagents")).unwrap();
        std::fs::write(dir.join("s1/subagents/agent-x.jsonl"), line("3", "2026-11-30T10:00:03Z", "claude-haiku-4-5", 7)).unwrap();
        let mut w = Watch::with_homes(cwd, "2026-11-30T10:00:00Z", PriceTable::default(), vec![claude.clone()], None);
        w.poll();
        let before = w.report();
        assert_eq!(before.turns, 3, "sub-agents' transcripts count too");
        std::fs::write(dir.join("a.jsonl"), line("1", "2026-11-30T10:00:01Z", "claude-sonnet-4-5", 5)).unwrap();
        std::fs::remove_file(dir.join("s1/subagents/agent-x.jsonl")).unwrap();
        w.poll();
        assert_eq!(w.report(), before, "what was counted stays counted");
    }

    #[test]
    fn two_codex_rollouts_of_one_run_both_count() {
        let home = tempfile::tempdir().unwrap();
        let day = home.path().join(format!("sessions/{}", chrono::Utc::now().format("%Y/%m/%d")));
        std::fs::create_dir_all(&day).unwrap();
        let rollout = |total: u64| {
            format!(
                "{{\"type\":\"session_meta\",\"payload\":{{\"cwd\":\"/w/c\"}}}}\n{{\"type\":\"turn_context\",\"payload\":{{\"model\":\"gpt-5-codex\"}}}}\n{{\"timestamp\":\"2099-01-01T00:00:00Z\",\"type\":\"event_msg\",\"payload\":{{\"type\":\"token_count\",\"info\":{{\"total_token_usage\":{{\"input_tokens\":{total},\"cached_input_tokens\":0,\"output_tokens\":1}}}}}}}}\n"
            )
        };
        std::fs::write(day.join("rollout-1.jsonl"), rollout(3000)).unwrap();
        std::fs::write(day.join("rollout-2.jsonl"), rollout(500)).unwrap();
        let since = chrono::Utc::now().to_rfc3339();
        let mut w = Watch::with_homes(Path::new("/w/c"), &since, PriceTable::default(), vec![], Some(home.path().to_path_buf()));
        w.poll();
        assert_eq!((w.report().turns, w.report().tokens.input), (2, 3500));
    }

    #[test]
    fn codex_rollouts_count_only_when_they_name_the_sessions_directory() {
        let home = tempfile::tempdir().unwrap();
        let day = home.path().join("sessions/2026/11/30");
        std::fs::create_dir_all(&day).unwrap();
        let rollout = |cwd: &str, total: u64| {
            format!(
                "{{\"type\":\"session_meta\",\"payload\":{{\"id\":\"x\",\"cwd\":\"{cwd}\"}}}}\n{{\"timestamp\":\"2026-11-30T10:00:01Z\",\"type\":\"turn_context\",\"payload\":{{\"model\":\"gpt-5-codex\"}}}}\n{{\"timestamp\":\"2026-11-30T10:00:02Z\",\"type\":\"event_msg\",\"payload\":{{\"type\":\"token_count\",\"info\":{{\"total_token_usage\":{{\"input_tokens\":{total},\"cached_input_tokens\":0,\"output_tokens\":10}}}}}}}}\n"
            )
        };
        std::fs::write(day.join("rollout-a.jsonl"), rollout("/w/mine", 100)).unwrap();
        std::fs::write(day.join("rollout-b.jsonl"), rollout("/w/theirs", 5000)).unwrap();
        let mut w =
            Watch::with_homes(Path::new("/w/mine"), "2026-11-30T10:00:00Z", PriceTable::default(), vec![], Some(home.path().to_path_buf()));
        assert!(w.poll());
        assert_eq!((w.report().turns, w.report().tokens.input), (1, 100));
    }
}

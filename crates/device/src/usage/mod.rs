//! Reading a session's model usage from the harness's own records (Claude Code, Codex,
//! Gemini CLI, OpenCode), incrementally: a
//! [`Tail`] reads only what was appended since last time (keeping a partly written last
//! line for later), a harness-specific reader turns lines into [`Turn`]s, and a
//! [`Ledger`] keeps one entry per model response (a response written on several lines
//! counts once, its fullest copy) and notices route changes (a `/model` switch).

pub mod claude;
pub mod codex;
pub mod gemini;
pub mod opencode;
pub mod watch;

use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use drover_core::spend::{Cost, Price, PriceTable, Spend, Tokens};

/// The prices usage is counted with: the shipped table plus the workspace's overrides,
/// which the server sends; a version counter lets watches notice a change.
static PRICES: std::sync::RwLock<(u64, Option<PriceTable>)> = std::sync::RwLock::new((0, None));

/// Replaces the workspace's price overrides (from the server).
pub fn set_prices(table: PriceTable) {
    let mut p = PRICES.write().expect("prices lock");
    if p.1.as_ref() != Some(&table) {
        *p = (p.0 + 1, Some(table));
    }
}

/// The current prices and their version.
pub fn prices() -> (u64, PriceTable) {
    let p = PRICES.read().expect("prices lock");
    (p.0, p.1.clone().unwrap_or_default())
}

/// Most tokens one count read from a harness's records may hold (files anyone on the
/// machine can write: larger numbers are clamped, so sums cannot overflow).
pub const MAX_TOKENS: u64 = 1_000_000_000_000;

/// A token count read from a harness's records, held to [`MAX_TOKENS`].
fn clamp(n: u64) -> u64 {
    n.min(MAX_TOKENS)
}

/// Whether `needle` occurs in `hay` (a fast check before parsing a line).
fn contains(hay: &[u8], needle: &[u8]) -> bool {
    memchr::memmem::find(hay, needle).is_some()
}

/// One model response's usage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Turn {
    /// What identifies the response across repeated lines.
    pub key: String,
    /// The model that answered.
    pub model: String,
    /// Its tokens.
    pub tokens: Tokens,
    /// When (the record's timestamp), if given.
    pub at: Option<String>,
    /// Whether a sub-agent (sidechain) produced it: spend, but not the session's route.
    pub sidechain: bool,
}

impl Turn {
    /// Whether it was written at or after `since` (RFC 3339, UTC): part of the run that
    /// started then. A response without a time counts.
    pub fn in_run(&self, since: &str) -> bool {
        self.at.as_deref().is_none_or(|at| at >= since)
    }
}

/// The session's model changed between two responses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteChange {
    /// The model before.
    pub from: String,
    /// The model after.
    pub to: String,
    /// When the first response on the new model was written.
    pub at: Option<String>,
}

/// Every response of a session, once each, and their spend so far (kept as they come,
/// so reading it costs nothing).
#[derive(Debug, Default)]
pub struct Ledger {
    prices: PriceTable,
    known: HashMap<String, Option<Price>>,
    turns: HashMap<String, (String, Tokens)>,
    order: Vec<String>,
    model: Option<String>,
    changes: Vec<RouteChange>,
    spend: Spend,
}

impl Ledger {
    /// An empty ledger pricing with `prices`.
    pub fn new(prices: PriceTable) -> Ledger {
        Ledger { prices, ..Ledger::default() }
    }

    /// Prices every response again with `prices` (the workspace's prices changed).
    pub fn reprice(&mut self, prices: PriceTable) {
        self.prices = prices;
        self.known.clear();
        let turns: Vec<(String, Tokens)> = self.order.iter().map(|k| self.turns[k].clone()).collect();
        self.spend = Spend::default();
        for (model, t) in turns {
            let s = self.priced(&model, t);
            self.spend = self.spend.plus(s);
        }
    }

    /// One response's spend (each model's price looked up once).
    fn priced(&mut self, model: &str, t: Tokens) -> Spend {
        let prices = &self.prices;
        let price = *self.known.entry(model.to_string()).or_insert_with(|| prices.price(model));
        match price {
            Some(p) => Spend { tokens: t, turns: 1, cost: p.turn(&t), unpriced_turns: 0 },
            None => Spend { tokens: t, turns: 1, cost: Cost::default(), unpriced_turns: 1 },
        }
    }

    /// Records a response; a repeated one replaces its earlier copy if it is fuller.
    pub fn record(&mut self, turn: Turn) {
        if turn.tokens.total() == 0 {
            return;
        }
        if let Some((model, tokens)) = self.turns.get(&turn.key).cloned() {
            if turn.tokens.total() > tokens.total() {
                let (old, new) = (self.priced(&model, tokens), self.priced(&model, turn.tokens));
                self.spend = self.spend.minus(old).plus(new);
                self.turns.insert(turn.key, (model, turn.tokens));
            }
            return;
        }
        if !turn.sidechain {
            match &self.model {
                Some(m) if *m != turn.model => {
                    self.changes.push(RouteChange { from: m.clone(), to: turn.model.clone(), at: turn.at.clone() })
                }
                _ => {}
            }
            self.model = Some(turn.model.clone());
        }
        let added = self.priced(&turn.model, turn.tokens);
        self.spend = self.spend.plus(added);
        self.order.push(turn.key.clone());
        self.turns.insert(turn.key, (turn.model, turn.tokens));
    }

    /// Spend so far, each response priced at its own model (and tier).
    pub fn spend(&self) -> Spend {
        self.spend
    }

    /// Responses recorded.
    pub fn turns(&self) -> usize {
        self.turns.len()
    }

    /// The model of the latest main-line response.
    pub fn model(&self) -> Option<&str> {
        self.model.as_deref()
    }

    /// Route changes seen, oldest first.
    pub fn route_changes(&self) -> &[RouteChange] {
        &self.changes
    }

    /// Spend per model (each response priced at its own tier), in first-seen order.
    pub fn by_model(&self) -> Vec<(String, Spend)> {
        let mut out: Vec<(String, Spend)> = Vec::new();
        for key in &self.order {
            let (model, t) = &self.turns[key];
            let s = Spend::turn(&self.prices, model, *t);
            match out.iter_mut().find(|(m, _)| m == model) {
                Some((_, sum)) => *sum = sum.plus(s),
                None => out.push((model.clone(), s)),
            }
        }
        out
    }
}

/// Longest line kept waiting for its end.
const MAX_LINE: usize = 16 * 1024 * 1024;

/// Most bytes read from a record file in one go (bounded memory on a huge backlog).
const CHUNK: usize = 4 * 1024 * 1024;

/// Reads what was appended to a file since the last call, in whole lines.
#[derive(Debug)]
pub struct Tail {
    path: PathBuf,
    offset: u64,
    partial: Vec<u8>,
}

impl Tail {
    /// A tail of `path` from its start.
    pub fn new(path: &Path) -> Tail {
        Tail { path: path.to_path_buf(), offset: 0, partial: Vec::new() }
    }

    /// The file it reads.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes of the file consumed so far.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Calls `line` for each complete new line; a last line without its newline waits
    /// for the next call. Returns true if the file was replaced or truncated (the caller
    /// starts its ledger over: every line is read again).
    pub fn read(&mut self, mut line: impl FnMut(&[u8])) -> std::io::Result<bool> {
        let mut f = match std::fs::File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(e),
        };
        let len = f.metadata()?.len();
        let restarted = len < self.offset;
        if restarted {
            self.offset = 0;
            self.partial.clear();
        }
        f.seek(SeekFrom::Start(self.offset))?;
        let mut buf = vec![0u8; CHUNK];
        loop {
            let n = f.read(&mut buf)?;
            if n == 0 {
                break;
            }
            self.offset += n as u64;
            let mut rest = &buf[..n];
            while let Some(i) = rest.iter().position(|b| *b == b'\n') {
                if self.partial.is_empty() {
                    line(&rest[..i]);
                } else {
                    self.partial.extend_from_slice(&rest[..i]);
                    line(&self.partial);
                    self.partial.clear();
                }
                rest = &rest[i + 1..];
            }
            self.partial.extend_from_slice(rest);
            if self.partial.len() > MAX_LINE {
                // No record is this long: drop it (its tail parses as nothing) rather
                // than hold an unending line in memory.
                self.partial.clear();
            }
        }
        Ok(restarted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn tails_read_whole_lines_once_and_start_over_on_truncation() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        let mut f = std::fs::File::create(&path).unwrap();
        let mut tail = Tail::new(&path);
        let mut lines = Vec::new();
        f.write_all(b"one\ntw").unwrap();
        assert!(!tail.read(|l| lines.push(String::from_utf8_lossy(l).into_owned())).unwrap());
        assert_eq!(lines, ["one"], "a partly written line waits");
        f.write_all(b"o\nthree\n").unwrap();
        tail.read(|l| lines.push(String::from_utf8_lossy(l).into_owned())).unwrap();
        assert_eq!(lines, ["one", "two", "three"]);
        std::fs::write(&path, b"new\n").unwrap();
        lines.clear();
        assert!(tail.read(|l| lines.push(String::from_utf8_lossy(l).into_owned())).unwrap(), "truncated: start over");
        assert_eq!(lines, ["new"]);
        assert!(!Tail::new(&dir.path().join("missing")).read(|_| {}).unwrap());
    }

    fn turn(key: &str, model: &str, output: u64, sidechain: bool) -> Turn {
        Turn { key: key.into(), model: model.into(), tokens: Tokens { input: 10, output, ..Tokens::default() }, at: None, sidechain }
    }

    #[test]
    fn ledgers_keep_the_fullest_copy_and_see_route_changes_on_the_main_line() {
        let mut l = Ledger::default();
        l.record(turn("a", "claude-sonnet-4-5", 5, false));
        l.record(turn("a", "claude-sonnet-4-5", 50, false));
        l.record(turn("a", "claude-sonnet-4-5", 20, false));
        l.record(turn("s", "claude-haiku-4-5", 7, true));
        l.record(turn("b", "claude-opus-4-5", 1, false));
        assert_eq!(l.turns(), 3);
        let by = l.by_model();
        assert_eq!(
            (by[0].0.as_str(), by[0].1.tokens, by[0].1.turns),
            ("claude-sonnet-4-5", Tokens { input: 10, output: 50, ..Tokens::default() }, 1)
        );
        assert_eq!(l.route_changes().len(), 1, "a sub-agent's model is not a route change");
        assert_eq!((l.route_changes()[0].from.as_str(), l.route_changes()[0].to.as_str()), ("claude-sonnet-4-5", "claude-opus-4-5"));
        assert_eq!(l.model(), Some("claude-opus-4-5"));
        // The running spend is what pricing every kept response afresh gives.
        let fresh = l.by_model().iter().fold(Spend::default(), |s, (_, m)| s.plus(*m));
        assert_eq!(l.spend(), fresh);
        // New prices reprice every response.
        let before = l.spend();
        let opus = PriceTable::default().price("claude-opus-4-5").unwrap();
        l.reprice(PriceTable { overrides: vec![("claude-sonnet-4-5".into(), opus)] });
        assert!(l.spend().cost.total() > before.cost.total());
        assert_eq!(l.spend().tokens, before.tokens);
    }
}

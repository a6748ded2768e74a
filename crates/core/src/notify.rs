//! Getting told: which events reach a member's browsers as Web Push notifications, and
//! when. Each member chooses the kinds of notice they want, a daily quiet window (nothing
//! is pushed inside it; the items stay in the inbox) and a per-run cool-down (after one
//! notice about a run, further ones about it are held back until it passes). Notices
//! raised close together are coalesced: the first opens a batch that collects for
//! [`COALESCE_WINDOW`], then goes out as ONE push ("3 runs need you"), so ten runs
//! waiting at once never make ten buzzes.
//!
//! A notice carries words, a run's title and a link, never what a held call would run:
//! a push may reach someone who may not drop in to the run.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::activity::EventKind;
use crate::attention::{waiting_words, AttentionKind};

/// How long a batch collects notices after the first before it is pushed.
pub const COALESCE_WINDOW: Duration = Duration::from_secs(10);
/// The cool-down a member has until they choose one.
pub const DEFAULT_COOLDOWN: Duration = Duration::from_secs(5 * 60);
/// The longest cool-down a member may choose.
pub const MAX_COOLDOWN: Duration = Duration::from_secs(24 * 3600);
/// Most characters of a question or title a notice carries.
const MAX_WORDS: usize = 120;
/// Most items a coalesced notice's body lists.
const MAX_LISTED: usize = 3;

/// A kind of notice a member can choose to get.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum NoticeKind {
    /// A run holds a tool call for approval.
    Permission,
    /// An agent asked a question and waits for the answer.
    Question,
    /// A run finished its turn (or, a guess, its screen is still at a prompt).
    Idle,
    /// A run ended well: completed, incomplete or released.
    Finished,
    /// A run failed.
    Failed,
    /// Contact with a run was lost.
    Lost,
    /// A spend cap was reached.
    SpendCap,
}

impl NoticeKind {
    /// Every kind.
    pub const ALL: [NoticeKind; 7] = [
        NoticeKind::Permission,
        NoticeKind::Question,
        NoticeKind::Idle,
        NoticeKind::Finished,
        NoticeKind::Failed,
        NoticeKind::Lost,
        NoticeKind::SpendCap,
    ];
    /// What a member gets until they choose: what waits on them or went wrong, not
    /// every finished turn or ending.
    pub const DEFAULT: [NoticeKind; 5] =
        [NoticeKind::Permission, NoticeKind::Question, NoticeKind::Failed, NoticeKind::Lost, NoticeKind::SpendCap];

    /// The identifier in the API, the CLI and storage.
    pub fn as_str(self) -> &'static str {
        match self {
            NoticeKind::Permission => "permission",
            NoticeKind::Question => "question",
            NoticeKind::Idle => "idle",
            NoticeKind::Finished => "finished",
            NoticeKind::Failed => "failed",
            NoticeKind::Lost => "lost",
            NoticeKind::SpendCap => "spend_cap",
        }
    }

    /// Parses the identifier.
    pub fn parse(s: &str) -> Option<NoticeKind> {
        NoticeKind::ALL.into_iter().find(|k| k.as_str() == s)
    }

    /// Whether a run waits on a person (the coalesced notice says "need you").
    pub fn waits(self) -> bool {
        matches!(self, NoticeKind::Permission | NoticeKind::Question | NoticeKind::Idle)
    }
}

/// Why a choice was refused, in words that say what to type instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChoiceError {
    /// An event kind that is not one.
    #[error("unknown event {0:?}: use permission, question, idle, finished, failed, lost, spend_cap")]
    UnknownEvent(String),
    /// A quiet window that does not parse.
    #[error("quiet hours {0:?} are not a window: write HH:MM-HH:MM, e.g. 22:00-07:00")]
    Window(String),
    /// A time zone offset that does not parse.
    #[error("time zone {0:?} is not one: use a name like Europe/Paris, UTC, or an offset like +02:00")]
    Zone(String),
    /// A cool-down that does not parse or is too long.
    #[error("cool-down {0:?} is not a duration up to 24h: write e.g. 90s, 5m, 1h or 0")]
    Cooldown(String),
}

/// Parses a comma-separated list of event kinds (`permission,question`).
pub fn parse_events(list: &str) -> Result<Vec<NoticeKind>, ChoiceError> {
    let mut out = Vec::new();
    for word in list.split(',').map(str::trim).filter(|w| !w.is_empty()) {
        let kind = NoticeKind::parse(word).ok_or_else(|| ChoiceError::UnknownEvent(word.into()))?;
        if !out.contains(&kind) {
            out.push(kind);
        }
    }
    out.sort();
    Ok(out)
}

/// A daily quiet window, in minutes after local midnight: from `start` (inside) to `end`
/// (outside); it wraps past midnight when `end` is before `start`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// First quiet minute.
    pub start: u16,
    /// First minute no longer quiet.
    pub end: u16,
}

impl Window {
    /// Parses `HH:MM-HH:MM` (the two ends differ).
    pub fn parse(s: &str) -> Result<Window, ChoiceError> {
        let bad = || ChoiceError::Window(s.into());
        let (a, b) = s.trim().split_once('-').ok_or_else(bad)?;
        let (start, end) = (minute_of_day(a).ok_or_else(bad)?, minute_of_day(b).ok_or_else(bad)?);
        if start == end {
            return Err(bad());
        }
        Ok(Window { start, end })
    }

    /// Whether `minute` (after local midnight) is quiet.
    pub fn contains(self, minute: u16) -> bool {
        if self.start < self.end {
            (self.start..self.end).contains(&minute)
        } else {
            minute >= self.start || minute < self.end
        }
    }
}

impl std::fmt::Display for Window {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:02}:{:02}-{:02}:{:02}", self.start / 60, self.start % 60, self.end / 60, self.end % 60)
    }
}

fn minute_of_day(s: &str) -> Option<u16> {
    let (h, m) = s.trim().split_once(':')?;
    let (h, m): (u16, u16) = (h.parse().ok()?, m.parse().ok()?);
    (h < 24 && m < 60 && s.trim().len() <= 5).then_some(h * 60 + m)
}

/// A fixed UTC offset in minutes, from `UTC`, `Z`, `+02:00`, `-0530` or `UTC+2`; None
/// when `zone` is not an offset (it may still be a zone name, which the caller checks).
pub fn parse_offset(zone: &str) -> Option<i32> {
    let z = zone.trim();
    let rest = z.strip_prefix("UTC").or_else(|| z.strip_prefix("GMT")).unwrap_or(z);
    if rest.is_empty() || rest == "Z" {
        return (!z.is_empty()).then_some(0);
    }
    let (sign, digits) = match rest.as_bytes()[0] {
        b'+' => (1, &rest[1..]),
        b'-' => (-1, &rest[1..]),
        _ => return None,
    };
    let (h, m) = match digits.split_once(':') {
        Some((h, m)) => (h, m),
        None if digits.len() == 4 => digits.split_at(2),
        None => (digits, "0"),
    };
    let (h, m): (i32, i32) = (h.parse().ok()?, m.parse().ok()?);
    (h <= 14 && m < 60 && !digits.is_empty()).then_some(sign * (h * 60 + m))
}

/// Parses a cool-down: `0`, `90s`, `5m`, `1h` (a bare number is seconds), up to
/// [`MAX_COOLDOWN`].
pub fn parse_cooldown(s: &str) -> Result<Duration, ChoiceError> {
    let t = s.trim();
    let bad = || ChoiceError::Cooldown(s.into());
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let n: u64 = t[..split].parse().map_err(|_| bad())?;
    let unit = match &t[split..] {
        "" | "s" => 1,
        "m" => 60,
        "h" => 3600,
        _ => return Err(bad()),
    };
    let d = Duration::from_secs(n.checked_mul(unit).ok_or_else(bad)?);
    if d > MAX_COOLDOWN {
        return Err(bad());
    }
    Ok(d)
}

/// A member's choices, as the decision needs them (the zone is already applied: the
/// caller passes the local minute of day).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choices {
    /// The kinds they get.
    pub events: Vec<NoticeKind>,
    /// When nothing is pushed, if ever.
    pub quiet: Option<Window>,
    /// How long after a notice about a run further ones about it wait.
    pub cooldown: Duration,
}

impl Default for Choices {
    fn default() -> Self {
        Choices { events: NoticeKind::DEFAULT.to_vec(), quiet: None, cooldown: DEFAULT_COOLDOWN }
    }
}

/// Whether a notice reaches a member now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Push it (into the member's current batch).
    Notify,
    /// They did not choose this kind.
    NotChosen,
    /// It is their quiet hours: it stays in the inbox.
    Quiet,
    /// They heard about this run less than a cool-down ago.
    CoolingDown,
}

/// Whether a notice of `kind` reaches a member with `choices` now: `local_minute` is the
/// minute of the day in their zone, `since_last` how long ago they were last notified
/// about the same run (None: never, or it concerns no run).
pub fn decide(choices: &Choices, kind: NoticeKind, local_minute: u16, since_last: Option<Duration>) -> Verdict {
    if !choices.events.contains(&kind) {
        Verdict::NotChosen
    } else if choices.quiet.is_some_and(|w| w.contains(local_minute)) {
        Verdict::Quiet
    } else if since_last.is_some_and(|d| d < choices.cooldown) {
        Verdict::CoolingDown
    } else {
        Verdict::Notify
    }
}

/// The notice an activity event makes, with its words, if it makes one.
pub fn notice_for(kind: EventKind, detail: &Value) -> Option<(NoticeKind, String)> {
    let text = |k: &str| detail.get(k).and_then(Value::as_str);
    match kind {
        EventKind::AttentionRaised => {
            let waiting = AttentionKind::parse(text("kind")?)?;
            let notice = if waiting == AttentionKind::Permission { NoticeKind::Permission } else { NoticeKind::Idle };
            Some((notice, waiting_words(waiting, text("tool"))))
        }
        EventKind::QuestionAsked => Some((NoticeKind::Question, format!("asks: {}", clip(text("text").unwrap_or("a question"))))),
        EventKind::SessionEnded | EventKind::SessionKilled => match text("outcome")? {
            "failed" => Some((NoticeKind::Failed, "failed".into())),
            "lost" => Some((NoticeKind::Lost, "lost contact".into())),
            o @ ("completed" | "incomplete" | "released") => Some((NoticeKind::Finished, format!("finished: {o}"))),
            _ => None,
        },
        EventKind::SessionConnectionLost => Some((NoticeKind::Lost, "lost contact".into())),
        EventKind::SpendCapReached => Some((NoticeKind::SpendCap, "spend cap reached: the run was stopped".into())),
        _ => None,
    }
}

/// `s` cut to 120 characters, with an ellipsis when cut.
pub fn clip(s: &str) -> String {
    let s = s.trim();
    match s.char_indices().nth(MAX_WORDS) {
        Some((at, _)) => format!("{}…", &s[..at]),
        None => s.to_string(),
    }
}

/// One notice waiting in a member's batch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Item {
    /// Its kind (`permission`, …).
    pub kind: String,
    /// What it says ("needs approval: Bash").
    pub words: String,
    /// The run it concerns, if any.
    pub session: Option<String>,
    /// The run's (or task's) title.
    pub title: String,
    /// The held call it is about, when the member may decide it from the notification.
    pub attention: Option<String>,
}

/// What a push carries (the JSON the service worker reads).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Payload {
    /// The notification's title.
    pub title: String,
    /// Its body.
    pub body: String,
    /// The page a click opens (a path on the server).
    pub url: String,
    /// Replaces an earlier Drover notification rather than stacking.
    pub tag: String,
    /// How many runs it covers.
    pub runs: usize,
    /// The held call "Approve" decides, when it is about exactly one the member may decide.
    pub attention: Option<String>,
}

/// The one push a batch of `items` (oldest first, not empty) makes.
pub fn compose(items: &[Item]) -> Payload {
    let mut runs: Vec<&str> = items.iter().filter_map(|i| i.session.as_deref()).collect();
    runs.sort_unstable();
    runs.dedup();
    let n = runs.len().max(1);
    if let [one] = items {
        let url = one.session.as_ref().map_or("/inbox".to_string(), |s| format!("/sessions/{s}"));
        let url = if one.attention.is_some() || one.kind == "question" { "/inbox".to_string() } else { url };
        let title = if one.title.is_empty() { "Drover".to_string() } else { clip(&one.title) };
        return Payload { title, body: one.words.clone(), url, tag: "drover".into(), runs: n, attention: one.attention.clone() };
    }
    let waiting = items.iter().all(|i| NoticeKind::parse(&i.kind).is_some_and(NoticeKind::waits));
    let title = match (n, waiting) {
        (1, true) => "1 run needs you".to_string(),
        (_, true) => format!("{n} runs need you"),
        (1, false) => "1 run has news".to_string(),
        (_, false) => format!("{n} runs have news"),
    };
    let mut lines: Vec<String> = items.iter().rev().take(MAX_LISTED).map(|i| format!("{}: {}", clip(&i.title), i.words)).collect();
    if items.len() > MAX_LISTED {
        lines.push(format!("and {} more", items.len() - MAX_LISTED));
    }
    Payload { title, body: lines.join("\n"), url: "/inbox".into(), tag: "drover".into(), runs: n, attention: None }
}

#[cfg(test)]
mod tests;

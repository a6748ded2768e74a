//! Attention: a run waiting on a person, decided from evidence. A harness that reports
//! through hooks says so precisely (Claude Code's `PermissionRequest`, `Notification`,
//! `Stop`); a question an agent asks is a task note. Here: what a hook event means, what
//! a held tool call shows a person (tool, command or file, diff), which decisions a
//! waiting item takes, and what the hook prints back for each.

use serde_json::{json, Value};

/// What a run waits on a person for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AttentionKind {
    /// The harness holds a tool call for approval (or shows its own permission prompt).
    Permission,
    /// The harness finished its turn and waits for the next instruction.
    Idle,
    /// A guess, for a harness without hooks: its screen has been still for a while and
    /// shows a prompt. Never shown as a fact.
    ProbablyWaiting,
}

impl AttentionKind {
    /// Every kind.
    pub const ALL: [AttentionKind; 3] = [AttentionKind::Permission, AttentionKind::Idle, AttentionKind::ProbablyWaiting];

    /// The identifier used in the API and storage.
    pub fn as_str(self) -> &'static str {
        match self {
            AttentionKind::Permission => "permission",
            AttentionKind::Idle => "idle",
            AttentionKind::ProbablyWaiting => "probably_waiting",
        }
    }

    /// Parses the identifier.
    pub fn parse(s: &str) -> Option<AttentionKind> {
        AttentionKind::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

/// Most bytes of a guess's line kept.
pub const MAX_GUESS_LINE: usize = 400;

/// Most bytes of a held call's subject (its command, file or input) kept.
pub const MAX_SUBJECT: usize = 2000;
/// Most bytes of a held call's diff kept.
pub const MAX_DIFF: usize = 64 * 1024;
/// Most bytes of the allow rules "Approve always" may keep for one call.
pub const MAX_RULES: usize = 16 * 1024;
/// Most bytes of one allow rule's content.
const MAX_RULE_CONTENT: usize = 512;

/// A tool call the harness holds until a person decides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldCall {
    /// The tool's name, when it is a name (else the call shows as "a tool").
    pub tool: Option<String>,
    /// What it would run or touch: the command, the file, or its input.
    pub subject: String,
    /// For an edit, what it would change (`-` and `+` lines).
    pub diff: Option<String>,
    /// The allow rules "Approve always" would keep (`Tool(content)`), from the
    /// harness's own suggestion; empty when it has none fit to keep.
    pub always: Vec<String>,
    /// The subject or diff was cut to fit: a person cannot see all of it, so it cannot
    /// be approved from Drover (only denied, or answered in the terminal).
    pub clipped: bool,
}

/// What a harness's hook event says about whether its run waits on a person.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookSignal {
    /// A tool call held for a decision: the hook waits for it.
    Held(HeldCall),
    /// The harness shows a permission prompt in its own terminal (no hook waits): it is
    /// answered by dropping in.
    Prompt(String),
    /// The harness finished its turn and waits for the next instruction.
    Idle,
    /// The harness moved on (a prompt was submitted): what it waited on is over.
    MovedOn,
    /// Nothing that changes whether it waits.
    Ignored,
}

/// Why a hook event or a decision is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AttentionError {
    /// The hook's input is not a JSON object with a `hook_event_name`.
    #[error("not a hook event: expected a JSON object with hook_event_name")]
    NotAnEvent,
    /// The item was decided or cleared already.
    #[error("this was already {0}; nothing is waiting for a decision")]
    Closed(String),
    /// A prompt shown in the terminal, a finished turn: nothing holds for a decision.
    #[error("nothing holds for a decision here: {0}")]
    NotHeld(&'static str),
    /// "Approve always" without a rule fit to keep.
    #[error("the harness suggested no rule that can be kept for this call; approve it once, or deny it")]
    NoRule,
    /// A call shown clipped cannot be approved unseen.
    #[error(
        "this call is too long to show in full here, so it cannot be approved from Drover: deny it, or open the terminal and answer there"
    )]
    Clipped,
}

/// A person's decision on a held call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Let this call run.
    Approve,
    /// Let it run, and calls the harness's suggested rule covers from now on in this
    /// task.
    ApproveAlways,
    /// Refuse it, with a message to the agent.
    Deny(String),
}

impl Decision {
    /// Parses `approve`, `approve_always` or `deny` (with `message`).
    pub fn parse(word: &str, message: Option<&str>) -> Option<Decision> {
        match word {
            "approve" => Some(Decision::Approve),
            "approve_always" => Some(Decision::ApproveAlways),
            "deny" => Some(Decision::Deny(message.unwrap_or_default().trim().to_string())),
            _ => None,
        }
    }

    /// The word stored and shown.
    pub fn as_str(&self) -> &'static str {
        match self {
            Decision::Approve => "approve",
            Decision::ApproveAlways => "approve_always",
            Decision::Deny(_) => "deny",
        }
    }
}

/// What a waiting item is, as a decision needs to know it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Waiting<'a> {
    /// Its kind.
    pub kind: AttentionKind,
    /// A hook holds the call for a decision (false: a prompt in the terminal).
    pub held: bool,
    /// Why it closed, if it has.
    pub closed: Option<&'a str>,
    /// Its subject or diff was clipped.
    pub clipped: bool,
    /// It has allow rules "Approve always" can keep.
    pub has_rules: bool,
}

/// Whether `decision` may be taken on `item`.
pub fn check_decision(item: &Waiting, decision: &Decision) -> Result<(), AttentionError> {
    if let Some(why) = item.closed {
        return Err(AttentionError::Closed(why.to_string()));
    }
    match (item.kind, item.held) {
        (AttentionKind::Idle, _) => return Err(AttentionError::NotHeld("the agent waits for its next instruction: send it input")),
        (AttentionKind::ProbablyWaiting, _) => {
            return Err(AttentionError::NotHeld("this is a guess from a still screen: open the terminal, or send it input"))
        }
        (AttentionKind::Permission, false) => {
            return Err(AttentionError::NotHeld("the harness asks in its own terminal: open the terminal and answer there"))
        }
        (AttentionKind::Permission, true) => {}
    }
    match decision {
        Decision::Deny(_) => Ok(()),
        _ if item.clipped => Err(AttentionError::Clipped),
        Decision::ApproveAlways if !item.has_rules => Err(AttentionError::NoRule),
        Decision::Approve | Decision::ApproveAlways => Ok(()),
    }
}

/// Reads a Claude Code hook event (its JSON input).
pub fn read_claude_hook(event: &Value) -> Result<HookSignal, AttentionError> {
    let name = event.get("hook_event_name").and_then(Value::as_str).ok_or(AttentionError::NotAnEvent)?;
    Ok(match name {
        "PermissionRequest" => HookSignal::Held(held_call(event)),
        "Notification" => notification(event),
        "Stop" => HookSignal::Idle,
        "UserPromptSubmit" => HookSignal::MovedOn,
        _ => HookSignal::Ignored,
    })
}

/// Reads what Codex's `notify` program is handed (its JSON argument): a finished turn
/// (`agent-turn-complete`) means it waits for its next instruction.
pub fn read_codex_notify(event: &Value) -> Result<HookSignal, AttentionError> {
    match event.get("type").and_then(Value::as_str).ok_or(AttentionError::NotAnEvent)? {
        "agent-turn-complete" => Ok(HookSignal::Idle),
        _ => Ok(HookSignal::Ignored),
    }
}

/// What Codex runs after each turn (`notify`): Drover's own hook, on the run's PATH.
pub const CODEX_NOTIFY: &str = r#"notify=["drover","hook","codex"]"#;

/// A `Notification`: a permission prompt in the terminal, or idle waiting for input.
fn notification(event: &Value) -> HookSignal {
    let message = event.get("message").and_then(Value::as_str).unwrap_or_default();
    let kind = event.get("notification_type").and_then(Value::as_str).unwrap_or_default();
    let lower = message.to_lowercase();
    if kind == "permission_prompt" || (kind.is_empty() && lower.contains("permission")) {
        HookSignal::Prompt(clip(message, MAX_SUBJECT).0)
    } else if kind == "idle_prompt" || (kind.is_empty() && lower.contains("waiting for your input")) {
        HookSignal::Idle
    } else {
        HookSignal::Ignored
    }
}

/// The held call a `PermissionRequest` describes.
fn held_call(event: &Value) -> HeldCall {
    let tool = event.get("tool_name").and_then(Value::as_str).filter(|t| is_tool_name(t)).map(str::to_string);
    let input = event.get("tool_input").cloned().unwrap_or(Value::Null);
    let (subject, cut_subject) = clip(&subject(tool.as_deref(), &input), MAX_SUBJECT);
    let diff = diff(&input).map(|d| clip(&d, MAX_DIFF));
    let clipped = cut_subject || diff.as_ref().is_some_and(|(_, cut)| *cut);
    let always = event.get("permission_suggestions").map(allow_rules).unwrap_or_default();
    HeldCall { tool, subject, diff: diff.map(|(d, _)| d), always, clipped }
}

/// What a call would run or touch, for a person to read.
fn subject(tool: Option<&str>, input: &Value) -> String {
    let field = |k: &str| input.get(k).and_then(Value::as_str).map(str::to_string);
    let named = match tool {
        Some("Bash") => field("command"),
        Some("Edit" | "MultiEdit" | "Write" | "Read" | "NotebookEdit") => field("file_path").or_else(|| field("notebook_path")),
        Some("WebFetch") => field("url"),
        Some("WebSearch") => field("query"),
        _ => None,
    };
    named.unwrap_or_else(|| if input.is_null() { String::new() } else { input.to_string() })
}

/// An edit's change as `-`/`+` lines (Edit, MultiEdit, Write); None for other calls.
fn diff(input: &Value) -> Option<String> {
    let lines = |prefix: &str, text: &str| text.lines().map(|l| format!("{prefix} {l}\n")).collect::<String>();
    let pair = |e: &Value| {
        let s = |k: &str| e.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
        format!("{}{}", lines("-", &s("old_string")), lines("+", &s("new_string")))
    };
    if let Some(edits) = input.get("edits").and_then(Value::as_array) {
        return Some(edits.iter().map(pair).collect::<Vec<_>>().join("…\n"));
    }
    if input.get("old_string").is_some() || input.get("new_string").is_some() {
        return Some(pair(input));
    }
    input.get("content").and_then(Value::as_str).map(|c| lines("+", c))
}

/// `text` cut to at most `max` bytes at a character boundary, and whether it was cut.
fn clip(text: &str, max: usize) -> (String, bool) {
    if text.len() <= max {
        return (text.to_string(), false);
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    (text[..end].to_string(), true)
}

/// Whether `s` is a tool's name (letters, digits, `_`, `-`, `.`, `:`; at most 128 bytes):
/// anything else a run sends as a name is not shown as one.
pub fn is_tool_name(s: &str) -> bool {
    !s.is_empty() && s.len() <= 128 && s.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ':'))
}

/// The allow rules worth keeping from a harness's permission suggestions: rules it
/// would add to allow a tool for some content, never a whole tool, a mode change or a
/// directory. Each as `Tool(content)`; none if together they are over [`MAX_RULES`].
pub fn allow_rules(suggestions: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for s in suggestions.as_array().into_iter().flatten() {
        let adds_allow =
            s.get("type").and_then(Value::as_str) == Some("addRules") && s.get("behavior").and_then(Value::as_str) == Some("allow");
        if !adds_allow {
            continue;
        }
        for r in s.get("rules").and_then(Value::as_array).into_iter().flatten() {
            let tool = r.get("toolName").and_then(Value::as_str).unwrap_or_default();
            let content = r.get("ruleContent").and_then(Value::as_str).unwrap_or_default();
            if let Some(rule) = rule(tool, content) {
                if !out.contains(&rule) {
                    out.push(rule);
                }
            }
        }
    }
    let total: usize = out.iter().map(String::len).sum();
    if total > MAX_RULES {
        return Vec::new();
    }
    out
}

/// `Tool(content)`, when both are fit to keep: a tool's name, and content that is not
/// empty, on one line, bounded, and cannot close the rule early.
fn rule(tool: &str, content: &str) -> Option<String> {
    let fit =
        !content.trim().is_empty() && content.len() <= MAX_RULE_CONTENT && !content.chars().any(|c| c.is_control() || c == '(' || c == ')');
    (is_tool_name(tool) && fit).then(|| format!("{tool}({content})"))
}

/// A kept rule split back into its tool and content.
fn split_rule(rule: &str) -> Option<(&str, &str)> {
    let (tool, rest) = rule.split_once('(')?;
    Some((tool, rest.strip_suffix(')')?))
}

/// What a Claude Code `PermissionRequest` hook prints for `decision`; "approve always"
/// adds `rules` to the run's own session only, never to files in the worktree.
pub fn claude_hook_output(decision: &Decision, rules: &[String]) -> Value {
    let verdict = match decision {
        Decision::Approve => json!({ "behavior": "allow" }),
        Decision::ApproveAlways => {
            let rules: Vec<Value> =
                rules.iter().filter_map(|r| split_rule(r)).map(|(t, c)| json!({ "toolName": t, "ruleContent": c })).collect();
            let update = json!({ "type": "addRules", "rules": rules, "behavior": "allow", "destination": "session" });
            json!({ "behavior": "allow", "updatedPermissions": [update] })
        }
        Decision::Deny(message) => {
            let message = if message.is_empty() { "A person denied this in Drover." } else { message.as_str() };
            json!({ "behavior": "deny", "message": message })
        }
    };
    json!({ "hookSpecificOutput": { "hookEventName": "PermissionRequest", "decision": verdict } })
}

/// The command Claude Code runs for each hook event: Drover's own, on the run's PATH,
/// with no part of it from the run or the task.
pub const CLAUDE_HOOK_COMMAND: &str = "drover hook claude";

/// How long Claude Code waits for the `PermissionRequest` hook (seconds): a person may
/// take a while to answer.
pub const HELD_CALL_TIMEOUT_SECS: u64 = 24 * 3600;

/// The settings Claude Code is started with in a task's run (`--settings`): Drover's
/// hooks, and the allow rules people kept for the task ("Approve always").
pub fn claude_settings(allow: &[String]) -> Value {
    let hook = |timeout: Option<u64>| {
        let mut h = json!({ "type": "command", "command": CLAUDE_HOOK_COMMAND });
        if let Some(t) = timeout {
            h["timeout"] = json!(t);
        }
        json!([{ "matcher": "*", "hooks": [h] }])
    };
    let allow: Vec<&String> =
        allow.iter().filter(|r| split_rule(r).is_some_and(|(t, c)| rule(t, c).as_deref() == Some(r.as_str()))).collect();
    json!({
        "hooks": {
            "PermissionRequest": hook(Some(HELD_CALL_TIMEOUT_SECS)),
            "Notification": hook(None),
            "Stop": hook(None),
            "UserPromptSubmit": hook(None),
        },
        "permissions": { "allow": allow },
    })
}

/// Whether a harness reports through hooks when it waits on a person: for the others,
/// waiting is only ever guessed from a still screen.
pub fn reports_waiting(h: crate::harness::Harness) -> bool {
    use crate::harness::Harness;
    match h {
        Harness::Claude => true,
        Harness::Codex | Harness::Gemini | Harness::Aider | Harness::Opencode | Harness::Goose | Harness::Custom => false,
    }
}

/// Whether a still screen's last line looks like it asks a person something: a yes/no
/// question, a password or passphrase prompt, a question mark, or a shell or REPL
/// prompt. Only ever a guess.
pub fn looks_like_prompt(line: &str) -> bool {
    let line = line.trim_end();
    if line.is_empty() || line.len() > 400 {
        return false;
    }
    let lower = line.to_lowercase();
    let yes_no = ["[y/n]", "(y/n)", "[yes/no]", "(yes/no)", "[y/n/a]", "(y/n/a)"].iter().any(|q| lower.contains(q));
    let secret = (lower.contains("password") || lower.contains("passphrase") || lower.contains("token")) && lower.ends_with(':');
    let asks = line.ends_with('?') || line.ends_with("? ") || lower.ends_with("continue:");
    let prompt = line.ends_with(['$', '#', '>', '›', '❯']) || line == "%";
    yes_no || secret || asks || prompt
}

/// The words a list shows for a run waiting on a person (the NOW column).
pub fn waiting_words(kind: AttentionKind, tool: Option<&str>) -> String {
    match kind {
        AttentionKind::Permission => format!("needs approval: {}", tool.unwrap_or("a tool")),
        AttentionKind::Idle => "waiting for its next instruction".into(),
        AttentionKind::ProbablyWaiting => "probably waiting (a guess: its screen is still)".into(),
    }
}

#[cfg(test)]
mod tests;

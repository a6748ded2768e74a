//! Harness presets: how each agent CLI is started with a first prompt and how it resumes
//! its conversation (HARNESSES.md). Commands are argument lists, never shell strings: a
//! prompt is one argument whatever it contains.

use serde::{Deserialize, Serialize};

/// The CLI an agent runs inside.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Harness {
    /// Claude Code (`claude`).
    Claude,
    /// Codex CLI (`codex`).
    Codex,
    /// Gemini CLI (`gemini`).
    Gemini,
    /// Aider (`aider`).
    Aider,
    /// OpenCode (`opencode`).
    Opencode,
    /// Goose (`goose`).
    Goose,
    /// Any command, from a template.
    Custom,
}

/// How an agent's runs are routed: harness, provider, account, model, effort.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Route {
    /// The model (passed to the harness when set).
    pub model: Option<String>,
    /// The provider (recorded; OpenCode takes `provider/model`).
    pub provider: Option<String>,
    /// The account (recorded).
    pub account: Option<String>,
    /// Reasoning effort (recorded).
    pub effort: Option<String>,
}

/// Why a command cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HarnessError {
    /// A custom harness without a template.
    #[error("a custom harness needs a command template (e.g. [\"my-agent\", \"--prompt\", \"{{prompt}}\"])")]
    NoTemplate,
    /// Unknown harness name.
    #[error("unknown harness `{0}`: use claude, codex, gemini, aider, opencode, goose or custom")]
    Unknown(String),
    /// A template that names the prompt too often (each copy can be 64 KiB).
    #[error("the command template uses {{prompt}} {0} times; at most {MAX_PROMPT_PLACEHOLDERS} are allowed")]
    TooManyPrompts(usize),
}

/// Most `{prompt}` placeholders a custom template may hold: the prompt carries the task
/// body, so each copy can be 64 KiB and a command line must stay bounded.
pub const MAX_PROMPT_PLACEHOLDERS: usize = 4;

/// Checks a custom harness's command template.
pub fn check_template(template: &[String]) -> Result<(), HarnessError> {
    if template.is_empty() || template[0].is_empty() {
        return Err(HarnessError::NoTemplate);
    }
    let prompts: usize = template.iter().map(|a| a.matches("{prompt}").count()).sum();
    if prompts > MAX_PROMPT_PLACEHOLDERS {
        return Err(HarnessError::TooManyPrompts(prompts));
    }
    Ok(())
}

impl Harness {
    /// Every harness.
    pub const ALL: [Harness; 7] =
        [Harness::Claude, Harness::Codex, Harness::Gemini, Harness::Aider, Harness::Opencode, Harness::Goose, Harness::Custom];

    /// The lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            Harness::Claude => "claude",
            Harness::Codex => "codex",
            Harness::Gemini => "gemini",
            Harness::Aider => "aider",
            Harness::Opencode => "opencode",
            Harness::Goose => "goose",
            Harness::Custom => "custom",
        }
    }

    /// The program a preset runs (None for a custom harness: its template names it).
    pub fn program(self) -> Option<&'static str> {
        match self {
            Harness::Custom => None,
            Harness::Aider => Some("aider"),
            Harness::Goose => Some("goose"),
            Harness::Claude | Harness::Codex | Harness::Gemini | Harness::Opencode => Some(self.as_str()),
        }
    }

    /// Parses the name.
    pub fn parse(s: &str) -> Result<Harness, HarnessError> {
        Harness::ALL.into_iter().find(|h| h.as_str() == s).ok_or_else(|| HarnessError::Unknown(s.chars().take(40).collect()))
    }

    /// The command that starts the harness with `prompt` as its first message. For a
    /// custom harness every `{prompt}` in the template's arguments is replaced.
    pub fn start(self, prompt: &str, route: &Route, template: &[String]) -> Result<Vec<String>, HarnessError> {
        let mut argv: Vec<String> = match self {
            Harness::Claude => vec!["claude".into()],
            Harness::Codex => vec!["codex".into()],
            Harness::Gemini => vec!["gemini".into()],
            Harness::Aider => aider_base(),
            Harness::Opencode => vec!["opencode".into()],
            Harness::Goose => vec!["goose".into(), "session".into()],
            Harness::Custom => return custom(template, prompt),
        };
        argv.extend(model_args(self, route));
        argv.extend(mcp_args(self));
        match self {
            // `--mcp-config` takes several values: `--` ends the options before the prompt.
            Harness::Claude => argv.extend(["--".into(), prompt.into()]),
            Harness::Codex => argv.push(prompt.into()),
            Harness::Gemini => argv.extend(["-i".into(), prompt.into()]),
            Harness::Opencode => argv.extend(["--prompt".into(), prompt.into()]),
            // Aider's `--message` answers once and exits, and Goose's interactive session
            // takes no first message on the command line: both start interactive and get
            // it as audited input once the session runs.
            Harness::Aider | Harness::Goose | Harness::Custom => {}
        }
        Ok(argv)
    }

    /// The command that resumes the harness's latest conversation in the sandbox, when
    /// the harness can; None means start afresh.
    pub fn resume(self, route: &Route) -> Option<Vec<String>> {
        let mut argv: Vec<String> = match self {
            Harness::Claude => vec!["claude".into(), "--continue".into()],
            Harness::Codex => vec!["codex".into(), "resume".into(), "--last".into()],
            Harness::Gemini => vec!["gemini".into(), "-r".into(), "latest".into()],
            Harness::Aider => [aider_base(), vec!["--restore-chat-history".into()]].concat(),
            Harness::Opencode => vec!["opencode".into(), "--continue".into()],
            Harness::Goose => vec!["goose".into(), "session".into(), "--resume".into()],
            Harness::Custom => return None,
        };
        argv.extend(model_args(self, route));
        argv.extend(mcp_args(self));
        Some(argv)
    }

    /// Whether the first prompt must be sent as input after start (not on the command line).
    pub fn prompt_as_input(self) -> bool {
        matches!(self, Harness::Aider | Harness::Goose)
    }
}

/// Aider without the questions it may ask before its prompt (they would take the
/// typed-in first message as their answer): editing the tracked .gitignore, sharing
/// analytics, installing an update, showing release notes.
fn aider_base() -> Vec<String> {
    ["aider", "--no-gitignore", "--no-analytics", "--no-check-update", "--no-show-release-notes"].map(String::from).to_vec()
}

fn model_args(h: Harness, route: &Route) -> Vec<String> {
    let Some(model) = route.model.clone().filter(|m| !m.is_empty()) else { return Vec::new() };
    match h {
        Harness::Claude | Harness::Aider => vec!["--model".into(), model],
        Harness::Codex | Harness::Gemini => vec!["-m".into(), model],
        Harness::Opencode => {
            let full = match &route.provider {
                Some(p) if !p.is_empty() && !model.contains('/') => format!("{p}/{model}"),
                _ => model,
            };
            vec!["--model".into(), full]
        }
        Harness::Goose | Harness::Custom => Vec::new(),
    }
}

/// The MCP server with the task tools (`drover mcp`, on the run's PATH), for harnesses
/// that take an MCP configuration on their command line.
pub const MCP_CONFIG: &str = r#"{"mcpServers":{"drover":{"type":"stdio","command":"drover","args":["mcp"]}}}"#;

fn mcp_args(h: Harness) -> Vec<String> {
    match h {
        Harness::Claude => vec!["--mcp-config".into(), MCP_CONFIG.into()],
        Harness::Codex | Harness::Gemini | Harness::Aider | Harness::Opencode | Harness::Goose | Harness::Custom => Vec::new(),
    }
}

fn custom(template: &[String], prompt: &str) -> Result<Vec<String>, HarnessError> {
    check_template(template)?;
    Ok(template.iter().map(|a| a.replace("{prompt}", prompt)).collect())
}

/// A task run's command line with what Drover hands the harness besides, so that its
/// waiting reaches people: for Claude Code, `--settings` holding Drover's hooks (a held
/// tool call, a finished turn, a prompt) and the allow rules kept for the task; for
/// Codex, its `notify` program (a finished turn). Other harnesses' command lines are
/// returned as they are.
pub fn with_settings(h: Harness, mut argv: Vec<String>, allow: &[String]) -> Vec<String> {
    let added = match h {
        Harness::Claude => ["--settings".to_string(), crate::attention::claude_settings(allow).to_string()],
        Harness::Codex => ["-c".to_string(), crate::attention::CODEX_NOTIFY.to_string()],
        Harness::Gemini | Harness::Aider | Harness::Opencode | Harness::Goose | Harness::Custom => return argv,
    };
    if !argv.is_empty() {
        argv.splice(1..1, added);
    }
    argv
}

/// How a stage's new run begins.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Opening {
    /// A fresh conversation: this command line (with the stage's prompt, unless the
    /// harness takes it typed in).
    Start(Vec<String>),
    /// The conversation the stage's previous run left in the sandbox, resumed: this
    /// command line; it is then told to carry on ([`resume_message`]).
    Resume(Vec<String>),
}

/// The command line of a stage's new run: the previous run was lost (its machine
/// restarted, its device went silent) while the same agent worked the stage in the same
/// sandbox, so its harness resumes that conversation where it can, instead of starting
/// over; otherwise a fresh start with `prompt`.
pub fn opening(h: Harness, prompt: &str, route: &Route, template: &[String], previous_lost: bool) -> Result<Opening, HarnessError> {
    if previous_lost {
        if let Some(argv) = h.resume(route) {
            return Ok(Opening::Resume(argv));
        }
    }
    h.start(prompt, route, template).map(Opening::Start)
}

/// What a resumed run is told first, so the agent carries on rather than waits.
pub fn resume_message(stage: &str) -> String {
    format!(
        "Your previous session was interrupted (its machine restarted or lost contact). \
         Carry on with the `{stage}` stage from where the work stands in this directory, \
         and hand off with `drover task advance --note \"what you did\"` when it is done."
    )
}

/// Where a stage sits in its workflow, for its first message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StagePlace {
    /// It is the workflow's last stage.
    pub is_last: bool,
    /// Handing it off merges the task's branch into the base branch.
    pub merges: bool,
}

/// Something earlier work on a task left for the stage now starting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Earlier<'a> {
    /// A stage's hand-off note.
    HandOff {
        /// The stage handed off.
        stage: &'a str,
        /// Who handed it off.
        by: &'a str,
        /// What they wrote.
        note: &'a str,
    },
    /// A question an agent asked and a person answered.
    Answer {
        /// The question.
        question: &'a str,
        /// The answer.
        answer: &'a str,
    },
}

/// Most bytes of earlier notes a first message carries, the newest kept: the whole
/// message must fit one command-line argument (at most 128 KiB on Linux).
pub const MAX_EARLIER_BYTES: usize = 48 * 1024;

/// What earlier work left, newest last, as a block of the first message: the newest
/// items up to [`MAX_EARLIER_BYTES`], and a line saying how many older ones were left out.
fn earlier_block(earlier: &[Earlier]) -> String {
    let indent = |s: &str| s.trim().replace('\n', "\n  ");
    let line = |e: &Earlier| match e {
        Earlier::HandOff { stage, by, note } => format!("- `{stage}` stage, handed off by {by}: {}\n", indent(note)),
        Earlier::Answer { question, answer } => format!("- A person answered \"{}\": {}\n", indent(question), indent(answer)),
    };
    let mut kept = Vec::new();
    let mut bytes = 0;
    for e in earlier.iter().rev() {
        let l = line(e);
        if bytes + l.len() > MAX_EARLIER_BYTES {
            break;
        }
        bytes += l.len();
        kept.push(l);
    }
    if earlier.is_empty() {
        return String::new();
    }
    let left_out = earlier.len() - kept.len();
    let mut out = String::from("\n\nWhat earlier work on this task left for you (oldest first):\n");
    if left_out > 0 {
        out.push_str(&format!("- ({left_out} older notes left out: `drover task show` prints them all)\n"));
    }
    out.extend(kept.into_iter().rev());
    out
}

/// The first message an agent gets for a stage of a task, with what earlier stages
/// handed off and the answers people gave.
pub fn stage_prompt(task_title: &str, task_body: &str, stage: &str, place: StagePlace, earlier: &[Earlier]) -> String {
    let next = if place.is_last { "finishes the task" } else { "moves the task to its next stage" };
    let merge = if place.merges {
        " Handing this stage off first merges the task's branch into the base branch: \
         commit everything, and if the merge is refused (a conflict, say) the command says why; \
         fix it on the branch, commit, and hand off again."
    } else {
        ""
    };
    format!(
        "You are working the `{stage}` stage of this task.\n\nTask: {task_title}\n\n{task_body}{}\n\n\
         Work in this directory (a git worktree on the task's own branch) and commit your work. \
         When the stage is done, run `drover task advance --note \"what you did\"`: that hands the stage off and {next}.{merge} \
         `drover task comment TEXT` posts a comment, `drover task block TEXT` files a blocker, \
         and `drover task ask QUESTION` asks a human and waits for the answer.",
        earlier_block(earlier)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOSTILE: &str = "fix $(rm -rf /) `x` \"q\" 'q' ; && | > \n\t 🚀";

    #[test]
    fn each_preset_names_the_program_its_command_starts() {
        for h in Harness::ALL {
            let argv = h.start("p", &Route::default(), &["x".to_string()]).unwrap();
            match h.program() {
                Some(program) => assert_eq!(argv[0], program, "{h:?}"),
                None => assert_eq!(h, Harness::Custom),
            }
        }
    }

    #[test]
    fn names_round_trip() {
        for h in Harness::ALL {
            assert_eq!(Harness::parse(h.as_str()), Ok(h));
        }
        assert!(Harness::parse("bash").is_err());
    }

    #[test]
    fn every_preset_keeps_the_prompt_one_argument() {
        let route = Route { model: Some("m1".into()), ..Route::default() };
        for h in Harness::ALL {
            if h == Harness::Custom {
                continue;
            }
            let argv = h.start(HOSTILE, &route, &[]).unwrap();
            if h.prompt_as_input() {
                assert!(!argv.iter().any(|a| a == HOSTILE));
            } else {
                assert_eq!(argv.iter().filter(|a| a.as_str() == HOSTILE).count(), 1, "{h:?}: {argv:?}");
            }
            assert!(argv[0].chars().all(|c| c.is_ascii_lowercase()));
        }
    }

    #[test]
    fn presets_build_the_documented_command_lines() {
        let r = Route { model: Some("claude-sonnet-4-5".into()), ..Route::default() };
        assert_eq!(
            Harness::Claude.start("hi", &r, &[]).unwrap(),
            ["claude", "--model", "claude-sonnet-4-5", "--mcp-config", MCP_CONFIG, "--", "hi"]
        );
        assert_eq!(Harness::Claude.resume(&Route::default()).unwrap(), ["claude", "--continue", "--mcp-config", MCP_CONFIG]);
        assert_eq!(Harness::Codex.start("hi", &Route::default(), &[]).unwrap(), ["codex", "hi"]);
        assert_eq!(Harness::Codex.resume(&Route::default()).unwrap(), ["codex", "resume", "--last"]);
        assert_eq!(Harness::Gemini.start("hi", &Route::default(), &[]).unwrap(), ["gemini", "-i", "hi"]);
        let aider = ["aider", "--no-gitignore", "--no-analytics", "--no-check-update", "--no-show-release-notes"];
        assert_eq!(Harness::Aider.start("hi", &r, &[]).unwrap(), [&aider[..], &["--model", "claude-sonnet-4-5"]].concat());
        assert_eq!(Harness::Aider.resume(&Route::default()).unwrap(), [&aider[..], &["--restore-chat-history"]].concat());
        let oc = Route { model: Some("gpt-5".into()), provider: Some("openai".into()), ..Route::default() };
        assert_eq!(Harness::Opencode.start("hi", &oc, &[]).unwrap(), ["opencode", "--model", "openai/gpt-5", "--prompt", "hi"]);
        assert_eq!(Harness::Goose.start("hi", &Route::default(), &[]).unwrap(), ["goose", "session"]);
        assert_eq!(Harness::Custom.resume(&Route::default()), None);
    }

    #[test]
    fn custom_templates_substitute_per_argument() {
        let t = vec!["my-agent".to_string(), "--prompt={prompt}".to_string(), "--fixed".to_string()];
        assert_eq!(
            Harness::Custom.start(HOSTILE, &Route::default(), &t).unwrap(),
            ["my-agent".to_string(), format!("--prompt={HOSTILE}"), "--fixed".into()]
        );
        assert_eq!(Harness::Custom.start("x", &Route::default(), &[]), Err(HarnessError::NoTemplate));
    }

    #[test]
    fn a_lost_run_is_resumed_where_the_harness_can() {
        let r = Route::default();
        assert_eq!(opening(Harness::Claude, "p", &r, &[], true).unwrap(), Opening::Resume(Harness::Claude.resume(&r).unwrap()));
        assert_eq!(opening(Harness::Codex, "p", &r, &[], false).unwrap(), Opening::Start(Harness::Codex.start("p", &r, &[]).unwrap()));
        // A custom command cannot resume: it starts over.
        let many = vec!["agent".to_string(), "{prompt}".repeat(MAX_PROMPT_PLACEHOLDERS + 1)];
        assert_eq!(check_template(&many), Err(HarnessError::TooManyPrompts(MAX_PROMPT_PLACEHOLDERS + 1)));
        assert_eq!(check_template(&["a".to_string(), "{prompt}".repeat(MAX_PROMPT_PLACEHOLDERS)]), Ok(()));
        let t = ["agent".to_string(), "{prompt}".to_string()];
        assert_eq!(opening(Harness::Custom, "p", &r, &t, true).unwrap(), Opening::Start(vec!["agent".into(), "p".into()]));
        assert!(resume_message("code").contains("`code` stage"));
    }

    #[test]
    fn the_stage_prompt_names_the_stage_and_the_hand_off() {
        let p = stage_prompt("Fix login", "It breaks on Safari.", "code", StagePlace { is_last: false, merges: false }, &[]);
        assert!(p.contains("`code` stage") && p.contains("Fix login") && p.contains("drover task advance"));
        assert!(!p.contains("merge") && !p.contains("earlier work"));
        assert!(stage_prompt("t", "", "verify", StagePlace { is_last: true, merges: false }, &[]).contains("finishes the task"));
        assert!(stage_prompt("t", "", "merge", StagePlace { is_last: false, merges: true }, &[]).contains("merges the task's branch"));
    }

    #[test]
    fn the_stage_prompt_carries_hand_off_notes_and_answers() {
        let earlier = [
            Earlier::HandOff { stage: "plan", by: "claude-1", note: "Plan in PLAN.md;\nstart with the parser." },
            Earlier::Answer { question: "Which database?", answer: "PostgreSQL 16" },
        ];
        let p = stage_prompt("t", "b", "code", StagePlace { is_last: false, merges: false }, &earlier);
        assert!(p.contains("`plan` stage, handed off by claude-1: Plan in PLAN.md;\n  start with the parser."), "{p}");
        assert!(p.contains("A person answered \"Which database?\": PostgreSQL 16"), "{p}");
        assert!(p.find("plan").unwrap() < p.find("PostgreSQL").unwrap());
    }

    #[test]
    fn old_notes_give_way_so_the_prompt_fits_one_argument() {
        let big = "x".repeat(16 * 1024);
        let stages: Vec<String> = (0..20).map(|i| format!("s{i}")).collect();
        let earlier: Vec<Earlier> = stages.iter().map(|s| Earlier::HandOff { stage: s, by: "a", note: &big }).collect();
        let p = stage_prompt("t", "b", "code", StagePlace { is_last: false, merges: false }, &earlier);
        assert!(p.len() < 128 * 1024, "{}", p.len());
        assert!(p.contains("`s19` stage") && !p.contains("`s0` stage"));
        assert!(p.contains("older notes left out"));
    }
}

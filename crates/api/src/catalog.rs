//! Repositories, agents, their pages and skills.

use crate::{SessionView, TaskView};
use serde::{Deserialize, Serialize};

/// `POST /api/v1/repos`: register a repository and the device clone that has it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AddRepo {
    /// The repository's name in the workspace.
    pub name: String,
    /// A device that has a clone.
    pub device: String,
    /// The clone's path on that device.
    pub path: String,
    /// The branch tasks start from and merge into; None: the branch the clone has
    /// checked out.
    #[serde(default)]
    pub base: Option<String>,
}

/// A repository as listed.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RepoView {
    /// Its name.
    pub name: String,
    /// Devices that have it: (device, path).
    pub devices: Vec<(String, String)>,
    /// The branch tasks start from and merge into (None: the clone's checked-out branch).
    pub base: Option<String>,
}

/// The answer to `POST /api/v1/repos`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RepoAdded {
    /// The device checked its clone (it exists, is a git repository, has the base branch).
    pub checked: bool,
    /// Why it could not be checked (the device is offline): runs then find out.
    #[serde(default)]
    pub unchecked_because: Option<String>,
}

/// `POST /api/v1/agents`: register an agent (the caller is its operator).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CreateAgent {
    /// Its name.
    pub name: String,
    /// `claude`, `codex`, `gemini`, `aider`, `opencode`, `goose` or `custom`.
    pub harness: String,
    /// Model.
    pub model: Option<String>,
    /// Provider.
    pub provider: Option<String>,
    /// Account.
    pub account: Option<String>,
    /// Reasoning effort.
    pub effort: Option<String>,
    /// For `custom`: the command, `{prompt}` replaced in each argument.
    #[serde(default)]
    pub template: Vec<String>,
}

/// An agent as listed.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AgentView {
    /// Its name.
    pub name: String,
    /// Its operator (the member who created it).
    pub operator: String,
    /// Its harness.
    pub harness: String,
    /// Model.
    pub model: Option<String>,
    /// Provider.
    pub provider: Option<String>,
    /// Account.
    #[serde(default)]
    pub account: Option<String>,
    /// Reasoning effort.
    #[serde(default)]
    pub effort: Option<String>,
}

/// What an agent's or a repository's runs cost, all of them.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct PageSpend {
    /// USD; null without usage, or when a run used a model with no price.
    pub cost_usd: Option<f64>,
    /// True when a run used a model with no price.
    pub cost_unknown: bool,
}

/// `GET /api/v1/agents/{name}`: an agent's page.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AgentPage {
    /// The agent.
    pub agent: AgentView,
    /// Its runs: live ones first, then newest first (at most [`PAGE_SESSIONS`]).
    pub sessions: Vec<SessionView>,
    /// True when it has more runs than shown.
    pub more_sessions: bool,
    /// The tasks it is pinned to or has run, newest first.
    pub tasks: Vec<TaskView>,
    /// What all its runs cost.
    pub spend: PageSpend,
}

/// `GET /api/v1/repos/{name}`: a repository's page.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RepoPage {
    /// The repository, with the devices that have it.
    pub repo: RepoView,
    /// Runs in it: live ones first, then newest first (at most [`PAGE_SESSIONS`]).
    pub sessions: Vec<SessionView>,
    /// True when it has more runs than shown.
    pub more_sessions: bool,
    /// Its tasks, newest first.
    pub tasks: Vec<TaskView>,
    /// What all its runs cost.
    pub spend: PageSpend,
}

/// The most runs an agent's or a repository's page lists.
pub const PAGE_SESSIONS: usize = 200;

/// A skill's file, as sent to and from the API (text: skills are instructions).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SkillFile {
    /// Its path inside the skill's folder (`SKILL.md`, `refs/style.md`).
    pub path: String,
    /// Its text.
    pub content: String,
}

/// `PUT /api/v1/skills/{name}`: a skill's files.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PutSkill {
    /// Its files; one is `SKILL.md`.
    pub files: Vec<SkillFile>,
}

/// `GET /api/v1/skills`: one enabled skill.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SkillView {
    /// Its name.
    pub name: String,
    /// Its files' paths.
    pub files: Vec<String>,
    /// Its size, bytes.
    pub bytes: usize,
    /// Who added or last changed it.
    pub created_by: String,
    /// When.
    pub updated_at: String,
}

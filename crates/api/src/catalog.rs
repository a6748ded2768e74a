//! Repositories, agents, their pages and skills.

use crate::{SessionView, TaskView};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// `POST /api/v1/repos`: register a repository and the device clone that has it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
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
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct RepoView {
    /// The name tasks and `drover repo` refer to it by.
    pub name: String,
    /// Devices that have it: (device, path).
    pub devices: Vec<(String, String)>,
    /// The branch tasks start from and merge into (None: the clone's checked-out branch).
    pub base: Option<String>,
}

/// The answer to `POST /api/v1/repos`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct RepoAdded {
    /// The device checked its clone (it exists, is a git repository, has the base branch).
    pub checked: bool,
    /// Why it could not be checked (the device is offline): runs then find out.
    #[serde(default)]
    pub unchecked_because: Option<String>,
}

/// `POST /api/v1/agents`: register an agent (the caller is its operator).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct CreateAgent {
    /// The name tasks pin it by and its runs are listed under.
    pub name: String,
    /// `claude`, `codex`, `gemini`, `aider`, `opencode`, `goose` or `custom`.
    pub harness: String,
    /// The model its harness is told to use (null: the harness's default).
    pub model: Option<String>,
    /// The model provider its harness is pointed at (null: the harness's default).
    pub provider: Option<String>,
    /// Which of the device's provider accounts its runs use (null: the default one).
    pub account: Option<String>,
    /// The reasoning effort passed to its harness (null: the harness's default).
    pub effort: Option<String>,
    /// For `custom`: the command, `{prompt}` replaced in each argument.
    #[serde(default)]
    pub template: Vec<String>,
}

/// An agent as listed.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AgentView {
    /// The name tasks pin it by and its runs are listed under.
    pub name: String,
    /// Its operator (the member who created it).
    pub operator: String,
    /// The agent CLI its runs start (`claude`, `codex`, …, or `custom`).
    pub harness: String,
    /// The model its harness is told to use (null: the harness's default).
    pub model: Option<String>,
    /// The model provider its harness is pointed at (null: the harness's default).
    pub provider: Option<String>,
    /// Which of the device's provider accounts its runs use (null: the default one).
    #[serde(default)]
    pub account: Option<String>,
    /// The reasoning effort passed to its harness (null: the harness's default).
    #[serde(default)]
    pub effort: Option<String>,
}

/// What an agent's or a repository's runs cost, all of them.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
pub struct PageSpend {
    /// USD; null without usage, or when a run used a model with no price.
    pub cost_usd: Option<f64>,
    /// True when a run used a model with no price.
    pub cost_unknown: bool,
}

/// `GET /api/v1/agents/{name}`: an agent's page.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AgentPage {
    /// The agent the page is about: its harness and settings.
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
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
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
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SkillFile {
    /// Its path inside the skill's folder (`SKILL.md`, `refs/style.md`).
    pub path: String,
    /// The file's whole text, as written into each run's skills folder.
    pub content: String,
}

/// `PUT /api/v1/skills/{name}`: a skill's files.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct PutSkill {
    /// Its files; one is `SKILL.md`.
    pub files: Vec<SkillFile>,
}

/// `GET /api/v1/skills`: one enabled skill.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SkillView {
    /// The name runs see it under (its folder's name).
    pub name: String,
    /// Its files' paths.
    pub files: Vec<String>,
    /// Its size, bytes.
    pub bytes: usize,
    /// Who added or last changed it.
    pub created_by: String,
    /// When it was added or last changed (RFC 3339).
    pub updated_at: String,
}

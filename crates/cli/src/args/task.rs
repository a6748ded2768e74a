//! Arguments of the task commands: tasks, workflow, agents, repositories, sandboxes.

use clap::{Args, Subcommand};

/// Stages of a workflow, as given on the command line.
#[derive(Debug, Args, Default)]
pub struct WorkflowArgs {
    /// The stages, comma-separated (default: the workspace's, or plan,code,review,merge,verify).
    #[arg(long, value_delimiter = ',')]
    pub stages: Vec<String>,
    /// Pin an assignee to a stage: STAGE=AGENT (or STAGE=human).
    #[arg(long = "assign")]
    pub assign: Vec<String>,
    /// Hand-offs of this stage merge the task's branch into the repository's base branch
    /// (default: the stage called `merge`).
    #[arg(long = "merge-at", conflicts_with = "no_merge")]
    pub merge_at: Vec<String>,
    /// No stage merges: the work stays on the task's branch.
    #[arg(long)]
    pub no_merge: bool,
    /// This stage's run is set up (worktree, skills) but starts only when a person
    /// activates it (`drover task activate`, or Activate in the web app). Repeatable.
    #[arg(long = "activate")]
    pub activate: Vec<String>,
}

/// Workflow commands.
#[derive(Debug, Subcommand)]
pub enum WorkflowCmd {
    /// Show the stages new tasks get.
    Show,
    /// Set the stages new tasks get (tasks already filed keep theirs).
    Set {
        /// The stages.
        #[command(flatten)]
        workflow: WorkflowArgs,
    },
}

/// Task commands. Inside an agent's run, `--task` defaults to `$DROVER_TASK`.
#[derive(Debug, Subcommand)]
pub enum TaskCmd {
    /// File a task (its first stage is staffed when an agent is pinned to it).
    Create {
        /// The repository it works in.
        #[arg(long)]
        repo: String,
        /// Title.
        #[arg(long)]
        title: String,
        /// Body, in plain language.
        #[arg(long, default_value = "")]
        body: String,
        /// Type (story, bug, chore, …).
        #[arg(long = "type", default_value = "story")]
        kind: String,
        /// Pin this agent to every stage without an assignee.
        #[arg(long)]
        agent: Option<String>,
        /// Stop its runs once its lifetime model spend reaches this many USD.
        #[arg(long)]
        spend_cap: Option<f64>,
        /// Set its first run up without starting it: Activate starts it (as
        /// `--activate FIRST_STAGE`).
        #[arg(long)]
        prepare_only: bool,
        /// The stages and who works them (default: the workspace's workflow).
        #[command(flatten)]
        workflow: WorkflowArgs,
    },
    /// List tasks.
    List,
    /// Show a task: its stages, runs, blockers, questions and activity.
    Show {
        /// The task id (default $DROVER_TASK).
        id: Option<String>,
    },
    /// Hand the current stage off with a note (the run ends completed; the task moves on).
    Advance {
        /// The task id (default $DROVER_TASK).
        #[arg(long)]
        task: Option<String>,
        /// What was done, for whoever works the next stage.
        #[arg(long, default_value = "")]
        note: String,
    },
    /// Post a comment on the task.
    Comment {
        /// The text.
        text: String,
        /// The task id (default $DROVER_TASK).
        #[arg(long)]
        task: Option<String>,
    },
    /// File a blocker; prints its id.
    Block {
        /// What blocks the work.
        text: String,
        /// The task id (default $DROVER_TASK).
        #[arg(long)]
        task: Option<String>,
    },
    /// Why the task is not moving, in one line, with the command that moves it on.
    Why {
        /// The task id.
        id: String,
    },
    /// Resolve a blocker.
    Unblock {
        /// The blocker's id.
        note: String,
    },
    /// Ask a human a question and wait for the answer (printed).
    Ask {
        /// The question.
        question: String,
        /// The task id (default $DROVER_TASK).
        #[arg(long)]
        task: Option<String>,
        /// Give up after this many seconds.
        #[arg(long, default_value_t = 3600.0)]
        timeout: f64,
    },
    /// Answer a question an agent asked.
    Answer {
        /// The question's id.
        note: String,
        /// The answer.
        text: String,
    },
    /// Activate: start the current stage's prepared run (a stage set to wait for it).
    Activate {
        /// The task id.
        id: String,
    },
    /// Change a task before its first run: the branch it starts from and merges into.
    Set {
        /// The task id (default: $DROVER_TASK).
        id: Option<String>,
        /// The base branch (it must exist in the device's clone).
        #[arg(long)]
        base: String,
    },
    /// Launch session: a fresh run for the current stage when none is live.
    Launch {
        /// The task id.
        id: String,
    },
    /// Finish session: move the sandbox toward a normal close.
    Finish {
        /// The task id.
        id: String,
    },
    /// Mark done: stop a live run (it completes) and close the sandbox, keeping the branch.
    MarkDone {
        /// The task id.
        id: String,
    },
    /// Abandon: tear the task's sandbox down without merging and release its run (admins
    /// and owners). The task stays open (`task launch` starts it afresh) unless `--task`.
    Abandon {
        /// The task id.
        id: String,
        /// Abandon the task itself too: it will not run again.
        #[arg(long)]
        task: bool,
    },
    /// Cancel the task (a live run is stopped).
    Cancel {
        /// The task id.
        id: String,
    },
}

/// Agent commands.
#[derive(Debug, Subcommand)]
pub enum AgentCmd {
    /// Register an agent (you become its operator).
    Create {
        /// The agent's name, as tasks and `--agent` will call it.
        name: String,
        /// claude, codex, gemini, aider, opencode, goose or custom.
        #[arg(long)]
        harness: String,
        /// Model.
        #[arg(long)]
        model: Option<String>,
        /// Provider.
        #[arg(long)]
        provider: Option<String>,
        /// Account.
        #[arg(long)]
        account: Option<String>,
        /// Reasoning effort.
        #[arg(long)]
        effort: Option<String>,
        /// For custom: the command after `--`; `{prompt}` in an argument is replaced by the stage's prompt.
        #[arg(last = true)]
        template: Vec<String>,
    },
    /// List agents.
    List,
    /// Show an agent: its harness and route, operator, sessions (live first), tasks and
    /// total spend.
    Show {
        /// The agent's name.
        name: String,
    },
}

/// Repository commands.
#[derive(Debug, Subcommand)]
pub enum RepoCmd {
    /// Register a repository and the device clone that has it.
    Add {
        /// The repository's name.
        name: String,
        /// The device with the clone.
        #[arg(long)]
        device: String,
        /// The clone's absolute path on that device.
        #[arg(long)]
        path: String,
        /// The branch tasks start from and merge into (default: the branch the clone has
        /// checked out).
        #[arg(long)]
        base: Option<String>,
    },
    /// List repositories and the devices that have them.
    List,
    /// Show a repository: its devices and clone paths, base branch, sessions (live
    /// first), tasks and total spend.
    Show {
        /// The repository's name.
        name: String,
    },
}

/// Sandbox commands.
#[derive(Debug, Subcommand)]
pub enum SandboxCmd {
    /// List sandboxes: live (default), open or all.
    List {
        /// live, open or all.
        #[arg(long, default_value = "live")]
        filter: String,
        /// Search text.
        #[arg(long)]
        search: Option<String>,
    },
}

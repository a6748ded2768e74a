-- Tasks, their workflows, agents, repositories, and sandboxes in git worktrees.

CREATE TABLE repos (
    id            TEXT PRIMARY KEY,
    workspace_id  TEXT NOT NULL REFERENCES workspaces(id),
    name          TEXT NOT NULL,
    created_at    TEXT NOT NULL,
    UNIQUE (workspace_id, name)
);

-- Which devices have a repository, and where their clone is.
CREATE TABLE device_repos (
    device_id  TEXT NOT NULL REFERENCES devices(id),
    repo_id    TEXT NOT NULL REFERENCES repos(id),
    path       TEXT NOT NULL,
    PRIMARY KEY (device_id, repo_id)
);

CREATE TABLE agents (
    id            TEXT PRIMARY KEY,
    workspace_id  TEXT NOT NULL REFERENCES workspaces(id),
    name          TEXT NOT NULL,
    operator_id   TEXT NOT NULL REFERENCES members(id),
    harness       TEXT NOT NULL,
    provider      TEXT,
    account       TEXT,
    model         TEXT,
    effort        TEXT,
    template      TEXT NOT NULL DEFAULT '[]',   -- JSON argument list (custom harness)
    created_at    TEXT NOT NULL,
    UNIQUE (workspace_id, name)
);

CREATE TABLE tasks (
    id            TEXT PRIMARY KEY,
    workspace_id  TEXT NOT NULL REFERENCES workspaces(id),
    type          TEXT NOT NULL,
    title         TEXT NOT NULL,
    body          TEXT NOT NULL,
    status        TEXT NOT NULL CHECK (status IN ('open', 'done', 'cancelled', 'abandoned')),
    repo_id       TEXT NOT NULL REFERENCES repos(id),
    workflow      TEXT NOT NULL,               -- JSON: [{"stage": "plan", "assignee": "agent name" | null}]
    stage_index   INTEGER NOT NULL DEFAULT 0,
    attempts      INTEGER NOT NULL DEFAULT 0,  -- runs on the current stage so far
    queued_at     TEXT,                        -- waiting for a slot since
    flagged       TEXT,                        -- why a human must look
    sandbox_id    TEXT,
    created_by    TEXT NOT NULL,
    created_at    TEXT NOT NULL,
    updated_at    TEXT NOT NULL
);
CREATE INDEX tasks_queue ON tasks (queued_at) WHERE queued_at IS NOT NULL;
CREATE INDEX tasks_list ON tasks (workspace_id, created_at);

ALTER TABLE sandboxes ADD COLUMN task_id TEXT;
ALTER TABLE sandboxes ADD COLUMN repo_id TEXT;
ALTER TABLE sandboxes ADD COLUMN branch TEXT;

ALTER TABLE sessions ADD COLUMN task_id TEXT;
ALTER TABLE sessions ADD COLUMN stage TEXT;
ALTER TABLE sessions ADD COLUMN agent_id TEXT;
ALTER TABLE sessions ADD COLUMN handed_off TEXT;   -- why it completes (hand-off, Mark done)
CREATE INDEX sessions_task ON sessions (task_id, created_at);

ALTER TABLE events ADD COLUMN task_id TEXT;
CREATE INDEX events_task ON events (task_id, seq);

-- Session-scoped credentials of agents (only a SHA-256 is kept).
CREATE TABLE session_tokens (
    hash        TEXT PRIMARY KEY,
    session_id  TEXT NOT NULL REFERENCES sessions(id),
    created_at  TEXT NOT NULL,
    revoked_at  TEXT
);

-- Blockers and questions on a task.
CREATE TABLE notes (
    id           TEXT PRIMARY KEY,
    task_id      TEXT NOT NULL REFERENCES tasks(id),
    session_id   TEXT,
    kind         TEXT NOT NULL CHECK (kind IN ('blocker', 'question')),
    text         TEXT NOT NULL,
    answer       TEXT,
    closed_by    TEXT,
    closed_at    TEXT,
    created_by   TEXT NOT NULL,
    created_at   TEXT NOT NULL
);
CREATE INDEX notes_task ON notes (task_id, created_at);

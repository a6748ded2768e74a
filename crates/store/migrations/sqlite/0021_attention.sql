-- What runs wait on a person for: a held tool call (permission), a finished turn
-- (idle), a guess from a still screen (probably_waiting). Open while closed_at is NULL.
CREATE TABLE attention (
    id            TEXT PRIMARY KEY,
    workspace_id  TEXT NOT NULL,
    session_id    TEXT NOT NULL,
    task_id       TEXT,
    kind          TEXT NOT NULL CHECK (kind IN ('permission', 'idle', 'probably_waiting')),
    tool          TEXT,
    subject       TEXT NOT NULL DEFAULT '',
    diff          TEXT,
    always_rules  TEXT NOT NULL DEFAULT '[]',
    clipped       INTEGER NOT NULL DEFAULT 0,
    held          INTEGER NOT NULL DEFAULT 0,
    raised_at     TEXT NOT NULL,
    decision      TEXT,
    message       TEXT,
    decided_by    TEXT,
    closed_at     TEXT,
    closed_reason TEXT
);
CREATE INDEX attention_open ON attention (workspace_id, closed_at);
CREATE INDEX attention_session ON attention (session_id, closed_at);

-- Allow rules people kept for a task ("Approve always"): its later runs start with them.
CREATE TABLE task_allow_rules (
    task_id   TEXT NOT NULL REFERENCES tasks(id),
    rule      TEXT NOT NULL,
    added_by  TEXT NOT NULL,
    added_at  TEXT NOT NULL,
    PRIMARY KEY (task_id, rule)
);

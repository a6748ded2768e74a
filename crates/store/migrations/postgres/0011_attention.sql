-- What runs wait on a person for: a held tool call (permission), a finished turn
-- (idle), a guess from a still screen (probably_waiting). Open while closed_at is NULL.
CREATE TABLE attention (
    id            TEXT COLLATE "C" PRIMARY KEY,
    workspace_id  TEXT COLLATE "C" NOT NULL,
    session_id    TEXT COLLATE "C" NOT NULL,
    task_id       TEXT COLLATE "C",
    kind          TEXT COLLATE "C" NOT NULL CHECK (kind IN ('permission', 'idle', 'probably_waiting')),
    tool          TEXT COLLATE "C",
    subject       TEXT COLLATE "C" NOT NULL DEFAULT '',
    diff          TEXT COLLATE "C",
    always_rules  TEXT COLLATE "C" NOT NULL DEFAULT '[]',
    clipped       INTEGER NOT NULL DEFAULT 0,
    held          INTEGER NOT NULL DEFAULT 0,
    raised_at     TEXT COLLATE "C" NOT NULL,
    decision      TEXT COLLATE "C",
    message       TEXT COLLATE "C",
    decided_by    TEXT COLLATE "C",
    closed_at     TEXT COLLATE "C",
    closed_reason TEXT COLLATE "C"
);
CREATE INDEX attention_open ON attention (workspace_id, closed_at);
CREATE INDEX attention_session ON attention (session_id, closed_at);

-- Allow rules people kept for a task ("Approve always"): its later runs start with them.
CREATE TABLE task_allow_rules (
    task_id   TEXT COLLATE "C" NOT NULL REFERENCES tasks(id),
    rule      TEXT COLLATE "C" NOT NULL,
    added_by  TEXT COLLATE "C" NOT NULL,
    added_at  TEXT COLLATE "C" NOT NULL,
    PRIMARY KEY (task_id, rule)
);

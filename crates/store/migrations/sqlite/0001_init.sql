-- Drover's first schema. Ids are stored in their shown form (`ses_…`); times are UTC
-- RFC 3339 text with a fixed width, so they sort as text.

CREATE TABLE workspaces (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    created_at  TEXT NOT NULL
);

CREATE TABLE members (
    id            TEXT PRIMARY KEY,
    workspace_id  TEXT NOT NULL REFERENCES workspaces(id),
    name          TEXT NOT NULL,
    role          TEXT NOT NULL CHECK (role IN ('owner', 'admin', 'member')),
    created_at    TEXT NOT NULL
);

CREATE TABLE devices (
    id               TEXT PRIMARY KEY,
    workspace_id     TEXT NOT NULL REFERENCES workspaces(id),
    name             TEXT NOT NULL,
    slots            INTEGER NOT NULL,
    last_contact_at  TEXT,
    created_at       TEXT NOT NULL,
    UNIQUE (workspace_id, name)
);

-- Credentials: only a SHA-256 of each token is kept.
CREATE TABLE tokens (
    id            TEXT PRIMARY KEY,
    workspace_id  TEXT NOT NULL REFERENCES workspaces(id),
    kind          TEXT NOT NULL CHECK (kind IN ('member', 'device')),
    member_id     TEXT REFERENCES members(id),
    device_id     TEXT REFERENCES devices(id),
    hash          TEXT NOT NULL UNIQUE,
    label         TEXT NOT NULL,
    created_at    TEXT NOT NULL,
    revoked_at    TEXT
);

CREATE TABLE sandboxes (
    id            TEXT PRIMARY KEY,
    workspace_id  TEXT NOT NULL REFERENCES workspaces(id),
    device_id     TEXT NOT NULL REFERENCES devices(id),
    kind          TEXT NOT NULL CHECK (kind IN ('remote', 'task')),
    title         TEXT NOT NULL,
    cwd           TEXT NOT NULL,
    state         TEXT NOT NULL,
    created_at    TEXT NOT NULL,
    updated_at    TEXT NOT NULL
);

CREATE TABLE sessions (
    id            TEXT PRIMARY KEY,
    workspace_id  TEXT NOT NULL REFERENCES workspaces(id),
    sandbox_id    TEXT NOT NULL REFERENCES sandboxes(id),
    device_id     TEXT NOT NULL REFERENCES devices(id),
    command       TEXT NOT NULL,           -- JSON array of strings
    cwd           TEXT NOT NULL,
    cols          INTEGER NOT NULL,
    rows          INTEGER NOT NULL,
    outcome       TEXT NOT NULL,
    exit_code     INTEGER,
    reason        TEXT,
    pid           INTEGER,
    stop_requested_by TEXT,
    created_by    TEXT NOT NULL,
    created_at    TEXT NOT NULL,
    started_at    TEXT,
    ended_at      TEXT,
    output_bytes  INTEGER NOT NULL DEFAULT 0,
    final_offset  INTEGER
);
CREATE INDEX sessions_live ON sessions (device_id) WHERE outcome IN ('starting', 'running');
CREATE INDEX sessions_created ON sessions (workspace_id, created_at);

-- A session's output bytes live in files beside the database (recordings/<id>.raw and
-- .idx, the same format the device's shim writes); sessions.output_bytes is the length
-- committed, and anything a crash left beyond it is cut back when the file is reopened.

-- Non-output events of a recording (resizes, markers), for export.
CREATE TABLE recording_marks (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id  TEXT NOT NULL,
    t_micros    INTEGER NOT NULL,
    kind        TEXT NOT NULL,
    data        TEXT NOT NULL
);
CREATE INDEX recording_marks_session ON recording_marks (session_id, seq);

-- The activity record.
CREATE TABLE events (
    seq           INTEGER PRIMARY KEY AUTOINCREMENT,
    id            TEXT NOT NULL UNIQUE,
    workspace_id  TEXT NOT NULL,
    session_id    TEXT,
    kind          TEXT NOT NULL,
    actor         TEXT NOT NULL,
    detail        TEXT NOT NULL,
    at            TEXT NOT NULL
);
CREATE INDEX events_session ON events (session_id, seq);

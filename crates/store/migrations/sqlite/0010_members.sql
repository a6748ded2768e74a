-- Members, invitations, passwords and personal tokens; each session's operator (the
-- human it answers to); one-time device enrollment tokens.

-- A member signs in with their name and a password (argon2id PHC string; NULL until set).
ALTER TABLE members ADD COLUMN password_hash TEXT;
-- Names are unique regardless of case, so `Alice` cannot pose as `alice`.
CREATE UNIQUE INDEX members_name ON members (workspace_id, name COLLATE NOCASE);

-- Invitations an owner sends (only a SHA-256 of the code is kept).
CREATE TABLE invites (
    hash          TEXT PRIMARY KEY,
    id            TEXT NOT NULL UNIQUE,
    workspace_id  TEXT NOT NULL REFERENCES workspaces(id),
    role          TEXT NOT NULL CHECK (role IN ('owner', 'admin', 'member')),
    created_by    TEXT NOT NULL REFERENCES members(id),
    created_at    TEXT NOT NULL,
    expires_at    TEXT NOT NULL,
    used_at       TEXT,
    used_by       TEXT REFERENCES members(id)
);

-- The human a session answers to: its agent's operator, or whoever started a task-free one.
ALTER TABLE sessions ADD COLUMN operator_id TEXT REFERENCES members(id);
UPDATE sessions SET operator_id = COALESCE(
    (SELECT a.operator_id FROM agents a WHERE a.id = sessions.agent_id),
    (SELECT m.id FROM members m WHERE m.workspace_id = sessions.workspace_id AND m.name = sessions.created_by));

-- When each credential was last used (shown in `drover token list`).
ALTER TABLE tokens ADD COLUMN last_used_at TEXT;
CREATE INDEX tokens_member ON tokens (member_id, created_at);

-- One-time device enrollment tokens (only a SHA-256 is kept): `drover device add` issues
-- one, the device trades it for its own credential.
CREATE TABLE enrollments (
    hash          TEXT PRIMARY KEY,
    device_id     TEXT NOT NULL REFERENCES devices(id),
    created_by    TEXT NOT NULL,
    created_at    TEXT NOT NULL,
    expires_at    TEXT NOT NULL,
    used_at       TEXT
);

-- The web app: one-time login links, browser sessions, and what the sandbox list reads
-- without scanning sessions (each sandbox's last run, run count and whether it is live).

ALTER TABLE sandboxes ADD COLUMN last_session_id TEXT;
ALTER TABLE sandboxes ADD COLUMN runs INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sandboxes ADD COLUMN live INTEGER NOT NULL DEFAULT 0;

UPDATE sandboxes SET
    last_session_id = (SELECT s.id FROM sessions s WHERE s.sandbox_id = sandboxes.id ORDER BY s.created_at DESC, s.id DESC LIMIT 1),
    runs = (SELECT COUNT(*) FROM sessions s WHERE s.sandbox_id = sandboxes.id),
    live = EXISTS (SELECT 1 FROM sessions s WHERE s.sandbox_id = sandboxes.id AND s.outcome IN ('starting', 'running'));

CREATE INDEX sandboxes_list ON sandboxes (workspace_id, created_at, id);
CREATE INDEX sandboxes_live ON sandboxes (workspace_id, created_at, id) WHERE live = 1;
CREATE INDEX sessions_device ON sessions (device_id, created_at);

-- One-time login links (only a SHA-256 of the code is kept).
CREATE TABLE login_links (
    hash        TEXT PRIMARY KEY,
    member_id   TEXT NOT NULL REFERENCES members(id),
    created_at  TEXT NOT NULL,
    expires_at  TEXT NOT NULL,
    used_at     TEXT
);

-- Browser sessions behind the HttpOnly cookie (only a SHA-256 of the cookie is kept).
CREATE TABLE web_sessions (
    hash        TEXT PRIMARY KEY,
    member_id   TEXT NOT NULL REFERENCES members(id),
    created_at  TEXT NOT NULL,
    expires_at  TEXT NOT NULL,
    revoked_at  TEXT
);

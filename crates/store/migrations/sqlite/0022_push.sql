-- Getting told (Web Push). The server's VAPID key pair (RFC 8292), made once and shared
-- by every replica: the private key as PKCS#8 in base64, the public key as the
-- uncompressed P-256 point in base64url (what browsers subscribe with).
CREATE TABLE push_keys (
    id           TEXT PRIMARY KEY,
    private_key  TEXT NOT NULL,
    public_key   TEXT NOT NULL,
    created_at   TEXT NOT NULL
);

-- A browser's subscription (RFC 8030 endpoint, RFC 8291 keys), one per endpoint.
CREATE TABLE push_subscriptions (
    id            TEXT PRIMARY KEY,
    workspace_id  TEXT NOT NULL,
    member_id     TEXT NOT NULL,
    endpoint      TEXT NOT NULL UNIQUE,
    p256dh        TEXT NOT NULL,
    auth          TEXT NOT NULL,
    created_at    TEXT NOT NULL
);
CREATE INDEX push_subscriptions_member ON push_subscriptions (member_id);
CREATE INDEX push_subscriptions_workspace ON push_subscriptions (workspace_id);

-- What a member chose to be told of (no row: the defaults).
CREATE TABLE notification_choices (
    member_id      TEXT PRIMARY KEY,
    events         TEXT NOT NULL,
    quiet          TEXT,
    zone           TEXT NOT NULL,
    cooldown_secs  INTEGER NOT NULL,
    updated_at     TEXT NOT NULL
);

-- Notices collecting for a member, pushed as one once the coalescing window after the
-- first has passed (sent_at set then).
CREATE TABLE push_batches (
    id            TEXT PRIMARY KEY,
    member_id     TEXT NOT NULL,
    items         TEXT NOT NULL,
    created_at    TEXT NOT NULL,
    sent_at       TEXT
);
CREATE INDEX push_batches_open ON push_batches (sent_at, created_at);

-- When a member was last told about a run (the per-run cool-down).
CREATE TABLE push_heard (
    member_id   TEXT NOT NULL,
    session_id  TEXT NOT NULL,
    at          TEXT NOT NULL,
    PRIMARY KEY (member_id, session_id)
);

-- One push to one subscription: stored before it is sent, retried with backoff.
CREATE TABLE push_deliveries (
    id               TEXT PRIMARY KEY,
    subscription_id  TEXT NOT NULL,
    payload          TEXT NOT NULL,
    state            TEXT NOT NULL CHECK (state IN ('pending', 'delivered', 'failed')),
    attempts         INTEGER NOT NULL DEFAULT 0,
    next_attempt_at  TEXT,
    last_status      INTEGER,
    last_error       TEXT,
    created_at       TEXT NOT NULL,
    delivered_at     TEXT
);
CREATE INDEX push_deliveries_due ON push_deliveries (state, next_attempt_at);

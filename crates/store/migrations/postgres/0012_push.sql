-- Getting told (Web Push). The server's VAPID key pair (RFC 8292), made once and shared
-- by every replica: the private key as PKCS#8 in base64, the public key as the
-- uncompressed P-256 point in base64url (what browsers subscribe with).
CREATE TABLE push_keys (
    id           TEXT COLLATE "C" PRIMARY KEY,
    private_key  TEXT COLLATE "C" NOT NULL,
    public_key   TEXT COLLATE "C" NOT NULL,
    created_at   TEXT COLLATE "C" NOT NULL
);

-- A browser's subscription (RFC 8030 endpoint, RFC 8291 keys), one per endpoint.
CREATE TABLE push_subscriptions (
    id            TEXT COLLATE "C" PRIMARY KEY,
    workspace_id  TEXT COLLATE "C" NOT NULL,
    member_id     TEXT COLLATE "C" NOT NULL,
    endpoint      TEXT COLLATE "C" NOT NULL UNIQUE,
    p256dh        TEXT COLLATE "C" NOT NULL,
    auth          TEXT COLLATE "C" NOT NULL,
    created_at    TEXT COLLATE "C" NOT NULL
);
CREATE INDEX push_subscriptions_member ON push_subscriptions (member_id);
CREATE INDEX push_subscriptions_workspace ON push_subscriptions (workspace_id);

-- What a member chose to be told of (no row: the defaults).
CREATE TABLE notification_choices (
    member_id      TEXT COLLATE "C" PRIMARY KEY,
    events         TEXT COLLATE "C" NOT NULL,
    quiet          TEXT COLLATE "C",
    zone           TEXT COLLATE "C" NOT NULL,
    cooldown_secs  BIGINT NOT NULL,
    updated_at     TEXT COLLATE "C" NOT NULL
);

-- Notices collecting for a member, pushed as one once the coalescing window after the
-- first has passed (sent_at set then).
CREATE TABLE push_batches (
    id            TEXT COLLATE "C" PRIMARY KEY,
    member_id     TEXT COLLATE "C" NOT NULL,
    items         TEXT COLLATE "C" NOT NULL,
    created_at    TEXT COLLATE "C" NOT NULL,
    sent_at       TEXT COLLATE "C"
);
CREATE INDEX push_batches_open ON push_batches (sent_at, created_at);

-- When a member was last told about a run (the per-run cool-down).
CREATE TABLE push_heard (
    member_id   TEXT COLLATE "C" NOT NULL,
    session_id  TEXT COLLATE "C" NOT NULL,
    at          TEXT COLLATE "C" NOT NULL,
    PRIMARY KEY (member_id, session_id)
);

-- One push to one subscription: stored before it is sent, retried with backoff.
CREATE TABLE push_deliveries (
    id               TEXT COLLATE "C" PRIMARY KEY,
    subscription_id  TEXT COLLATE "C" NOT NULL,
    payload          TEXT COLLATE "C" NOT NULL,
    state            TEXT COLLATE "C" NOT NULL CHECK (state IN ('pending', 'delivered', 'failed')),
    attempts         BIGINT NOT NULL DEFAULT 0,
    next_attempt_at  TEXT COLLATE "C",
    last_status      BIGINT,
    last_error       TEXT COLLATE "C",
    created_at       TEXT COLLATE "C" NOT NULL,
    delivered_at     TEXT COLLATE "C"
);
CREATE INDEX push_deliveries_due ON push_deliveries (state, next_attempt_at);

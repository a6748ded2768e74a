-- Webhook endpoints and their deliveries: each delivery is written in the same
-- transaction as the event it announces, before anything is sent (at least once).

CREATE TABLE webhook_endpoints (
    id               TEXT PRIMARY KEY,
    workspace_id     TEXT NOT NULL REFERENCES workspaces(id),
    url              TEXT NOT NULL,
    events           TEXT NOT NULL,     -- JSON array of event types (session.lost, …)
    secrets          TEXT NOT NULL,     -- JSON [{"secret": "whsec_…", "expires_at": null | time}], newest first
    disabled_reason  TEXT,              -- set when disabled (a 410 answer)
    created_by       TEXT NOT NULL,
    created_at       TEXT NOT NULL
);
CREATE INDEX webhook_endpoints_ws ON webhook_endpoints (workspace_id);

CREATE TABLE webhook_deliveries (
    id               TEXT PRIMARY KEY,  -- msg_…: the webhook-id, the receiver's idempotency key
    endpoint_id      TEXT NOT NULL REFERENCES webhook_endpoints(id),
    event_type       TEXT NOT NULL,
    payload          TEXT NOT NULL,     -- the exact body sent
    state            TEXT NOT NULL CHECK (state IN ('pending', 'delivered', 'failed')),
    attempts         INTEGER NOT NULL DEFAULT 0,
    next_attempt_at  TEXT,
    last_status      INTEGER,           -- the receiver's HTTP status
    last_error       TEXT,
    created_at       TEXT NOT NULL,
    delivered_at     TEXT
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE state = 'pending';
CREATE INDEX webhook_deliveries_log ON webhook_deliveries (endpoint_id, created_at);

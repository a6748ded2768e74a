-- Leases on the background monitors (stale sweep, scheduler, webhook sender, retention):
-- one server holds each at a time and renews it; when it stops renewing, another takes
-- it once it expires.
CREATE TABLE leases (
    name        TEXT PRIMARY KEY,
    holder      TEXT NOT NULL,
    expires_at  TEXT NOT NULL
);

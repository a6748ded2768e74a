-- Model usage per run, as its device last reported it (read from the harness's own
-- records): the whole report as JSON, and its cost in nano-dollars for sums.
ALTER TABLE sessions ADD COLUMN usage TEXT;
ALTER TABLE sessions ADD COLUMN cost_generation INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN cost_cache_read INTEGER NOT NULL DEFAULT 0;
-- Responses on models with no price: while any, the run's cost is unknown.
ALTER TABLE sessions ADD COLUMN cost_unpriced INTEGER NOT NULL DEFAULT 0;
-- Route changes already recorded as events.
ALTER TABLE sessions ADD COLUMN route_changes INTEGER NOT NULL DEFAULT 0;
-- A sandbox's runs, for its cost.
CREATE INDEX sessions_sandbox ON sessions (sandbox_id);

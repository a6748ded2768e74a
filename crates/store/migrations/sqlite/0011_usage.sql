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

-- Spend caps (nano-dollars): a task's over its lifetime, a workspace's per calendar
-- month (UTC). Reaching one stops the spending run (released, reason "spend cap").
ALTER TABLE tasks ADD COLUMN spend_cap INTEGER;
ALTER TABLE workspaces ADD COLUMN spend_cap INTEGER;
-- Why a stop was requested, when not by a person (e.g. "spend cap: …").
ALTER TABLE sessions ADD COLUMN stop_reason TEXT;
-- The workspace's own prices (JSON: [[model, price], …]; nano-dollars per token), which
-- win over the shipped table.
ALTER TABLE workspaces ADD COLUMN prices TEXT;

-- Skills a workspace enabled: folders of instructions installed into each task run's
-- sandbox (files: JSON [[relative path, content], …]).
CREATE TABLE skills (
    workspace_id  TEXT NOT NULL REFERENCES workspaces(id),
    name          TEXT NOT NULL,
    files         TEXT NOT NULL,
    created_by    TEXT NOT NULL,
    updated_at    TEXT NOT NULL,
    PRIMARY KEY (workspace_id, name)
);
-- Which skills reached each run (JSON [{name, outcome, detail}]), as its device reported.
ALTER TABLE sessions ADD COLUMN skills TEXT;
-- The workspace's spend this month, summed from the index alone.
CREATE INDEX sessions_cost ON sessions (workspace_id, created_at, cost_generation, cost_cache_read);

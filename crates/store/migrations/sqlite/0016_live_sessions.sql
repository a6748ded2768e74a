-- A workspace's live sessions: the overview's stale list and its count of runs on
-- finished tasks read these, not every session the workspace ever had (at 100,000
-- sessions they scanned them all: ~17 ms each).
CREATE INDEX sessions_live_workspace ON sessions (workspace_id) WHERE outcome IN ('starting', 'running');

-- Retention: a finished session's recording and events are pruned after the window;
-- its row (the summary) stays, saying when it was pruned.

ALTER TABLE sessions ADD COLUMN pruned_at TEXT;
CREATE INDEX sessions_prunable ON sessions (ended_at) WHERE ended_at IS NOT NULL AND pruned_at IS NULL;
CREATE INDEX events_at ON events (at);

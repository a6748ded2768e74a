-- When a session's output last arrived: the stale monitor's "quiet for" on whichever
-- replica runs it.
ALTER TABLE sessions ADD COLUMN last_output_at TEXT COLLATE "C";

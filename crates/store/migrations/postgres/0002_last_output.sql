-- When a session's output last arrived: the stale monitor's "quiet for" on whichever
-- replica runs it.
ALTER TABLE sessions ADD COLUMN last_output_at TEXT COLLATE "C";

-- The sandbox search's device-name branch walks a device's sandboxes.
CREATE INDEX sandboxes_device ON sandboxes (device_id, created_at);

-- The stale monitor's flags on live sessions (seed 001 "When a session goes quiet").

ALTER TABLE sessions ADD COLUMN stale_flag TEXT;    -- device_silent | sandbox_retired, while flagged
ALTER TABLE sessions ADD COLUMN stale_since TEXT;   -- when the flag was raised

-- A device whose credential an admin revoked: refused, and its live sessions flagged.

ALTER TABLE devices ADD COLUMN revoked_at TEXT;

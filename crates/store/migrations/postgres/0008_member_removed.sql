-- When a member was removed (offboarded): they sign in no more, their history stays theirs.
ALTER TABLE members ADD COLUMN removed_at TEXT;

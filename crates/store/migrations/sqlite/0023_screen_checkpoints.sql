-- Screen checkpoints: a session's whole terminal state at a point of its output (the
-- escape sequences that rebuild it), so the screen at any point is the nearest one plus
-- the bytes after it. About one per MiB of output and one at the end; retention keeps
-- only the last.
CREATE TABLE screen_checkpoints (
    session_id    TEXT NOT NULL,
    start_offset  INTEGER NOT NULL,
    t_micros      INTEGER NOT NULL,
    cols          INTEGER NOT NULL,
    rows          INTEGER NOT NULL,
    data          TEXT NOT NULL,
    PRIMARY KEY (session_id, start_offset)
);

-- How far a session's checkpoints reach, when the last was made, and whether the one at
-- its end exists. Sessions from before have none: they are built in the background.
ALTER TABLE sessions ADD COLUMN checkpointed_to INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN checkpointed_at TEXT;
ALTER TABLE sessions ADD COLUMN screen_final INTEGER NOT NULL DEFAULT 0;
CREATE INDEX sessions_screen_due ON sessions (ended_at) WHERE screen_final = 0 AND ended_at IS NOT NULL AND pruned_at IS NULL;

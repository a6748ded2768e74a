-- Session output in the database (as on PostgreSQL), so one commit makes a whole group
-- of sessions' output durable. Recording files earlier versions kept in `recordings/`
-- are moved in by the server when it opens the database.
CREATE TABLE output_chunks (
    session_id    TEXT NOT NULL,
    start_offset  INTEGER NOT NULL,
    t_micros      INTEGER NOT NULL,
    data          BLOB NOT NULL,
    PRIMARY KEY (session_id, start_offset)
);

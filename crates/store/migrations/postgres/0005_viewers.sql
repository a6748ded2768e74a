-- Each replica's viewers of a session: summed over live replicas, how many watch it
-- (the session page's "attached") and how many can type (what the device's shim is
-- told, so it leaves terminal queries to them). `reading` orders a replica's writes:
-- an older reading never overwrites a newer one.
CREATE TABLE replica_viewers (
    session_id   TEXT COLLATE "C" NOT NULL,
    replica      TEXT COLLATE "C" NOT NULL,
    attached     INTEGER NOT NULL,
    interactive  INTEGER NOT NULL,
    reading      BIGINT NOT NULL,
    PRIMARY KEY (session_id, replica)
);

-- Sign-in attempts (a password, an invitation code, an enrollment token) under each
-- rate-limit key (a client address, a member name), so the limit holds across every
-- replica behind one address, not per replica.
CREATE TABLE login_attempts (
    seq  BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    key  TEXT COLLATE "C" NOT NULL,
    at   TEXT COLLATE "C" NOT NULL
);
CREATE INDEX login_attempts_key ON login_attempts (key, at);
CREATE INDEX login_attempts_at ON login_attempts (at);

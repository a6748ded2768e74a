-- Search for the sandbox list: a trigram index over each sandbox's title and device
-- name, so a substring search does not scan every sandbox.

CREATE VIRTUAL TABLE sandbox_search USING fts5(title, device, tokenize = 'trigram');

INSERT INTO sandbox_search (rowid, title, device)
    SELECT b.rowid, b.title, d.name FROM sandboxes b JOIN devices d ON d.id = b.device_id;

CREATE TRIGGER sandboxes_search_insert AFTER INSERT ON sandboxes BEGIN
    INSERT INTO sandbox_search (rowid, title, device)
        VALUES (new.rowid, new.title, (SELECT name FROM devices WHERE id = new.device_id));
END;

CREATE TRIGGER sandboxes_search_update AFTER UPDATE OF title ON sandboxes BEGIN
    UPDATE sandbox_search SET title = new.title WHERE rowid = new.rowid;
END;

CREATE TRIGGER sandboxes_search_delete AFTER DELETE ON sandboxes BEGIN
    DELETE FROM sandbox_search WHERE rowid = old.rowid;
END;

-- Searching by a session's id finds its sandbox.
CREATE INDEX sandboxes_last_session ON sandboxes (last_session_id);

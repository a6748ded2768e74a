-- When each chunk was stored (µs since the Unix epoch, the server's clock). A live
-- session's length and last output time are now read from its last chunk, so a commit
-- of output writes only `output_chunks`; `sessions.output_bytes` and `last_output_at`
-- hold them from the session's end on (its output may be pruned later).
ALTER TABLE output_chunks ADD COLUMN stored_at BIGINT;

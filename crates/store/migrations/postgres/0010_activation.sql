-- The stage (by index) a person activated: a stage that starts only when activated
-- (its run prepared, not started) starts once this names it.
ALTER TABLE tasks ADD COLUMN activated_stage INTEGER;

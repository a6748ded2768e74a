-- The branch a task starts from and merges into, when a person set it (drover task set
-- --base) before its first run; otherwise its repository's.
ALTER TABLE tasks ADD COLUMN base_branch TEXT;

-- A workspace's default workflow, and the branch a repository's tasks start from and
-- merge into.

ALTER TABLE workspaces ADD COLUMN workflow TEXT;   -- JSON like tasks.workflow; NULL: the default stages
ALTER TABLE repos ADD COLUMN base_branch TEXT;     -- NULL: the branch the device's clone has checked out
ALTER TABLE sandboxes ADD COLUMN base_branch TEXT; -- the repository's base when the sandbox was made

-- PLACEHOLDER on branch history only: migration 0006 belongs to another helper's branch.
-- The runner needs contiguous numbers; the coordinator drops this file when merging 0006.
SELECT 1;

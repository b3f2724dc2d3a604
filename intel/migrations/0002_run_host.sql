-- 0002: the worker host each run ran on (issue 23; record.Run.Host): '' for
-- the fleet's own machine, and for every run recorded before this migration.
-- Nothing aggregates it yet; it is kept so that a question about hosts (do
-- runs fail more on one?) can be asked of the runs.

ALTER TABLE runs ADD COLUMN host TEXT NOT NULL DEFAULT '';

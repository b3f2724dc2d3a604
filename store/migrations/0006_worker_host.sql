-- 0006: the worker host a worker ran on (issue 23; history.Worker.Host), so
-- that `fleet run --resume` runs a follow-up turn of a remote worker on the
-- same host. Rows written before this migration, and every worker that ran
-- on the fleet's own machine, have ''.

ALTER TABLE workers ADD COLUMN host TEXT NOT NULL DEFAULT '';

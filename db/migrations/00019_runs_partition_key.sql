-- The run archive's primary key for partitioning (issue 21 item 2), first
-- half: a unique index on (run_id, finished_at) for the archive as it is.
--
-- Migration 00020 makes runs a table partitioned by finished_at and keeps
-- the existing table as one of its partitions. A unique index of a
-- partitioned table must contain the partition key, so the primary key
-- becomes (run_id, finished_at), and the kept table needs an index of that
-- shape before it can be attached without building one under a lock.
-- This migration builds it concurrently (a unique index build reads the
-- whole archive, which a plain CREATE INDEX would do while blocking every
-- completion) under a temporary name, then swaps it in, as 00014 and 00018
-- do; a run that failed at any point can run again.
--
-- It is a migration of its own, not the first statement of 00020: once
-- 00020 has converted the table, CREATE INDEX CONCURRENTLY on runs (then
-- partitioned) is an error, so a 00020 that failed after converting could
-- not run again. 00020 changes the table in transactions of its own.

-- +goose NO TRANSACTION
-- +goose Up
drop index concurrently if exists workq.runs_run_id_finished_next;
create unique index concurrently runs_run_id_finished_next on workq.runs (run_id, finished_at);
-- +goose StatementBegin
do $$
begin
    drop index if exists workq.runs_run_id_finished;
    alter index workq.runs_run_id_finished_next rename to runs_run_id_finished;
end
$$;
-- +goose StatementEnd

-- +goose Down
drop index concurrently if exists workq.runs_run_id_finished_next;
drop index concurrently if exists workq.runs_run_id_finished;

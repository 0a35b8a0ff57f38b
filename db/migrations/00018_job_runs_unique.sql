-- Unique jobs beyond "while live" (issue 19 item 6; River's UniqueOpts).
--
-- unique_key is a digest the client computes from what makes a job the same
-- as another (its kind, and as asked its queue, its args and the start of
-- its period: docs/go.md "Unique jobs"); unique_states is a bitmask of the
-- statuses in which a run holds its key: bit n is status n (0 ready,
-- 1 in_progress, 2 done, 3 failed, 4 cancelled). job_runs_unique admits at
-- most one row per key among the rows whose status bit is set in their own
-- mask, so "once per hour by args" holds across finished rows and under
-- concurrency (ON CONFLICT against this index: two concurrent enqueues of
-- one key make one row). A row leaves the index when it moves to a status
-- outside its mask, or is deleted (retention frees its key).
--
-- The mask is per row rather than one index per set of states: one index
-- serves every combination, and rows without a key (every job that is not
-- unique) add no entry. Both columns are nullable without a default or a
-- check (a table CHECK is evaluated on every UPDATE, so on every claim and
-- completion): adding them rewrites nothing, and a row without a key stores
-- two null bits. The client writes both or neither.
--
-- The index is built concurrently (a unique index build scans the whole
-- table, which a plain CREATE INDEX would do while blocking writes) under
-- a temporary name, then swapped in, as 00014 does; a run that failed at
-- any point can run again.

-- +goose NO TRANSACTION
-- +goose Up
alter table workq.job_runs add column if not exists unique_key bytea;
alter table workq.job_runs add column if not exists unique_states smallint;
drop index concurrently if exists workq.job_runs_unique_next;
create unique index concurrently job_runs_unique_next on workq.job_runs (unique_key)
    where unique_key is not null and (unique_states >> status) & 1 = 1;
-- +goose StatementBegin
do $$
begin
    drop index if exists workq.job_runs_unique;
    alter index workq.job_runs_unique_next rename to job_runs_unique;
end
$$;
-- +goose StatementEnd

-- +goose Down
drop index concurrently if exists workq.job_runs_unique_next;
drop index concurrently if exists workq.job_runs_unique;
alter table workq.job_runs drop column if exists unique_states;
alter table workq.job_runs drop column if exists unique_key;

-- Flow control (issue 30): a job run's limit key, the key that per-key
-- limits and fair claims count by (a tenant, a customer, a downstream
-- account: EnqueueOpts.LimitKey, or the args' LimitKey method).
--
-- limit_key: nullable without a default or a check (a table CHECK is
--     evaluated on every UPDATE, so on every claim and completion; the
--     client checks the length): adding it rewrites nothing, and a job
--     without a key stores one null bit.
-- job_runs_key_claim: the ready rows of each key in claim order, for the
--     fair claim's walk over keys (workq_flow_pick); partial, so a job
--     without a key adds no entry.
-- job_runs_key_running: the in-progress rows of each key, for the
--     concurrency per key; it leaves out locked_until, as
--     job_runs_in_progress does, so heartbeats stay HOT.
--
-- Both indexes are built concurrently (every row is scanned, and a plain
-- CREATE INDEX would block enqueues meanwhile); a run that failed at any
-- point can run again.

-- +goose NO TRANSACTION
-- +goose Up
alter table workq.job_runs add column if not exists limit_key text;
drop index concurrently if exists workq.job_runs_key_claim;
create index concurrently job_runs_key_claim on workq.job_runs (queue, limit_key, priority desc, run_at, id)
    where status = 0 and limit_key is not null;
drop index concurrently if exists workq.job_runs_key_running;
create index concurrently job_runs_key_running on workq.job_runs (queue, limit_key)
    where status = 1 and limit_key is not null;

-- +goose Down
drop index concurrently if exists workq.job_runs_key_running;
drop index concurrently if exists workq.job_runs_key_claim;
alter table workq.job_runs drop column if exists limit_key;

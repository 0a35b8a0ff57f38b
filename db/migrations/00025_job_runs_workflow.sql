-- Workflows (issue 31): job runs that depend on job runs. A task of a
-- workflow is an ordinary job run with three things more:
--
-- workflow_id: the workflow it belongs to (workq.workflows, 00026), null for
--     every job outside workflows. Nullable without a default, a check or a
--     foreign key (a foreign key's trigger would fire on every enqueue, and
--     a CHECK on every claim and completion): adding it rewrites nothing, and
--     a job outside workflows stores one null bit. It never changes.
-- output: what the handler of a done job returned (Job.SetOutput): JSON,
--     null for a job that returned none. Written by the completion that
--     ends the job done, deleted with the row. The other work tables get
--     the column too (00026): it is one of the lease template's columns,
--     which the shared completion statement writes.
-- awaited: set by Client.Wait on a job outside a workflow, so that the row
--     trigger of 00026 notifies its end (workflow tasks always notify). Null
--     for every job nobody waits for.
-- status -1, pending: a task whose dependencies have not all ended. The
--     claim reads status = 0 only, so a pending task is never claimed; it
--     counts as live (status < 2: the dedup and unique indexes, retention
--     leave it alone).
-- No index on workflow_id: a workflow's tasks are found through
-- workflow_tasks (00026), whose (workflow_id, name) index a task writes
-- once; an index here would take an entry at every claim and completion of
-- a task (neither is a HOT update).

-- +goose NO TRANSACTION
-- +goose Up
alter table workq.job_runs add column if not exists workflow_id bigint;
alter table workq.job_runs add column if not exists awaited boolean;
alter table workq.job_runs add column if not exists output jsonb;
alter table workq.job_runs drop constraint if exists job_runs_status_ck;
alter table workq.job_runs add constraint job_runs_status_ck check (status between -1 and 4) not valid;
alter table workq.job_runs validate constraint job_runs_status_ck;

-- +goose Down
alter table workq.job_runs drop constraint if exists job_runs_status_ck;
alter table workq.job_runs add constraint job_runs_status_ck check (status between 0 and 4) not valid;
alter table workq.job_runs validate constraint job_runs_status_ck;
alter table workq.job_runs drop column if exists output;
alter table workq.job_runs drop column if exists awaited;
alter table workq.job_runs drop column if exists workflow_id;

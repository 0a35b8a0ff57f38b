-- A done row is its item's last attempt (issue 32; docs/design.md §31).
--
-- Since 00027 the completion that ends a job run done moves its row to
-- job_runs_done, and it also wrote the attempt to the run archive (runs):
-- two rows and three index entries per job for one fact. The done row
-- already holds what the archive's row held (id, queue, attempt, lease
-- version, worker, claim time, finish time; the outcome is done, with no
-- error) but the owner token, which a finished row does not keep: its run
-- id (the table, id and lease version, unique to one claim) names the
-- claim as well. From here the completion writes no run for a row it
-- moves: an item's attempts are its runs plus, when it moved, its done
-- row. Rows kept in their work table (a workflow's task, a schedule's
-- slot, unique over the completed state, every row of the other tables)
-- still archive every attempt in runs.
--
-- runs_all is the archive as it was, for SQL of one's own: runs, and every
-- done row as the run it stands for (owner_token null). workq's own readers
-- (an item's attempts, the completion's Resolve, the dashboard's counts)
-- read both tables in statements of their own, each by its own index.
--
-- Rows that 00027's completion moved have both: this migration deletes
-- each such pair's run, so that runs_all counts each attempt once.
--
-- +goose Up
delete from workq.runs r
using workq.job_runs_done d
where r.work_table = 'job_runs' and r.item_id = d.id and r.lease_version = d.lease_version and r.outcome = 'done';

create view workq.runs_all as
    select r.run_id, r.work_table, r.item_id, r.queue, r.attempt, r.lease_version, r.owner_token, r.worker_id,
           r.started_at, r.finished_at, r.outcome, r.error
    from workq.runs r
    union all
    select workq.workq_run_id('job_runs', d.id, d.lease_version), 'job_runs'::text, d.id, d.queue, d.attempts, d.lease_version,
           null::uuid, coalesce(d.claimed_by, ''), coalesce(d.claimed_at, d.finished_at), d.finished_at, 'done'::text, null::text
    from workq.job_runs_done d;

-- +goose Down
-- Each done row's attempt goes back to runs, under the nil token (runs
-- wants one; the done row did not keep it).
drop view workq.runs_all;
insert into workq.runs (run_id, work_table, item_id, queue, attempt, lease_version, owner_token, worker_id, started_at, finished_at, outcome, error)
select workq.workq_run_id('job_runs', d.id, d.lease_version), 'job_runs', d.id, d.queue, d.attempts, d.lease_version,
       '00000000-0000-0000-0000-000000000000'::uuid, coalesce(d.claimed_by, ''), coalesce(d.claimed_at, d.finished_at), d.finished_at, 'done', null
from workq.job_runs_done d
on conflict do nothing;

-- name: RunsListByItem :many
-- RunsListByItem lists the archived attempts of one work item in claim order: one range of the primary key (workq_run_id). An item that ended done and moved has one more, its done row (LeaseDoneRuns).
select * from workq.runs
where run_id between workq.workq_run_id(@work_table::text, @item_id::bigint, 0)
                 and workq.workq_run_id(@work_table::text, @item_id::bigint, 72057594037927935)
order by run_id;

-- name: RunsGet :one
-- RunsGet reads one archived attempt by run id (not a done row's: see LeaseDoneRuns).
select * from workq.runs where run_id = @run_id;

-- name: DayPartitionsAdd :one
-- DayPartitionsAdd makes the day partitions of a day-partitioned table (runs, the run archive, or a done table such as job_runs_done) from today (UTC) to days_ahead days on, and one for every day with rows in its DEFAULT partition (moving them in), leaving out days that ended more than older_than_ms ago (0: none); it returns how many it made (workq_day_partitions_add, migration 00027).
select workq.workq_day_partitions_add(@parent::text, now(), @days_ahead::integer, now() - nullif(@older_than_ms::bigint, 0) * interval '1 millisecond')::integer as added;

-- name: DayPartitionDrop :many
-- DayPartitionDrop drops the oldest partition of a day-partitioned table whose whole day ended more than older_than_ms ago (retention), and returns its name and estimated rows; no row when there is none (workq_day_partition_drop: one partition per call, each a short transaction).
select d.dropped::text as dropped, d.rows_estimate::bigint as rows_estimate
from workq.workq_day_partition_drop(@parent::text, now() - (@older_than_ms::bigint) * interval '1 millisecond') as d (dropped, rows_estimate);

-- name: DayPartitionsDeleteOld :one
-- DayPartitionsDeleteOld deletes up to max_rows rows that finished more than older_than_ms ago from the partitions of a day-partitioned table that are not one day wide (its DEFAULT partition, and runs_legacy, the archive from before partitioning) and, with in_days, from the day partitions that began before that age (an age under a day), and returns how many (retention; workq_day_partitions_delete_old).
select workq.workq_day_partitions_delete_old(@parent::text, now() - (@older_than_ms::bigint) * interval '1 millisecond', @max_rows::integer, @in_days::boolean)::bigint as deleted;

-- name: RunsByIDs :many
-- RunsByIDs reads the archived attempts with the given run ids: a completion flush that is retried after an error learns from them which of its attempts an unseen commit already ended (with LeaseDoneRuns for the attempts that moved their rows).
select run_id, owner_token, outcome from workq.runs where run_id = any(@run_ids::uuid[]);

-- name: RunsLastMinute :many
-- RunsLastMinute counts, per work table and queue, the attempts that ended in the last minute by the database clock (completions, including leases the reaper expired) and how many of those also started in it (claims that already ended); operator actions (revived, cancelled) are not attempts. A done job that moved is its own last attempt (migration 00028): one range of runs_finished, and one of job_runs_done's BRIN in today's partition.
select t.work_table, t.queue,
       count(*)::bigint as ended,
       count(*) filter (where t.started_at > now() - interval '1 minute')::bigint as started
from (select r.work_table, r.queue, r.started_at from workq.runs r
      where r.finished_at > now() - interval '1 minute' and r.outcome not in ('revived', 'cancelled')
      union all
      select 'job_runs'::text, d.queue, d.claimed_at from workq.job_runs_done d
      where d.finished_at > now() - interval '1 minute') t
group by t.work_table, t.queue
order by t.work_table, t.queue;

-- name: RunsEndedBetween :many
-- RunsEndedBetween counts, per work table, queue and outcome, the attempts that ended in (after, until] (operator actions, revived and cancelled, are not attempts): the dashboard's sampler reads each interval once, so its cost is the attempts of one interval. A done job that moved is its own last attempt (migration 00028): one range of runs_finished, and one of job_runs_done's BRIN in the interval's partitions.
select t.work_table, t.queue, t.outcome, count(*)::bigint as count
from (select r.work_table, r.queue, r.outcome from workq.runs r
      where r.finished_at > @after and r.finished_at <= @until and r.outcome not in ('revived', 'cancelled')
      union all
      select 'job_runs'::text, d.queue, 'done'::text from workq.job_runs_done d
      where d.finished_at > @after and d.finished_at <= @until) t
group by t.work_table, t.queue, t.outcome
order by t.work_table, t.queue, t.outcome;

-- name: RunsClock :one
-- RunsClock is the database clock, which runs' finished_at is written on.
select now()::timestamptz as now;

-- name: SchedulesNow :one
-- SchedulesNow returns the time a schedule operation runs at: the caller's clock when given, else the database clock.
select coalesce(sqlc.narg('now')::timestamptz, now())::timestamptz as now;

-- name: SchedulesInsert :one
-- SchedulesInsert adds one schedule (declared: by a Client's PeriodicJobs); the caller has validated every field and computed next_run_at.
insert into workq.schedules (name, queue, kind, payload, cron, timezone, priority, max_attempts,
                       enabled, next_run_at, overlap, misfire, misfire_cap, declared)
values (@name, @queue, @kind, @payload, @cron, @timezone, @priority, @max_attempts,
        @enabled, sqlc.narg('next_run_at')::timestamptz, @overlap, @misfire, @misfire_cap, @declared)
on conflict (name) do nothing
returning id;

-- name: SchedulesGetForUpdate :one
-- SchedulesGetForUpdate reads one schedule by name and locks it for a read-modify-write (update, enable, trigger).
select * from workq.schedules where name = @name for no key update;

-- name: SchedulesUpdate :exec
-- SchedulesUpdate writes every user-settable field of one schedule (the caller read it for update and merged the change).
update workq.schedules set
    queue = @queue, kind = @kind, payload = @payload, cron = @cron, timezone = @timezone,
    priority = @priority, max_attempts = @max_attempts, enabled = @enabled,
    next_run_at = sqlc.narg('next_run_at')::timestamptz, overlap = @overlap, misfire = @misfire,
    misfire_cap = @misfire_cap, updated_at = now()
where id = @id;

-- name: SchedulesDelete :execrows
-- SchedulesDelete removes one schedule by name; its job runs stay, with schedule_id set to null by the foreign key.
delete from workq.schedules where name = @name;

-- name: SchedulesGet :one
-- SchedulesGet reads one schedule by name with the status of its last run (null when it has none or retention removed it).
select s.*, j.status as last_run_status
from workq.schedules s left join workq.job_runs j on j.id = s.last_run_id
where s.name = @name;

-- name: SchedulesList :many
-- SchedulesList reads every schedule in name order with the status of its last run.
select s.*, j.status as last_run_status
from workq.schedules s left join workq.job_runs j on j.id = s.last_run_id
order by s.name;

-- name: SchedulesDue :many
-- SchedulesDue locks up to batch enabled schedules whose next slot is due at now (schedules_due), skipping those another scheduler holds, with whether each one's last run is still live (ready or in progress).
select s.id, s.name, s.cron, s.timezone, s.next_run_at::timestamptz as next_run_at, s.overlap, s.misfire, s.misfire_cap,
       -- a scalar subquery, not EXISTS: the planner may hash an EXISTS over
       -- all of job_runs, this one is a primary-key probe per schedule
       coalesce((select j.status < 2 from workq.job_runs j where j.id = s.last_run_id), false)::boolean as last_run_live
from workq.schedules s
where s.enabled and s.next_run_at <= @now::timestamptz
order by s.next_run_at
limit @batch
for no key update of s skip locked;

-- name: SchedulesMaterialize :many
-- SchedulesMaterialize inserts one job run per (schedule, scheduled time) slot, run_at the slot; a slot that already has its run is skipped by the unique index job_runs_schedule_slot (exactly once across schedulers). With notify it wakes the workers of every queue that got a run.
with ins as (
    insert into workq.job_runs (queue, kind, payload, priority, max_attempts, run_at, schedule_id, scheduled_time)
    select s.queue, s.kind, s.payload, s.priority, s.max_attempts, sl.scheduled_time, s.id, sl.scheduled_time
    from (select unnest(@schedule_ids::bigint[]) as schedule_id,
                 unnest(@scheduled_times::timestamptz[]) as scheduled_time) sl
    join workq.schedules s on s.id = sl.schedule_id
    on conflict (schedule_id, scheduled_time) where schedule_id is not null do nothing
    returning id, schedule_id, scheduled_time, queue
),
notified as (
    select pg_notify('workq_job_runs', q.queue) as sent
    from (select distinct ins.queue from ins) q
    where @notify::boolean
)
-- A cross join with a count: a SELECT CTE that nothing reads never runs (see JobRunsEnqueueMany).
select ins.id, ins.schedule_id::bigint as schedule_id, ins.scheduled_time::timestamptz as scheduled_time
from ins cross join (select count(*) as n from notified) x;

-- name: SchedulesAdvance :exec
-- SchedulesAdvance moves each ticked schedule to its next slot and records its newest run (has_run) and the slots its overlap policy skipped.
update workq.schedules s set
    next_run_at = u.next_run_at,
    last_run_id = case when u.has_run then u.last_run_id else s.last_run_id end,
    last_run_at = case when u.has_run then u.last_run_at else s.last_run_at end,
    skipped_runs = s.skipped_runs + u.skipped,
    last_skipped_at = case when u.skipped > 0 then u.last_skipped_at else s.last_skipped_at end
from (
    select unnest(@ids::bigint[]) as id, unnest(@next_run_ats::timestamptz[]) as next_run_at,
           unnest(@has_run::boolean[]) as has_run, unnest(@last_run_ids::bigint[]) as last_run_id,
           unnest(@last_run_ats::timestamptz[]) as last_run_at, unnest(@skipped::bigint[]) as skipped,
           unnest(@last_skipped_ats::timestamptz[]) as last_skipped_at
) u
where s.id = u.id;

-- name: SchedulesPark :exec
-- SchedulesPark takes a schedule whose stored cron no longer parses out of the due set (next_run_at null) so the scheduler stops retrying it; an update with a valid cron brings it back.
update workq.schedules set next_run_at = null where id = @id;

-- name: SchedulesLiveRun :one
-- SchedulesLiveRun returns the last run of a schedule when it is still live (ready or in progress).
select j.id from workq.job_runs j where j.id = @id and j.status < 2;

-- name: SchedulesTrigger :one
-- SchedulesTrigger enqueues one run of a schedule now, outside its slots (scheduled_time null, so it never takes a slot), records it as the schedule's last run, and wakes the queue's workers.
with ins as (
    insert into workq.job_runs (queue, kind, payload, priority, max_attempts, schedule_id)
    select s.queue, s.kind, s.payload, s.priority, s.max_attempts, s.id
    from workq.schedules s where s.id = @id
    returning id, queue
),
upd as (
    update workq.schedules s set last_run_id = ins.id, last_run_at = @now::timestamptz
    from ins where s.id = @id
),
notified as (
    select pg_notify('workq_job_runs', ins.queue) as sent from ins
)
select ins.id from ins cross join (select count(*) as n from notified) x;

-- name: TimersEnqueue :one
-- TimersEnqueue schedules one timer, due at due_time (or after delay_ms when due_time is null).
insert into workq.timers (queue, topic, payload, due_time, run_at, priority, max_attempts)
select @queue, @topic, @payload, d.due, d.due, @priority, @max_attempts
from (select coalesce(sqlc.narg('due_time')::timestamptz, now() + (@delay_ms::bigint) * interval '1 millisecond') as due) d
returning id, due_time;

-- name: TimersEnqueueMany :many
-- TimersEnqueueMany schedules many timers in one statement, in input order.
insert into workq.timers (queue, topic, payload, due_time, run_at, priority, max_attempts)
select u.queue, u.topic, u.payload::jsonb, u.due_time, u.due_time, u.priority, u.max_attempts
from (
    select unnest(@queues::text[]) as queue, unnest(@topics::text[]) as topic, unnest(@payloads::text[]) as payload,
           unnest(@due_times::timestamptz[]) as due_time, unnest(@priorities::smallint[]) as priority,
           unnest(@max_attempts::integer[]) as max_attempts
) u
returning id, due_time;

-- name: TimersCancel :many
-- TimersCancel cancels the ready timers among ids (status cancelled, last_error cancelled, cancelled_at = finished_at), and returns the ids it cancelled.
update workq.timers set status = 4, last_error = 'cancelled', finished_at = now(), cancelled_at = now(), updated_at = now()
where id = any(@ids::bigint[]) and status = 0
returning id;

-- name: TimersClaim :many
-- TimersClaim leases up to max_rows due timers of one queue (run_at, id) under owner_token, a fresh token the caller mints for this claim alone, within the global limit of the queue; with a resume point (resume_run_at) it reads from there instead of from the queue's start, past the claim-index entries earlier claims left dead. Expired leases are reaped by LeaseReapExpired (the claimer runs it for its queue about once a second).
with candidates as (
    select r.id from workq.timers r
    where r.queue = @queue and r.status = 0 and r.run_at <= now()
      -- the resume point (JobRunsClaim, design.md 4.1a): from run_at on
      and r.run_at >= coalesce(sqlc.narg('resume_run_at')::timestamptz, '-infinity')
    order by r.run_at, r.id
    limit workq.workq_claim_budget('timers', @queue, @max_rows::integer)
    for no key update skip locked
)
update workq.timers j set
    status = 1,
    owner_token = @owner_token::uuid,
    locked_until = now() + (@lease_ms::bigint) * interval '1 millisecond',
    lease_version = greatest(j.lease_version + 1, (select workq.workq_epoch())),
    attempts = j.attempts + 1,
    claimed_at = now(),
    claimed_by = @worker_id::text,
    updated_at = now()
-- Not a join with candidates: the planner cannot estimate the budget limit
-- (it assumes 10% of the ready rows) and would hash or merge join the table.
where j.id = any(array(select c.id from candidates c))
returning j.id, j.topic, j.payload, j.due_time, j.priority, j.run_at, j.attempts, j.max_attempts,
          j.lease_version, j.locked_until, j.created_at;

-- name: TimersClaimIDs :many
-- TimersClaimIDs leases the ready timers among ids under owner_token, as TimersClaim does: the second statement of a flow claim (JobRunsClaimIDs), claimed_at the pick's clock.
update workq.timers j set
    status = 1,
    owner_token = @owner_token::uuid,
    locked_until = sqlc.arg('claimed_at')::timestamptz + (@lease_ms::bigint) * interval '1 millisecond',
    lease_version = greatest(j.lease_version + 1, (select workq.workq_epoch())),
    attempts = j.attempts + 1,
    claimed_at = sqlc.arg('claimed_at')::timestamptz,
    claimed_by = @worker_id::text,
    updated_at = now()
where j.id = any(@ids::bigint[]) and j.status = 0
returning j.id, j.topic, j.payload, j.due_time, j.priority, j.run_at, j.attempts, j.max_attempts,
          j.lease_version, j.locked_until, j.created_at;

-- name: TimersGet :one
-- TimersGet reads one timer.
select * from workq.timers where id = @id;

-- name: TimersSchedule :one
-- TimersSchedule schedules one timer due at due_time (or now() + delay_ms when due_time is null, on the database clock); with notify it wakes the queue's workers (NOTIFY workq_timers, at commit) when the timer is due within notify_within_ms.
with ins as (
    insert into workq.timers (queue, topic, payload, due_time, run_at, priority, max_attempts)
    select @queue, @topic, @payload, d.due, d.due, @priority, @max_attempts
    from (select coalesce(sqlc.narg('due_time')::timestamptz, now() + (@delay_ms::bigint) * interval '1 millisecond') as due) d
    returning id, due_time
),
notified as (
    select pg_notify('workq_timers', @queue::text) as sent
    from ins
    where @notify::boolean and ins.due_time <= now() + (@notify_within_ms::bigint) * interval '1 millisecond'
)
-- A cross join with a count, not a left join: a SELECT CTE that nothing
-- reads never runs (see JobRunsEnqueueMany).
select ins.id, ins.due_time, (ins.due_time <= now())::boolean as due_now
from ins cross join (select count(*) as n from notified) x;

-- name: TimersScheduleMany :many
-- TimersScheduleMany schedules many timers in one statement: each is due at its due_time when its delay_ms is negative, else at now() + delay_ms; with notify it wakes the workers of every queue that has a timer due within notify_within_ms. Ids grow in input order.
with u as (
    select unnest(@queues::text[]) as queue, unnest(@topics::text[]) as topic, unnest(@payloads::text[]) as payload,
           unnest(@due_times::timestamptz[]) as due_time, unnest(@delays_ms::bigint[]) as delay_ms,
           unnest(@priorities::smallint[]) as priority, unnest(@max_attempts::integer[]) as max_attempts
),
d as materialized (
    select u.queue, u.topic, u.payload, u.priority, u.max_attempts,
           case when u.delay_ms < 0 then u.due_time else now() + u.delay_ms * interval '1 millisecond' end as due
    from u
),
ins as (
    insert into workq.timers (queue, topic, payload, due_time, run_at, priority, max_attempts)
    select d.queue, d.topic, d.payload::jsonb, d.due, d.due, d.priority, d.max_attempts from d
    returning id, due_time
),
notified as (
    select pg_notify('workq_timers', q.queue) as sent
    from (select distinct d.queue from d
          where d.due <= now() + (@notify_within_ms::bigint) * interval '1 millisecond') q
    where @notify::boolean
)
-- A cross join, not a left join: see TimersSchedule.
select ins.id, ins.due_time, (ins.due_time <= now())::boolean as due_now
from ins cross join (select count(*) as n from notified) x;

-- name: TimersCancelOne :one
-- TimersCancelOne cancels one timer if it is ready and reports the status it found, in one statement: the row is locked first (waiting for a claim or completion in flight), so the status read is the current one and nothing can change it before the cancel applies. No row: no such timer.
with cur as materialized (
    select t.id, t.status, t.finished_at, t.cancelled_at from workq.timers t
    where t.id = @id
    for no key update
),
cancelled as (
    update workq.timers t set status = 4, last_error = 'cancelled', finished_at = now(), cancelled_at = now(), updated_at = now()
    from cur
    where t.id = cur.id and cur.status = 0
    returning t.id
)
select cur.id, cur.status,
       (cur.status = 4)::boolean as was_cancelled,
       (select count(*) from cancelled)::bigint = 1 as cancelled
from cur;

-- name: TimersNextDue :one
-- TimersNextDue returns how many milliseconds (rounded up), on the database clock, until the earliest ready timer of a queue is due (negative: due already); no row when the queue has none. One row of the claim index.
select ceil(extract(epoch from (r.run_at - now())) * 1000)::bigint as wait_ms
from workq.timers r
where r.queue = @queue and r.status = 0
order by r.run_at
limit 1;

-- name: TimersPage :many
-- TimersPage lists items newest first below before_id (keyset pagination over the primary key: rows inserted meanwhile have higher ids and never shift a later page), filtered by queue, status, topic, due time (at or after due_after, before due_before), creation time and a text in last_error, case-insensitive (null: any), and at or above min_id (admin bounds the ids a text search reads with it).
select * from workq.timers t
where t.id < @before_id::bigint
  and (sqlc.narg('queue')::text is null or t.queue = sqlc.narg('queue')::text)
  and (sqlc.narg('status')::smallint is null or t.status = sqlc.narg('status')::smallint)
  and (sqlc.narg('kind')::text is null or t.topic = sqlc.narg('kind')::text)
  and (sqlc.narg('created_after')::timestamptz is null or t.created_at >= sqlc.narg('created_after')::timestamptz)
  and (sqlc.narg('created_before')::timestamptz is null or t.created_at < sqlc.narg('created_before')::timestamptz)
  and t.id >= @min_id::bigint
  and (sqlc.narg('due_after')::timestamptz is null or t.due_time >= sqlc.narg('due_after')::timestamptz)
  and (sqlc.narg('due_before')::timestamptz is null or t.due_time < sqlc.narg('due_before')::timestamptz)
  and (sqlc.narg('error_text')::text is null or strpos(lower(t.last_error), lower(sqlc.narg('error_text')::text)) > 0)
order by t.id desc
limit @max_rows::integer;

-- name: TimersPageAsc :many
-- TimersPageAsc is TimersPage oldest first: items above after_id (the same keyset walk up the primary key, or up the failed index; rows inserted meanwhile have higher ids and come on a later page), with the same filters, and at or below max_id (admin bounds the ids a text or metadata search reads with it).
select * from workq.timers t
where t.id > @after_id::bigint
  and (sqlc.narg('queue')::text is null or t.queue = sqlc.narg('queue')::text)
  and (sqlc.narg('status')::smallint is null or t.status = sqlc.narg('status')::smallint)
  and (sqlc.narg('kind')::text is null or t.topic = sqlc.narg('kind')::text)
  and (sqlc.narg('created_after')::timestamptz is null or t.created_at >= sqlc.narg('created_after')::timestamptz)
  and (sqlc.narg('created_before')::timestamptz is null or t.created_at < sqlc.narg('created_before')::timestamptz)
  and t.id <= @max_id::bigint
  and (sqlc.narg('due_after')::timestamptz is null or t.due_time >= sqlc.narg('due_after')::timestamptz)
  and (sqlc.narg('due_before')::timestamptz is null or t.due_time < sqlc.narg('due_before')::timestamptz)
  and (sqlc.narg('error_text')::text is null or strpos(lower(t.last_error), lower(sqlc.narg('error_text')::text)) > 0)
order by t.id
limit @max_rows::integer;

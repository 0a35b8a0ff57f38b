-- name: TimersEnqueue :one
-- TimersEnqueue schedules one timer, due at due_time (or after delay_ms when due_time is null).
insert into timers (queue, topic, payload, due_time, run_at, priority, max_attempts)
select @queue, @topic, @payload, d.due, d.due, @priority, @max_attempts
from (select coalesce(sqlc.narg('due_time')::timestamptz, now() + (@delay_ms::bigint) * interval '1 millisecond') as due) d
returning id, due_time;

-- name: TimersEnqueueMany :many
-- TimersEnqueueMany schedules many timers in one statement, in input order.
insert into timers (queue, topic, payload, due_time, run_at, priority, max_attempts)
select u.queue, u.topic, u.payload::jsonb, u.due_time, u.due_time, u.priority, u.max_attempts
from (
    select unnest(@queues::text[]) as queue, unnest(@topics::text[]) as topic, unnest(@payloads::text[]) as payload,
           unnest(@due_times::timestamptz[]) as due_time, unnest(@priorities::smallint[]) as priority,
           unnest(@max_attempts::integer[]) as max_attempts
) u
returning id, due_time;

-- name: TimersCancel :many
-- TimersCancel fails timers that have not started yet (ready) with last_error cancelled, and returns the ids it cancelled.
update timers set status = 3, last_error = 'cancelled', finished_at = now(), updated_at = now()
where id = any(@ids::bigint[]) and status = 0
returning id;

-- name: TimersClaim :many
-- TimersClaim leases up to max_rows due timers of one queue (run_at, id) under owner_token, a fresh token the caller mints for this claim alone, within the global limit of the queue. Expired leases are reaped by LeaseReapExpired (the claimer runs it for its queue about once a second).
with candidates as (
    select r.id from timers r
    where r.queue = @queue and r.status = 0 and r.run_at <= now()
    order by r.run_at, r.id
    limit workq_claim_budget('timers', @queue, @max_rows::integer)
    for no key update skip locked
)
update timers j set
    status = 1,
    owner_token = @owner_token::uuid,
    locked_until = now() + (@lease_ms::bigint) * interval '1 millisecond',
    lease_version = j.lease_version + 1,
    attempts = j.attempts + 1,
    claimed_at = now(),
    claimed_by = @worker_id::text,
    updated_at = now()
-- Not a join with candidates: the planner cannot estimate the budget limit
-- (it assumes 10% of the ready rows) and would hash or merge join the table.
where j.id = any(array(select c.id from candidates c))
returning j.id, j.topic, j.payload, j.due_time, j.priority, j.run_at, j.attempts, j.max_attempts,
          j.lease_version, j.locked_until, j.created_at;

-- name: TimersGet :one
-- TimersGet reads one timer.
select * from timers where id = @id;

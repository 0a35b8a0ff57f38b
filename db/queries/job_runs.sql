-- name: JobRunsEnqueue :one
-- JobRunsEnqueue inserts one job run, or returns the id of the live run that already holds its dedup key (inserted = false); with notify it also wakes the workers of the queue (NOTIFY workq_job_runs, delivered at commit).
with ins as (
    insert into job_runs (queue, kind, payload, priority, run_at, max_attempts, dedup_key, schedule_id, scheduled_time)
    values (
        @queue, @kind, @payload, @priority,
        coalesce(sqlc.narg('run_at')::timestamptz, now() + (@delay_ms::bigint) * interval '1 millisecond'),
        @max_attempts, sqlc.narg('dedup_key')::text, sqlc.narg('schedule_id')::bigint, sqlc.narg('scheduled_time')::timestamptz)
    on conflict (dedup_key) where dedup_key is not null and status < 2 do nothing
    returning id
),
notified as (
    select pg_notify('workq_job_runs', @queue::text) as sent
    where @notify::boolean and exists (select 1 from ins)
)
select ins.id, true as inserted from ins left join notified on true
union all
select j.id, false as inserted from job_runs j
where j.dedup_key = sqlc.narg('dedup_key')::text and j.status < 2 and not exists (select 1 from ins)
limit 1;

-- name: JobRunsEnqueueMany :many
-- JobRunsEnqueueMany inserts many job runs in one statement; rows whose dedup key a live run holds are skipped (not returned); with notify it wakes the workers of every queue in the batch.
with notified as (
    select pg_notify('workq_job_runs', q.queue) as sent
    from (select distinct unnest(@queues::text[]) as queue) q
    where @notify::boolean
),
ins as (
insert into job_runs (queue, kind, payload, priority, run_at, max_attempts, dedup_key)
select unnest(@queues::text[]), unnest(@kinds::text[]), unnest(@payloads::text[])::jsonb,
       unnest(@priorities::smallint[]), now() + unnest(@delays_ms::bigint[]) * interval '1 millisecond',
       unnest(@max_attempts::integer[]), nullif(unnest(@dedup_keys::text[]), '')
on conflict (dedup_key) where dedup_key is not null and status < 2 do nothing
returning id, dedup_key
)
-- A cross join, not a left join: the planner drops a left join to a one-row
-- subquery whose columns are unused, and a SELECT CTE that nothing reads
-- never runs, so pg_notify was never called (issue 7 item 10).
select ins.id, ins.dedup_key from ins cross join (select count(*) as n from notified) x;

-- name: JobRunsEnqueueManyPlain :many
-- JobRunsEnqueueManyPlain inserts many job runs that have no dedup key, in input order, without ON CONFLICT (which makes every row a speculative insertion, 10-20% of the insert); with notify it wakes the workers of every queue in the batch.
with notified as (
    select pg_notify('workq_job_runs', q.queue) as sent
    from (select distinct unnest(@queues::text[]) as queue) q
    where @notify::boolean
),
ins as (
insert into job_runs (queue, kind, payload, priority, run_at, max_attempts)
select unnest(@queues::text[]), unnest(@kinds::text[]), unnest(@payloads::text[])::jsonb,
       unnest(@priorities::smallint[]), now() + unnest(@delays_ms::bigint[]) * interval '1 millisecond',
       unnest(@max_attempts::integer[])
returning id
)
-- A cross join, not a left join: see JobRunsEnqueueMany.
select ins.id from ins cross join (select count(*) as n from notified) x;

-- name: JobRunsLatestByDedupKeys :many
-- JobRunsLatestByDedupKeys finds the newest run holding each dedup key whatever its status (rare path: a duplicate whose live run finished before it was looked up; no index covers finished keys).
select distinct on (dedup_key) id, dedup_key from job_runs
where dedup_key = any(@dedup_keys::text[])
order by dedup_key, id desc;

-- name: JobRunsLiveByDedupKeys :many
-- JobRunsLiveByDedupKeys finds the live (ready or in-progress) runs holding the given dedup keys.
select id, dedup_key from job_runs
where dedup_key = any(@dedup_keys::text[]) and status < 2;

-- name: JobRunsClaim :many
-- JobRunsClaim leases up to max_rows due job runs of one queue (priority desc, run_at, id) under owner_token, a fresh token the caller mints for this claim alone, within the global limit of the queue; with reclaim_expired it first reaps the expired leases of that queue (claimable from the next claim on).
with expired as (
    select x.id, x.owner_token from job_runs x
    where @reclaim_expired::boolean and x.queue = @queue and x.status = 1 and x.locked_until <= now()
    order by x.id
    limit @max_rows::integer
    for no key update skip locked
),
-- The lost tokens by id, for the archive: RETURNING shows the nulled token, and a
-- join of reaped with expired was planned as a nested loop (quadratic in the rows reaped).
expired_tokens as materialized (
    select jsonb_object_agg(x.id, x.owner_token) as by_id from expired x
),
reaped as (
    update job_runs j set
        status = case when j.attempts >= j.max_attempts then 3 else 0 end,
        owner_token = null,
        locked_until = null,
        run_at = now(),
        last_error = format('lease expired on attempt %s of %s (worker %s)%s', j.attempts, j.max_attempts, j.claimed_by,
                            case when j.attempts >= j.max_attempts then '; no attempts left' else '' end),
        finished_at = case when j.attempts >= j.max_attempts then now() end,
        updated_at = now()
    where j.id = any(array(select e.id from expired e)) and j.status = 1 and j.locked_until <= now()
    returning j.id, j.queue, j.attempts, j.lease_version, j.claimed_at, j.claimed_by, j.last_error
),
reaped_runs as (
    insert into runs (run_id, work_table, item_id, queue, attempt, lease_version, owner_token, worker_id, started_at, finished_at, outcome, error)
    select workq_run_id('job_runs', r.id, r.lease_version), 'job_runs', r.id, r.queue, r.attempts, r.lease_version, (t.by_id ->> r.id::text)::uuid, r.claimed_by, r.claimed_at, now(), 'expired', r.last_error
    from reaped r, expired_tokens t
),
candidates as (
    select r.id from job_runs r
    where r.queue = @queue and r.status = 0 and r.run_at <= now()
    order by r.priority desc, r.run_at, r.id
    limit workq_claim_budget('job_runs', @queue, @max_rows::integer)
    for no key update skip locked
)
update job_runs j set
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
returning j.id, j.kind, j.payload, j.priority, j.run_at, j.attempts, j.max_attempts,
          j.lease_version, j.locked_until, j.created_at;

-- name: JobRunsHeartbeat :many
-- JobRunsHeartbeat extends the unexpired leases of many job runs held by one token and returns the ids it extended; rows locked by a concurrent completion or reap are skipped (not extended) rather than waited for, so a heartbeat can never deadlock with them.
with held as (
    select h.id from job_runs h
    where h.id = any(@ids::bigint[]) and h.owner_token = @owner_token::uuid and h.status = 1 and h.locked_until > now()
    for no key update skip locked
)
update job_runs set locked_until = now() + (@lease_ms::bigint) * interval '1 millisecond'
where id = any(array(select held.id from held)) and owner_token = @owner_token::uuid and status = 1
returning id;

-- name: JobRunsComplete :many
-- JobRunsComplete ends many attempts in one statement, each guarded by its own owner token (done, retry with a delay or failed when exhausted, failed, snoozed or released without using an attempt), archives each attempt in runs, and returns the rows it applied to.
with o as materialized (
    select unnest(@ids::bigint[]) as id, unnest(@owner_tokens::text[])::uuid as owner_token, unnest(@outcomes::text[]) as outcome,
           unnest(@errors::text[]) as error, unnest(@delays_ms::bigint[]) as delay_ms
),
u as (
    update job_runs j set
        status = case
            when o.outcome = 'done' then 2
            when o.outcome = 'failed' or (o.outcome = 'retry' and j.attempts >= j.max_attempts) then 3
            else 0 end,
        attempts = case when o.outcome in ('snoozed', 'released') then j.attempts - 1 else j.attempts end,
        run_at = case when o.outcome in ('retry', 'snoozed', 'released')
                      then now() + o.delay_ms * interval '1 millisecond' else j.run_at end,
        last_error = case when o.outcome in ('retry', 'failed') then nullif(o.error, '') else j.last_error end,
        finished_at = case when o.outcome in ('done', 'failed') or (o.outcome = 'retry' and j.attempts >= j.max_attempts)
                           then now() end,
        owner_token = null,
        locked_until = null,
        updated_at = now()
    from o
    -- Guarded by id + owner token. A row carrying a token is in progress (the lease
    -- CHECK constraint), so status = 1 is implied; it is not written out because it
    -- lets the planner drive this join from the in-progress index on a stale
    -- one-row estimate, a nested loop that is quadratic in the batch size.
    where j.id = o.id and j.owner_token = o.owner_token
      and o.outcome in ('done', 'retry', 'failed', 'snoozed', 'released')
    returning j.id, j.status, j.queue, j.attempts, j.lease_version, j.claimed_at, j.claimed_by, o.owner_token, o.outcome, o.error
),
archived as (
    insert into runs (run_id, work_table, item_id, queue, attempt, lease_version, owner_token, worker_id, started_at, finished_at, outcome, error)
    select workq_run_id('job_runs', u.id, u.lease_version), 'job_runs', u.id, u.queue,
           case when u.outcome in ('snoozed', 'released') then u.attempts + 1 else u.attempts end,
           u.lease_version, u.owner_token, u.claimed_by, u.claimed_at, now(),
           case when u.status = 3 then 'failed' else u.outcome end, nullif(u.error, '')
    from u
)
select u.id, u.status from u;

-- name: JobRunsReapExpired :many
-- JobRunsReapExpired requeues up to max_rows job runs whose lease expired (or fails those with no attempts left), archives the lost attempts, and is safe to run from many reapers at once.
with expired as (
    select id, owner_token from job_runs
    where status = 1 and locked_until <= now()
    order by id
    limit @max_rows::integer
    for no key update skip locked
),
-- The lost tokens by id, for the archive: RETURNING shows the nulled token, and a
-- join of reaped with expired was planned as a nested loop (quadratic in the rows reaped).
expired_tokens as materialized (
    select jsonb_object_agg(x.id, x.owner_token) as by_id from expired x
),
reaped as (
    update job_runs j set
        status = case when j.attempts >= j.max_attempts then 3 else 0 end,
        owner_token = null,
        locked_until = null,
        run_at = now(),
        last_error = format('lease expired on attempt %s of %s (worker %s)%s', j.attempts, j.max_attempts, j.claimed_by,
                            case when j.attempts >= j.max_attempts then '; no attempts left' else '' end),
        finished_at = case when j.attempts >= j.max_attempts then now() end,
        updated_at = now()
    where j.id = any(array(select e.id from expired e)) and j.status = 1 and j.locked_until <= now()
    returning j.id, j.status, j.queue, j.attempts, j.lease_version, j.claimed_at, j.claimed_by, j.last_error
),
archived as (
    insert into runs (run_id, work_table, item_id, queue, attempt, lease_version, owner_token, worker_id, started_at, finished_at, outcome, error)
    select workq_run_id('job_runs', r.id, r.lease_version), 'job_runs', r.id, r.queue, r.attempts, r.lease_version, (t.by_id ->> r.id::text)::uuid, r.claimed_by, r.claimed_at, now(), 'expired', r.last_error
    from reaped r, expired_tokens t
)
select r.id, r.status from reaped r;

-- name: JobRunsGet :one
-- JobRunsGet reads one job run.
select * from job_runs where id = @id;

-- name: JobRunsCountByState :many
-- JobRunsCountByState counts job runs per queue and status, with in-progress rows split by whether their lease has expired.
select queue, status, (status = 1 and locked_until <= now())::boolean as expired, count(*)::bigint as count
from job_runs
group by queue, status, expired
order by queue, status, expired;

-- name: JobRunsDeleteFinished :execrows
-- JobRunsDeleteFinished deletes up to max_rows done or failed job runs that finished more than older_than_ms ago (retention).
-- By primary key (= any(array(...))), not "in (select ...)", which the
-- planner may turn into a hash join over the whole table.
delete from job_runs
where id = any(array(
    select f.id from job_runs f
    where f.status >= 2 and f.finished_at < now() - (@older_than_ms::bigint) * interval '1 millisecond'
    order by f.finished_at
    limit @max_rows::integer
));

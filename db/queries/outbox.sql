-- name: OutboxEnqueue :one
-- OutboxEnqueue writes one message (usually in the transaction of the caller) and returns its id and message id.
insert into outbox (queue, topic, partition_key, message_id, payload, headers, correlation_id, priority, run_at, max_attempts)
values (
    @queue, @topic, sqlc.narg('partition_key')::text, coalesce(sqlc.narg('message_id')::uuid, gen_random_uuid()),
    @payload, @headers, sqlc.narg('correlation_id')::text, @priority,
    now() + (@delay_ms::bigint) * interval '1 millisecond', @max_attempts)
returning id, message_id;

-- name: OutboxEnqueueMany :many
-- OutboxEnqueueMany writes many messages in one statement, in input order; empty partition keys and correlation ids mean none.
insert into outbox (queue, topic, partition_key, payload, headers, correlation_id, priority, run_at, max_attempts)
select unnest(@queues::text[]), unnest(@topics::text[]), nullif(unnest(@partition_keys::text[]), ''),
       unnest(@payloads::text[])::jsonb, unnest(@headers::text[])::jsonb, nullif(unnest(@correlation_ids::text[]), ''),
       unnest(@priorities::smallint[]), now() + unnest(@delays_ms::bigint[]) * interval '1 millisecond',
       unnest(@max_attempts::integer[])
returning id, message_id;

-- name: OutboxClaim :many
-- OutboxClaim leases up to max_rows due outbox messages of one queue (priority desc, id) under owner_token, a fresh token the caller mints for this claim alone, within the global limit of the queue; with reclaim_expired it first reaps the expired leases of that queue (claimable from the next claim on).
with expired as (
    select x.id, x.owner_token from outbox x
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
    update outbox j set
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
    select workq_run_id('outbox', r.id, r.lease_version), 'outbox', r.id, r.queue, r.attempts, r.lease_version, (t.by_id ->> r.id::text)::uuid, r.claimed_by, r.claimed_at, now(), 'expired', r.last_error
    from reaped r, expired_tokens t
),
candidates as (
    select r.id from outbox r
    where r.queue = @queue and r.status = 0 and r.run_at <= now()
    order by r.priority desc, r.id
    limit workq_claim_budget('outbox', @queue, @max_rows::integer)
    for no key update skip locked
)
update outbox j set
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
returning j.id, j.topic, j.partition_key, j.message_id, j.payload, j.headers, j.correlation_id, j.priority, j.run_at,
          j.attempts, j.max_attempts, j.lease_version, j.locked_until, j.created_at;

-- name: OutboxHeartbeat :many
-- OutboxHeartbeat extends the unexpired leases of many outbox messages held by one token and returns the ids it extended; rows locked by a concurrent completion or reap are skipped (not extended) rather than waited for, so a heartbeat can never deadlock with them.
with held as (
    select h.id from outbox h
    where h.id = any(@ids::bigint[]) and h.owner_token = @owner_token::uuid and h.status = 1 and h.locked_until > now()
    for no key update skip locked
)
update outbox set locked_until = now() + (@lease_ms::bigint) * interval '1 millisecond'
where id = any(array(select held.id from held)) and owner_token = @owner_token::uuid and status = 1
returning id;

-- name: OutboxComplete :many
-- OutboxComplete ends many attempts in one statement, each guarded by its own owner token (done, retry with a delay or failed when exhausted, failed, snoozed or released without using an attempt), archives each attempt in runs, and returns the rows it applied to.
with o as materialized (
    select unnest(@ids::bigint[]) as id, unnest(@owner_tokens::text[])::uuid as owner_token, unnest(@outcomes::text[]) as outcome,
           unnest(@errors::text[]) as error, unnest(@delays_ms::bigint[]) as delay_ms
),
u as (
    update outbox j set
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
    select workq_run_id('outbox', u.id, u.lease_version), 'outbox', u.id, u.queue,
           case when u.outcome in ('snoozed', 'released') then u.attempts + 1 else u.attempts end,
           u.lease_version, u.owner_token, u.claimed_by, u.claimed_at, now(),
           case when u.status = 3 then 'failed' else u.outcome end, nullif(u.error, '')
    from u
)
select u.id, u.status from u;

-- name: OutboxReapExpired :many
-- OutboxReapExpired requeues up to max_rows outbox messages whose lease expired (or fails those with no attempts left), archives the lost attempts, and is safe to run from many reapers at once.
with expired as (
    select id, owner_token from outbox
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
    update outbox j set
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
    select workq_run_id('outbox', r.id, r.lease_version), 'outbox', r.id, r.queue, r.attempts, r.lease_version, (t.by_id ->> r.id::text)::uuid, r.claimed_by, r.claimed_at, now(), 'expired', r.last_error
    from reaped r, expired_tokens t
)
select r.id, r.status from reaped r;

-- name: OutboxGet :one
-- OutboxGet reads one outbox message.
select * from outbox where id = @id;

-- name: OutboxCountByState :many
-- OutboxCountByState counts outbox messages per queue and status, with in-progress rows split by whether their lease has expired.
select queue, status, (status = 1 and locked_until <= now())::boolean as expired, count(*)::bigint as count
from outbox
group by queue, status, expired
order by queue, status, expired;

-- name: OutboxDeleteFinished :execrows
-- OutboxDeleteFinished deletes up to max_rows done or failed outbox messages that finished more than older_than_ms ago (retention).
-- By primary key (= any(array(...))), not "in (select ...)", which the
-- planner may turn into a hash join over the whole table.
delete from outbox
where id = any(array(
    select f.id from outbox f
    where f.status >= 2 and f.finished_at < now() - (@older_than_ms::bigint) * interval '1 millisecond'
    order by f.finished_at
    limit @max_rows::integer
));

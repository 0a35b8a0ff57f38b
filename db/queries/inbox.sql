-- name: InboxRecord :one
-- InboxRecord records one incoming message once per (source, message_id); a repeat only bumps last_seen_at and seen_count (seen_count = 1 means it was new) and says whether its payload matches the first one.
with h as (
    select sha256(convert_to((@payload::jsonb)::text, 'UTF8')) as payload_hash
)
insert into inbox (queue, source, message_id, topic, payload, payload_hash, priority, run_at, max_attempts)
select @queue, @source, @message_id, sqlc.narg('topic')::text, @payload::jsonb, h.payload_hash, @priority,
       now() + (@delay_ms::bigint) * interval '1 millisecond', @max_attempts
from h
on conflict (source, message_id) do update
    set last_seen_at = now(), seen_count = inbox.seen_count + 1, updated_at = now()
returning id, status, seen_count, (payload_hash = (select h.payload_hash from h))::boolean as same_payload;

-- name: InboxRecordMany :many
-- InboxRecordMany records many incoming messages in one statement (the batch must not repeat a (source, message_id)); seen_count = 1 marks the new ones.
insert into inbox (queue, source, message_id, topic, payload, payload_hash, priority, max_attempts)
select u.queue, u.source, u.message_id, nullif(u.topic, ''), u.payload::jsonb,
       sha256(convert_to(u.payload::jsonb::text, 'UTF8')), u.priority, u.max_attempts
from (
    select unnest(@queues::text[]) as queue, unnest(@sources::text[]) as source,
           unnest(@message_ids::text[]) as message_id, unnest(@topics::text[]) as topic,
           unnest(@payloads::text[]) as payload, unnest(@priorities::smallint[]) as priority,
           unnest(@max_attempts::integer[]) as max_attempts
) u
on conflict (source, message_id) do update
    set last_seen_at = now(), seen_count = inbox.seen_count + 1, updated_at = now()
returning id, source, message_id, status, seen_count;

-- name: InboxClaim :many
-- InboxClaim leases up to max_rows due inbox messages of one queue (run_at, id) under owner_token, a fresh token the caller mints for this claim alone, within the global limit of the queue; with reclaim_expired it first reaps the expired leases of that queue (claimable from the next claim on).
with expired as (
    select x.id, x.owner_token from inbox x
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
    update inbox j set
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
    select workq_run_id('inbox', r.id, r.lease_version), 'inbox', r.id, r.queue, r.attempts, r.lease_version, (t.by_id ->> r.id::text)::uuid, r.claimed_by, r.claimed_at, now(), 'expired', r.last_error
    from reaped r, expired_tokens t
),
candidates as (
    select r.id from inbox r
    where r.queue = @queue and r.status = 0 and r.run_at <= now()
    order by r.run_at, r.id
    limit workq_claim_budget('inbox', @queue, @max_rows::integer)
    for no key update skip locked
)
update inbox j set
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
returning j.id, j.source, j.message_id, j.topic, j.payload, j.priority, j.run_at, j.attempts, j.max_attempts,
          j.lease_version, j.locked_until, j.created_at, j.first_seen_at;

-- name: InboxHeartbeat :many
-- InboxHeartbeat extends the unexpired leases of many inbox messages held by one token and returns the ids it extended; rows locked by a concurrent completion or reap are skipped (not extended) rather than waited for, so a heartbeat can never deadlock with them.
with held as (
    select h.id from inbox h
    where h.id = any(@ids::bigint[]) and h.owner_token = @owner_token::uuid and h.status = 1 and h.locked_until > now()
    for no key update skip locked
)
update inbox set locked_until = now() + (@lease_ms::bigint) * interval '1 millisecond'
where id = any(array(select held.id from held)) and owner_token = @owner_token::uuid and status = 1
returning id;

-- name: InboxComplete :many
-- InboxComplete ends many attempts in one statement, each guarded by its own owner token (done, retry with a delay or failed when exhausted, failed, snoozed or released without using an attempt), archives each attempt in runs, and returns the rows it applied to.
with o as materialized (
    select unnest(@ids::bigint[]) as id, unnest(@owner_tokens::text[])::uuid as owner_token, unnest(@outcomes::text[]) as outcome,
           unnest(@errors::text[]) as error, unnest(@delays_ms::bigint[]) as delay_ms
),
u as (
    update inbox j set
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
        processed_at = case when o.outcome = 'done' then now() else j.processed_at end,
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
    select workq_run_id('inbox', u.id, u.lease_version), 'inbox', u.id, u.queue,
           case when u.outcome in ('snoozed', 'released') then u.attempts + 1 else u.attempts end,
           u.lease_version, u.owner_token, u.claimed_by, u.claimed_at, now(),
           case when u.status = 3 then 'failed' else u.outcome end, nullif(u.error, '')
    from u
)
select u.id, u.status from u;

-- name: InboxReapExpired :many
-- InboxReapExpired requeues up to max_rows inbox messages whose lease expired (or fails those with no attempts left), archives the lost attempts, and is safe to run from many reapers at once.
with expired as (
    select id, owner_token from inbox
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
    update inbox j set
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
    select workq_run_id('inbox', r.id, r.lease_version), 'inbox', r.id, r.queue, r.attempts, r.lease_version, (t.by_id ->> r.id::text)::uuid, r.claimed_by, r.claimed_at, now(), 'expired', r.last_error
    from reaped r, expired_tokens t
)
select r.id, r.status from reaped r;

-- name: InboxGet :one
-- InboxGet reads one inbox message.
select * from inbox where id = @id;

-- name: InboxCountByState :many
-- InboxCountByState counts inbox messages per queue and status, with in-progress rows split by whether their lease has expired.
select queue, status, (status = 1 and locked_until <= now())::boolean as expired, count(*)::bigint as count
from inbox
group by queue, status, expired
order by queue, status, expired;

-- name: InboxDeleteFinished :execrows
-- InboxDeleteFinished deletes up to max_rows done or failed inbox messages that finished more than older_than_ms ago (retention).
-- By primary key (= any(array(...))), not "in (select ...)", which the
-- planner may turn into a hash join over the whole table.
delete from inbox
where id = any(array(
    select f.id from inbox f
    where f.status >= 2 and f.finished_at < now() - (@older_than_ms::bigint) * interval '1 millisecond'
    order by f.finished_at
    limit @max_rows::integer
));

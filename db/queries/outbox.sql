-- name: OutboxEnqueue :one
-- OutboxEnqueue writes one message (usually in the transaction of the caller) and returns its id and message id; with notify it also wakes the relays of the queue (NOTIFY workq_outbox, delivered at commit).
with ins as (
    insert into workq.outbox (queue, topic, partition_key, message_id, payload, headers, correlation_id, priority, run_at, max_attempts, join_id)
    values (
        @queue, @topic, sqlc.narg('partition_key')::text, coalesce(sqlc.narg('message_id')::uuid, gen_random_uuid()),
        @payload, @headers, sqlc.narg('correlation_id')::text, @priority,
        coalesce(sqlc.narg('run_at')::timestamptz, now() + (@delay_ms::bigint) * interval '1 millisecond'),
        @max_attempts, sqlc.narg('join_id')::bigint)
    returning id, message_id
),
notified as (
    select pg_notify('workq_outbox', @queue::text) as sent
    where @notify::boolean
)
-- A cross join with a count, so that the planner keeps notified (see JobRunsEnqueueMany).
select ins.id, ins.message_id from ins cross join (select count(*) as n from notified) x;

-- name: OutboxEnqueueMany :many
-- OutboxEnqueueMany writes many messages in one statement, in input order; empty partition keys, message ids, correlation ids and run_ats and zero join ids mean none; with notify it wakes the relays of every queue in the batch. It numbers each partition key's messages itself, with one update of the key's counter for the whole batch (the row trigger would update it once per message, and every further update of a row the transaction already updated walks all its earlier versions), keys taken in sorted order, so that two batches never wait for each other's keys crosswise.
with notified as (
    select pg_notify('workq_outbox', q.queue) as sent
    from (select distinct unnest(@queues::text[]) as queue) q
    where @notify::boolean
),
-- Set-returning functions in a select list run in lockstep, in input order;
-- a shorter array (an optional column left out) is padded with nulls.
u as materialized (
    select m.queue, m.topic, nullif(m.partition_key, '') collate "C" as partition_key, m.message_id, m.payload, m.headers,
           m.correlation_id, m.priority, m.run_at, m.delay_ms, m.max_attempts, m.join_id, m.ord
    from (select unnest(@queues::text[]) as queue, unnest(@topics::text[]) as topic, unnest(@partition_keys::text[]) as partition_key,
                 unnest(@message_ids::text[]) as message_id, unnest(@payloads::text[]) as payload, unnest(@headers::text[]) as headers,
                 unnest(@correlation_ids::text[]) as correlation_id, unnest(@priorities::smallint[]) as priority,
                 unnest(@run_ats::text[]) as run_at, unnest(@delays_ms::bigint[]) as delay_ms,
                 unnest(@max_attempts::integer[]) as max_attempts, unnest(@join_ids::bigint[]) as join_id,
                 generate_series(1, cardinality(@queues::text[])) as ord) m
),
batch_keys as materialized (
    select u.queue, u.partition_key, count(*) as n from u
    where u.partition_key is not null
    group by u.queue, u.partition_key
),
-- Each key's counter advanced by its number of messages in the batch; the
-- batch's messages of the key take the numbers up to the new value.
seqs as (
    insert into workq.outbox_key_seqs as c (queue, partition_key, last_seq, updated_at)
    select k.queue, k.partition_key, k.n, now() from batch_keys k
    order by k.queue, k.partition_key
    on conflict (queue, partition_key) do update set last_seq = c.last_seq + excluded.last_seq, updated_at = now()
    returning c.queue, c.partition_key, c.last_seq
),
ins as (
insert into workq.outbox (queue, topic, partition_key, message_id, payload, headers, correlation_id, priority, run_at, max_attempts, join_id, key_seq)
select u.queue, u.topic, u.partition_key, coalesce(nullif(u.message_id, '')::uuid, gen_random_uuid()),
       u.payload::jsonb, u.headers::jsonb, nullif(u.correlation_id, ''), u.priority,
       coalesce(nullif(u.run_at, '')::timestamptz, now() + coalesce(u.delay_ms, 0) * interval '1 millisecond'),
       u.max_attempts, nullif(u.join_id, 0),
       s.last_seq - k.n + row_number() over (partition by u.queue, u.partition_key order by u.ord)
from u
left join batch_keys k on k.queue = u.queue and k.partition_key = u.partition_key
left join seqs s on s.queue = u.queue and s.partition_key = u.partition_key
order by u.ord
returning id, message_id
)
select ins.id, ins.message_id from ins cross join (select count(*) as n from notified) x;

-- name: OutboxClaim :many
-- OutboxClaim leases up to max_rows due outbox messages of one queue under owner_token, a fresh token the caller mints for this claim alone, within the global limit of the queue (with flow_grant, inside a flow claim's transaction: within what workq_flow_grant granted): unkeyed messages in (priority desc, id) order, and for partition keys each key's head only (its message with the lowest key_seq among rows not done, if ready and due, and no message of the key is in flight), keys visited from after_key on, wrapping around, pass_keys passed over (with wake it NOTIFYs the queue's claimers to take them). Failed messages of skip_topics do not block their key. Expired leases are reaped by LeaseReapExpired.
with recursive
-- With wake, the claim wakes the queue's claimers at commit (NOTIFY
-- workq_outbox), as a new message does: it hands over pass_keys.
woke as materialized (
    select count(*) as n from (select pg_notify('workq_outbox', @queue::text) where @wake::boolean) x
),
budget as materialized (
    select workq.workq_claim_budget('outbox', @queue, @max_rows::integer, sqlc.narg('flow_grant')::integer) as n from woke
),
-- Keep up to half the budget (rounded at random, so a budget of one is
-- shared too) for unkeyed messages when some wait, so neither kind starves.
reserve as materialized (
    select count(*)::integer as n from (
        select 1 from workq.outbox u
        where u.queue = @queue and u.status = 0 and u.partition_key is null and u.run_at <= now()
        -- the index's order, so that the planner reads outbox_claim, not the table
        order by u.priority desc, u.id
        limit (select (b.n + (random() < 0.5)::integer) / 2 from budget b)
    ) w
),
-- The queue's partition keys with rows not done, one index probe each (a
-- skip scan of outbox_ordered), from the first key after after_key to the
-- last, then from the first key up to after_key (wrapped). Evaluated lazily:
-- the heads' LIMIT stops the walk.
--
-- The probes leave out "partition_key is not null": comparing the key
-- implies it, which is enough for outbox_ordered's predicate. Written out, it
-- made the estimates inconsistent when the statistics see few keyed rows (an
-- outbox without keys): it cut a probe's estimated rows to 1 while the index
-- entries it reads stayed a third of the queue's rows, so each LIMIT 1 was
-- charged the whole range, and the walk (which the planner counts as about
-- 100 probes) put the claim's estimate above jit_above_cost at a few hundred
-- thousand rows: PostgreSQL then JIT-compiled every claim (design.md 4.2b).
keys (key, wrapped) as (
    (select s.key, s.wrapped from (
        (select o.partition_key as key, false as wrapped from workq.outbox o
         where o.queue = @queue and o.status <> 2 and o.partition_key > @after_key::text
         order by o.partition_key limit 1)
        union all
        (select o.partition_key as key, true as wrapped from workq.outbox o
         where o.queue = @queue and o.status <> 2 and o.partition_key <= @after_key::text
         order by o.partition_key limit 1)
    ) s limit 1)
    union all
    select n.key, n.wrapped from keys k cross join lateral (
        select s.key, s.wrapped from (
            (select o.partition_key as key, false as wrapped from workq.outbox o
             where not k.wrapped and o.queue = @queue and o.status <> 2
               and o.partition_key > k.key
             order by o.partition_key limit 1)
            union all
            (select o.partition_key as key, true as wrapped from workq.outbox o
             where not k.wrapped and o.queue = @queue and o.status <> 2
               and o.partition_key <= @after_key::text
             order by o.partition_key limit 1)
            union all
            (select o.partition_key as key, true as wrapped from workq.outbox o
             where k.wrapped and o.queue = @queue and o.status <> 2
               and o.partition_key > k.key and o.partition_key <= @after_key::text
             order by o.partition_key limit 1)
        ) s limit 1
    ) n
),
-- Each key's head (its lowest key_seq not done); claimable when ready and
-- due. Every message of the key before it is visible to this snapshot: its
-- writer committed before the head's writer took its number.
heads as (
    select h.id from keys k cross join lateral (
        select o.id, o.status, o.run_at from workq.outbox o
        where o.queue = @queue and o.partition_key is not null and o.status <> 2 and o.partition_key = k.key
          -- a cancelled message (status 4) blocks nothing, like a delivered one
          and not (o.status = 4 or (o.status = 3 and o.topic = any(coalesce(@skip_topics::text[], '{}'))))
          -- keys this claimer hands over to the queue's other claimers
          and k.key <> all(coalesce(@pass_keys::text[], '{}'))
        order by o.key_seq
        limit 1
    ) h
    where h.status = 0 and h.run_at <= now()
      -- A key with a message in flight waits, even when its first not-done
      -- message is ready (a retried message the key had skipped): one probe
      -- of outbox_key_in_flight, which also refuses a second in-flight
      -- message that a claim on an older snapshot might pick. Written so
      -- that nothing else can answer it (migration 00014): a scalar subquery,
      -- which stays one probe per key, where NOT EXISTS became an anti join
      -- against a materialized scan of the queue's whole in-flight set; and
      -- owner_token is not null (= status 1, the lease CHECK), which implies
      -- only this index's predicate, where status = 1 let stale statistics
      -- pick outbox_in_progress and scan every in-flight row per key.
      and (select 1 from workq.outbox f
           where f.queue = @queue and f.partition_key = k.key and f.owner_token is not null
           limit 1) is null
    limit (select b.n - r.n from budget b, reserve r)
),
-- Locked and rechecked on the newest row version: a head another claimer
-- took or finished since this statement's snapshot is left alone.
keyed as materialized (
    select o.id from workq.outbox o
    where o.id = any(array(select h.id from heads h)) and o.status = 0 and o.run_at <= now()
    for no key update skip locked
),
unkeyed as (
    select r.id from workq.outbox r
    where r.queue = @queue and r.status = 0 and r.partition_key is null and r.run_at <= now()
    order by r.priority desc, r.id
    limit greatest(0, (select b.n from budget b) - (select count(*) from keyed))
    for no key update skip locked
)
update workq.outbox j set
    status = 1,
    owner_token = @owner_token::uuid,
    locked_until = now() + (@lease_ms::bigint) * interval '1 millisecond',
    lease_version = greatest(j.lease_version + 1, (select workq.workq_epoch())),
    attempts = j.attempts + 1,
    -- The clock when the row is claimed, not now() (the transaction's start,
    -- which can precede the commit of the completion this claim's snapshot
    -- saw): an attempt's started_at in the run archive is then never before
    -- the previous attempt of its key finished.
    claimed_at = clock_timestamp(),
    claimed_by = @worker_id::text,
    updated_at = now()
-- Not a join with candidates: the planner cannot estimate the budget limit
-- (it assumes 10% of the ready rows) and would hash or merge join the table.
where j.id = any(array(select k.id from keyed k union all select u.id from unkeyed u))
returning j.id, j.topic, j.partition_key, j.message_id, j.payload, j.headers, j.correlation_id, j.priority, j.run_at,
          j.attempts, j.max_attempts, j.lease_version, j.locked_until, j.created_at;

-- name: OutboxDeleteFinished :execrows
-- OutboxDeleteFinished deletes up to max_rows done, cancelled or failed outbox messages that finished more than older_than_ms ago (retention), except failed messages with a partition key: such a message may be blocking its key (OnFinalFailure Block), and deleting it would let the next message of the key go as if it had been delivered; an operator retries or deletes it.
delete from workq.outbox
where id = any(array(
    select f.id from workq.outbox f
    -- outbox_finished's predicate, written out so that the planner uses it.
    where (f.status in (2, 4) or (f.status = 3 and f.partition_key is null))
      and f.finished_at < now() - (@older_than_ms::bigint) * interval '1 millisecond'
    order by f.finished_at
    limit @max_rows::integer
));

-- name: OutboxPruneKeySeqs :one
-- OutboxPruneKeySeqs deletes up to max_rows partition-key counters last used more than older_than_ms ago whose key has no message not done (outbox_prune_key_seqs: the key starts again at 1; never while a writer of it is open), and returns how many.
select workq.outbox_prune_key_seqs(@older_than_ms::bigint, @max_rows::integer)::bigint as deleted;

-- name: OutboxQueueDepth :many
-- OutboxQueueDepth is LeaseQueueDepth for the outbox, whose ready rows are in two partial indexes: unkeyed ones in outbox_claim, keyed ones in outbox_ordered (with the key's in-progress and failed rows).
select d.queue::text as queue, sum(d.ready)::bigint as ready, sum(d.scheduled)::bigint as scheduled, sum(d.in_progress)::bigint as in_progress,
       coalesce(extract(epoch from now() - min(d.oldest_due)), 0)::float8 as oldest_ready_seconds
from (
    select u.queue, count(*) filter (where u.run_at <= now()) as ready, count(*) filter (where u.run_at > now()) as scheduled,
           0::bigint as in_progress, min(u.run_at) filter (where u.run_at <= now()) as oldest_due
    from workq.outbox u where u.status = 0 and u.partition_key is null group by u.queue
    union all
    select k.queue, count(*) filter (where k.run_at <= now()), count(*) filter (where k.run_at > now()),
           0::bigint, min(k.run_at) filter (where k.run_at <= now())
    from workq.outbox k where k.partition_key is not null and k.status <> 2 and k.status = 0 group by k.queue
    union all
    select p.queue, 0::bigint, 0::bigint, count(*), null::timestamptz
    from workq.outbox p where p.status = 1 group by p.queue
) d
group by d.queue
order by d.queue;

-- name: OutboxGet :one
-- OutboxGet reads one outbox message.
select * from workq.outbox where id = @id;

-- name: OutboxKeyHeads :many
-- OutboxKeyHeads lists the partition keys of one queue that have messages not done, from after_key on in key order, each with its head (first message in write order; cancelled messages and failed messages of skip_topics passed over); with only_blocked, only keys whose head is failing (waiting for a retry, or in a retry attempt) or failed.
with recursive
-- The walk's probes leave out "partition_key is not null", as in OutboxClaim's.
keys (key) as (
    (select o.partition_key as key from workq.outbox o
     where o.queue = @queue and o.status <> 2 and o.partition_key > @after_key::text
     order by o.partition_key limit 1)
    union all
    select n.key from keys k cross join lateral (
        select o.partition_key as key from workq.outbox o
        where o.queue = @queue and o.status <> 2 and o.partition_key > k.key
        order by o.partition_key limit 1
    ) n
)
select k.key::text as partition_key, h.id, h.topic, h.status, h.attempts, h.max_attempts, h.run_at, h.last_error,
       h.message_id, h.updated_at
from keys k cross join lateral (
    select o.id, o.topic, o.status, o.attempts, o.max_attempts, o.run_at, o.last_error, o.message_id, o.updated_at
    from workq.outbox o
    where o.queue = @queue and o.partition_key is not null and o.status <> 2 and o.partition_key = k.key
      and not (o.status = 4 or (o.status = 3 and o.topic = any(coalesce(@skip_topics::text[], '{}'))))
    order by o.key_seq
    limit 1
) h
where not @only_blocked::boolean
   or h.status = 3 or (h.status = 0 and h.attempts > 0) or (h.status = 1 and h.attempts > 1)
limit @max_rows::integer;

-- name: OutboxPage :many
-- OutboxPage lists items newest first below before_id (keyset pagination over the primary key: rows inserted meanwhile have higher ids and never shift a later page), filtered by queue, status, topic, partition key, message id, creation time and a text in last_error, case-insensitive (null: any), and at or above min_id (admin bounds the ids a text search reads with it).
select * from workq.outbox t
where t.id < @before_id::bigint
  and (sqlc.narg('queue')::text is null or t.queue = sqlc.narg('queue')::text)
  and (sqlc.narg('status')::smallint is null or t.status = sqlc.narg('status')::smallint)
  and (sqlc.narg('kind')::text is null or t.topic = sqlc.narg('kind')::text)
  and (sqlc.narg('created_after')::timestamptz is null or t.created_at >= sqlc.narg('created_after')::timestamptz)
  and (sqlc.narg('created_before')::timestamptz is null or t.created_at < sqlc.narg('created_before')::timestamptz)
  and t.id >= @min_id::bigint
  and (sqlc.narg('partition_key')::text is null or t.partition_key = sqlc.narg('partition_key')::text)
  and (sqlc.narg('message_id')::uuid is null or t.message_id = sqlc.narg('message_id')::uuid)
  and (sqlc.narg('error_text')::text is null or strpos(lower(t.last_error), lower(sqlc.narg('error_text')::text)) > 0)
order by t.id desc
limit @max_rows::integer;

-- name: OutboxPageAsc :many
-- OutboxPageAsc is OutboxPage oldest first: items above after_id (the same keyset walk up the primary key, or up the failed index; rows inserted meanwhile have higher ids and come on a later page), with the same filters, and at or below max_id (admin bounds the ids a text or metadata search reads with it).
select * from workq.outbox t
where t.id > @after_id::bigint
  and (sqlc.narg('queue')::text is null or t.queue = sqlc.narg('queue')::text)
  and (sqlc.narg('status')::smallint is null or t.status = sqlc.narg('status')::smallint)
  and (sqlc.narg('kind')::text is null or t.topic = sqlc.narg('kind')::text)
  and (sqlc.narg('created_after')::timestamptz is null or t.created_at >= sqlc.narg('created_after')::timestamptz)
  and (sqlc.narg('created_before')::timestamptz is null or t.created_at < sqlc.narg('created_before')::timestamptz)
  and t.id <= @max_id::bigint
  and (sqlc.narg('partition_key')::text is null or t.partition_key = sqlc.narg('partition_key')::text)
  and (sqlc.narg('message_id')::uuid is null or t.message_id = sqlc.narg('message_id')::uuid)
  and (sqlc.narg('error_text')::text is null or strpos(lower(t.last_error), lower(sqlc.narg('error_text')::text)) > 0)
order by t.id
limit @max_rows::integer;

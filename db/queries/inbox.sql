-- name: InboxReceive :many
-- InboxReceive records a batch of incoming messages in one statement, each (source, message_id) once: the first occurrence of a key in the batch is inserted unless the key is stored already (ON CONFLICT DO NOTHING: a repeat writes and locks nothing); every input row comes back, in input order, with the stored row it maps to (id 0 when that row is not visible to this statement's snapshot: it committed concurrently, and the caller looks it up again), whether this row inserted it, and whether its payload hash equals the stored one. With notify, and only when something was inserted, it wakes the workers of the queues it inserted into (NOTIFY workq_inbox, delivered at commit).
with raw as (
    -- Set-returning functions in one select list run in lockstep, so ord
    -- numbers the input rows.
    select generate_series(1, cardinality(@queues::text[])) as ord,
           unnest(@queues::text[]) as queue, unnest(@sources::text[]) as source,
           unnest(@message_ids::text[]) as message_id, unnest(@topics::text[]) as topic,
           unnest(@payloads::text[])::jsonb as payload, unnest(@priorities::smallint[]) as priority,
           unnest(@max_attempts::integer[]) as max_attempts
),
input as materialized (
    -- payload_hash: sha256 of the payload's canonical jsonb text (docs/inbox.md).
    select r.ord, r.queue, r.source, r.message_id, nullif(r.topic, '') as topic, r.payload,
           sha256(convert_to(r.payload::text, 'UTF8')) as payload_hash, r.priority, r.max_attempts
    from raw r
),
firsts as (
    select distinct on (i.source, i.message_id) i.*
    from input i
    order by i.source, i.message_id, i.ord
),
ins as (
    insert into workq.inbox (queue, source, message_id, topic, payload, payload_hash, priority, max_attempts)
    -- In key order, not input order: two batches that share keys then wait
    -- for each other's uncommitted inserts in the same order and cannot
    -- deadlock. Ids within one batch follow the key order.
    select f.queue, f.source, f.message_id, f.topic, f.payload, f.payload_hash, f.priority, f.max_attempts
    from firsts f
    order by f.source, f.message_id
    on conflict (source, message_id) do nothing
    returning id, queue, source, message_id, status, payload_hash
),
notified as (
    select pg_notify('workq_inbox', q.queue) as sent
    from (select distinct n.queue from ins n) q
    where @notify::boolean
),
new_rows as (
    select f.ord, f.source, f.message_id, n.id, n.status, n.payload_hash
    from ins n join firsts f on f.source = n.source and f.message_id = n.message_id
)
select i.ord::bigint as ord,
       coalesce(n.id, s.id, 0)::bigint as id,
       coalesce(n.status, s.status, 0)::smallint as status,
       coalesce(n.ord = i.ord, false)::boolean as inserted,
       coalesce(coalesce(n.payload_hash, s.payload_hash) = i.payload_hash, false)::boolean as same_payload,
       i.payload_hash
from input i
left join new_rows n on n.source = i.source and n.message_id = i.message_id
-- The stored row of a key this statement did not insert, by the unique
-- index, one probe per such input row (lateral: never a scan of the table).
-- limit 1 (the key is unique anyway) keeps the planner from pulling the
-- subquery up into a hash join over a scan of inbox, which it chose once a
-- column (cancel_requested_at, 00017) changed its row width estimate.
left join lateral (
    select x.id, x.status, x.payload_hash from workq.inbox x
    where n.id is null and x.source = i.source and x.message_id = i.message_id
    limit 1
) s on true
-- A cross join, not a left join: see JobRunsEnqueueMany (a CTE that
-- nothing reads never runs).
cross join (select count(*) as n from notified) z
order by i.ord;

-- name: InboxLookup :many
-- InboxLookup reads the stored rows of the given (source, message_id) keys (rare path: a receive whose key was stored by a transaction that committed after its statement began).
select x.id, x.source, x.message_id, x.status, x.payload_hash
from workq.inbox x
where (x.source, x.message_id) in (select unnest(@sources::text[]), unnest(@message_ids::text[]));

-- name: InboxClaim :many
-- InboxClaim leases up to max_rows due inbox messages of one queue (run_at, id) under owner_token, a fresh token the caller mints for this claim alone, within the global limit of the queue; with a resume point (resume_run_at) it reads from there instead of from the queue's start, past the claim-index entries earlier claims left dead. Expired leases are reaped by LeaseReapExpired (the claimer runs it for its queue about once a second).
with candidates as (
    select r.id from workq.inbox r
    where r.queue = @queue and r.status = 0 and r.run_at <= now()
      -- the resume point (JobRunsClaim, design.md 4.1a): from run_at on
      and r.run_at >= coalesce(sqlc.narg('resume_run_at')::timestamptz, '-infinity')
    order by r.run_at, r.id
    limit workq.workq_claim_budget('inbox', @queue, @max_rows::integer)
    for no key update skip locked
)
update workq.inbox j set
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
returning j.id, j.source, j.message_id, j.topic, j.payload, j.priority, j.run_at, j.attempts, j.max_attempts,
          j.lease_version, j.locked_until, j.created_at, j.first_seen_at;

-- name: InboxClaimIDs :many
-- InboxClaimIDs leases the ready inbox messages among ids under owner_token, as InboxClaim does: the second statement of a flow claim (JobRunsClaimIDs), claimed_at the pick's clock.
update workq.inbox j set
    status = 1,
    owner_token = @owner_token::uuid,
    locked_until = sqlc.arg('claimed_at')::timestamptz + (@lease_ms::bigint) * interval '1 millisecond',
    lease_version = greatest(j.lease_version + 1, (select workq.workq_epoch())),
    attempts = j.attempts + 1,
    claimed_at = sqlc.arg('claimed_at')::timestamptz,
    claimed_by = @worker_id::text,
    updated_at = now()
where j.id = any(@ids::bigint[]) and j.status = 0
returning j.id, j.source, j.message_id, j.topic, j.payload, j.priority, j.run_at, j.attempts, j.max_attempts,
          j.lease_version, j.locked_until, j.created_at, j.first_seen_at;

-- name: InboxGet :one
-- InboxGet reads one inbox message.
select * from workq.inbox where id = @id;

-- name: InboxDeleteProcessed :execrows
-- InboxDeleteProcessed deletes up to max_rows processed (done) or cancelled messages that finished more than older_than_ms ago (the de-duplication window); failed (dead) messages are kept.
-- By primary key (= any(array(...))), not "in (select ...)": see
-- LeaseDeleteFinished. status >= 2 as well as in (2, 4) names the predicate of
-- inbox_finished, whose finished_at order the batch follows.
delete from workq.inbox
where id = any(array(
    select f.id from workq.inbox f
    where f.status >= 2 and f.status in (2, 4)
      and f.finished_at < now() - (@older_than_ms::bigint) * interval '1 millisecond'
    order by f.finished_at
    limit @max_rows::integer
));

-- name: InboxPage :many
-- InboxPage lists items newest first below before_id (keyset pagination over the primary key: rows inserted meanwhile have higher ids and never shift a later page), filtered by queue, status, topic, source, creation time and a text in last_error, case-insensitive (null: any), and at or above min_id (admin bounds the ids a text search reads with it).
select * from workq.inbox t
where t.id < @before_id::bigint
  and (sqlc.narg('queue')::text is null or t.queue = sqlc.narg('queue')::text)
  and (sqlc.narg('status')::smallint is null or t.status = sqlc.narg('status')::smallint)
  and (sqlc.narg('kind')::text is null or t.topic = sqlc.narg('kind')::text)
  and (sqlc.narg('created_after')::timestamptz is null or t.created_at >= sqlc.narg('created_after')::timestamptz)
  and (sqlc.narg('created_before')::timestamptz is null or t.created_at < sqlc.narg('created_before')::timestamptz)
  and t.id >= @min_id::bigint
  and (sqlc.narg('source')::text is null or t.source = sqlc.narg('source')::text)
  and (sqlc.narg('error_text')::text is null or strpos(lower(t.last_error), lower(sqlc.narg('error_text')::text)) > 0)
order by t.id desc
limit @max_rows::integer;

-- name: InboxPageAsc :many
-- InboxPageAsc is InboxPage oldest first: items above after_id (the same keyset walk up the primary key, or up the failed index; rows inserted meanwhile have higher ids and come on a later page), with the same filters, and at or below max_id (admin bounds the ids a text or metadata search reads with it).
select * from workq.inbox t
where t.id > @after_id::bigint
  and (sqlc.narg('queue')::text is null or t.queue = sqlc.narg('queue')::text)
  and (sqlc.narg('status')::smallint is null or t.status = sqlc.narg('status')::smallint)
  and (sqlc.narg('kind')::text is null or t.topic = sqlc.narg('kind')::text)
  and (sqlc.narg('created_after')::timestamptz is null or t.created_at >= sqlc.narg('created_after')::timestamptz)
  and (sqlc.narg('created_before')::timestamptz is null or t.created_at < sqlc.narg('created_before')::timestamptz)
  and t.id <= @max_id::bigint
  and (sqlc.narg('source')::text is null or t.source = sqlc.narg('source')::text)
  and (sqlc.narg('error_text')::text is null or strpos(lower(t.last_error), lower(sqlc.narg('error_text')::text)) > 0)
order by t.id
limit @max_rows::integer;

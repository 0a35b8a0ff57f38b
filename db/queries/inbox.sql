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
-- InboxClaim leases up to max_rows due inbox messages of one queue (run_at, id) under owner_token, a fresh token the caller mints for this claim alone, within the global limit of the queue. Expired leases are reaped by LeaseReapExpired (the claimer runs it for its queue about once a second).
with candidates as (
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

-- name: InboxGet :one
-- InboxGet reads one inbox message.
select * from inbox where id = @id;

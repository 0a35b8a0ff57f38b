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
-- OutboxClaim leases up to max_rows due outbox messages of one queue (priority desc, id) under owner_token, a fresh token the caller mints for this claim alone, within the global limit of the queue. Expired leases are reaped by LeaseReapExpired (the claimer runs it for its queue about once a second).
with candidates as (
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

-- name: OutboxGet :one
-- OutboxGet reads one outbox message.
select * from outbox where id = @id;

-- name: OutboxJoinStart :one
-- OutboxJoinStart creates an open join expecting expected_steps members, with its on-complete message, its optional on-fail message (on_fail_topic null: none), its member-failure policy and optional deadline (an absolute time, or timeout_ms from the database clock; both null: none).
insert into workq.outbox_joins (
    expected_steps, on_member_failure, deadline,
    on_complete_queue, on_complete_topic, on_complete_payload, on_complete_headers, on_complete_partition_key, on_complete_correlation_id,
    on_fail_queue, on_fail_topic, on_fail_payload, on_fail_headers, on_fail_partition_key, on_fail_correlation_id)
values (
    @expected_steps, @on_member_failure,
    coalesce(sqlc.narg('deadline')::timestamptz, now() + sqlc.narg('timeout_ms')::bigint * interval '1 millisecond'),
    @on_complete_queue, @on_complete_topic, @on_complete_payload, @on_complete_headers,
    sqlc.narg('on_complete_partition_key')::text, sqlc.narg('on_complete_correlation_id')::text,
    @on_fail_queue, sqlc.narg('on_fail_topic')::text, @on_fail_payload, @on_fail_headers,
    sqlc.narg('on_fail_partition_key')::text, sqlc.narg('on_fail_correlation_id')::text)
returning id, status, expected_steps, deadline, created_at;

-- name: OutboxJoinGet :one
-- OutboxJoinGet reads one join's counts, status and timestamps.
select id, status, on_member_failure, expected_steps, attached_steps, completed_steps, failed_steps, fail_reason,
       deadline, outcome_message_id, on_complete_topic, on_fail_topic, created_at, updated_at, finished_at
from workq.outbox_joins
where id = @id;

-- name: OutboxJoinFailExpired :one
-- OutboxJoinFailExpired fails up to max_rows open joins whose deadline has passed on the database clock, writing each one's on-fail message, and returns how many it failed; joins locked by a member that is ending them right now are skipped (that statement decides them, or the next run does).
with due as materialized (
    select j.id from workq.outbox_joins j
    where j.status = 0 and j.deadline is not null and j.deadline <= now()
    order by j.deadline
    limit @max_rows::integer
    for no key update skip locked
)
select count(*) filter (where workq.workq_outbox_join_finish(due.id, 3::smallint, 'deadline'))::integer as failed
from due;

-- name: OutboxJoinsPage :many
-- OutboxJoinsPage lists joins newest first below before_id (keyset pagination over the primary key), all of them or only the open ones, with the columns of OutboxJoinGet.
select id, status, on_member_failure, expected_steps, attached_steps, completed_steps, failed_steps, fail_reason,
       deadline, outcome_message_id, on_complete_topic, on_fail_topic, created_at, updated_at, finished_at
from workq.outbox_joins
where id < @before_id::bigint and (not @only_open::boolean or status = 0)
order by id desc
limit @max_rows::integer;

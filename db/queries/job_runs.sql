-- name: JobRunsEnqueue :one
-- JobRunsEnqueue inserts one job run, or returns the id of the live run that already holds its dedup key (inserted = false); with notify it also wakes the workers of the queue (NOTIFY workq_job_runs, delivered at commit). metadata (one JSON object: the user's metadata and the enqueuing span's trace context) is null without either; limit_key (the key per-key flow limits and fair claims count by) is null without one.
with ins as (
    insert into workq.job_runs (queue, kind, payload, priority, run_at, max_attempts, dedup_key, schedule_id, scheduled_time, metadata, limit_key)
    values (
        @queue, @kind, @payload, @priority,
        coalesce(sqlc.narg('run_at')::timestamptz, now() + (@delay_ms::bigint) * interval '1 millisecond'),
        @max_attempts, sqlc.narg('dedup_key')::text, sqlc.narg('schedule_id')::bigint, sqlc.narg('scheduled_time')::timestamptz,
        sqlc.narg('metadata')::jsonb, sqlc.narg('limit_key')::text)
    on conflict (dedup_key) where dedup_key is not null and status < 2 do nothing
    returning id
),
notified as (
    select pg_notify('workq_job_runs', @queue::text) as sent
    where @notify::boolean and exists (select 1 from ins)
)
select ins.id, true as inserted from ins left join notified on true
union all
select j.id, false as inserted from workq.job_runs j
where j.dedup_key = sqlc.narg('dedup_key')::text and j.status < 2 and not exists (select 1 from ins)
limit 1;

-- name: JobRunsEnqueueMany :many
-- JobRunsEnqueueMany inserts many job runs in one statement; rows whose dedup key a live run holds are skipped (not returned); with notify it wakes the workers of every queue in the batch; metadatas holds each row's metadata (a JSON object: the user's metadata and the enqueuing span's trace context; '' for none), or is empty when no row has any (unnest pads a shorter array with nulls); limit_keys likewise holds each row's limit key ('' for none), or is empty when no row has one.
with notified as (
    select pg_notify('workq_job_runs', q.queue) as sent
    from (select distinct unnest(@queues::text[]) as queue) q
    where @notify::boolean
),
ins as (
insert into workq.job_runs (queue, kind, payload, priority, run_at, max_attempts, dedup_key, metadata, limit_key)
select unnest(@queues::text[]), unnest(@kinds::text[]), unnest(@payloads::text[])::jsonb,
       unnest(@priorities::smallint[]), now() + unnest(@delays_ms::bigint[]) * interval '1 millisecond',
       unnest(@max_attempts::integer[]), nullif(unnest(@dedup_keys::text[]), ''), nullif(unnest(@metadatas::text[]), '')::jsonb,
       nullif(unnest(@limit_keys::text[]), '')
on conflict (dedup_key) where dedup_key is not null and status < 2 do nothing
returning id, dedup_key
)
-- A cross join, not a left join: the planner drops a left join to a one-row
-- subquery whose columns are unused, and a SELECT CTE that nothing reads
-- never runs, so pg_notify was never called (issue 7 item 10).
select ins.id, ins.dedup_key from ins cross join (select count(*) as n from notified) x;

-- name: JobRunsEnqueueManyPlain :many
-- JobRunsEnqueueManyPlain inserts many job runs that have no dedup key, in input order, without ON CONFLICT (which makes every row a speculative insertion, 10-20% of the insert); with notify it wakes the workers of every queue in the batch; metadatas and limit_keys as in JobRunsEnqueueMany.
with notified as (
    select pg_notify('workq_job_runs', q.queue) as sent
    from (select distinct unnest(@queues::text[]) as queue) q
    where @notify::boolean
),
ins as (
insert into workq.job_runs (queue, kind, payload, priority, run_at, max_attempts, metadata, limit_key)
select unnest(@queues::text[]), unnest(@kinds::text[]), unnest(@payloads::text[])::jsonb,
       unnest(@priorities::smallint[]), now() + unnest(@delays_ms::bigint[]) * interval '1 millisecond',
       unnest(@max_attempts::integer[]), nullif(unnest(@metadatas::text[]), '')::jsonb, nullif(unnest(@limit_keys::text[]), '')
returning id
)
-- A cross join, not a left join: see JobRunsEnqueueMany.
select ins.id from ins cross join (select count(*) as n from notified) x;

-- name: JobRunsEnqueueUnique :one
-- JobRunsEnqueueUnique inserts one unique job run (unique_key, a digest the client computes, and unique_states, the bitmask of the statuses in which a run holds its key: bit n is status n), or returns the id of the run that holds its key (inserted = false); notify, metadata and limit_key as in JobRunsEnqueue. The conflict target is job_runs_unique (migration 00018), whose predicate it repeats.
with ins as (
    insert into workq.job_runs (queue, kind, payload, priority, run_at, max_attempts, unique_key, unique_states, metadata, limit_key)
    values (
        @queue, @kind, @payload, @priority,
        coalesce(sqlc.narg('run_at')::timestamptz, now() + (@delay_ms::bigint) * interval '1 millisecond'),
        @max_attempts, @unique_key::bytea, @unique_states::smallint, sqlc.narg('metadata')::jsonb, sqlc.narg('limit_key')::text)
    on conflict (unique_key) where unique_key is not null and (unique_states >> status) & 1 = 1 do nothing
    returning id
),
notified as (
    select pg_notify('workq_job_runs', @queue::text) as sent
    where @notify::boolean and exists (select 1 from ins)
)
select ins.id, true as inserted from ins left join notified on true
union all
select j.id, false as inserted from workq.job_runs j
where j.unique_key = @unique_key::bytea and (j.unique_states >> j.status) & 1 = 1 and not exists (select 1 from ins)
limit 1;

-- name: JobRunsEnqueueManyUnique :many
-- JobRunsEnqueueManyUnique inserts many job runs in one statement, some of them unique (unique_keys and unique_states as in JobRunsEnqueueUnique; a null key and a 0 mask for a job that is not): rows whose key a run holds are skipped (not returned); notify and metadatas and limit_keys as in JobRunsEnqueueMany.
with notified as (
    select pg_notify('workq_job_runs', q.queue) as sent
    from (select distinct unnest(@queues::text[]) as queue) q
    where @notify::boolean
),
ins as (
insert into workq.job_runs (queue, kind, payload, priority, run_at, max_attempts, unique_key, unique_states, metadata, limit_key)
select unnest(@queues::text[]), unnest(@kinds::text[]), unnest(@payloads::text[])::jsonb,
       unnest(@priorities::smallint[]), now() + unnest(@delays_ms::bigint[]) * interval '1 millisecond',
       unnest(@max_attempts::integer[]), unnest(@unique_keys::bytea[]), nullif(unnest(@unique_states::smallint[]), 0),
       nullif(unnest(@metadatas::text[]), '')::jsonb, nullif(unnest(@limit_keys::text[]), '')
on conflict (unique_key) where unique_key is not null and (unique_states >> status) & 1 = 1 do nothing
returning id, unique_key
)
-- A cross join: see JobRunsEnqueueMany.
select ins.id, ins.unique_key from ins cross join (select count(*) as n from notified) x;

-- name: JobRunsHoldingUniqueKeys :many
-- JobRunsHoldingUniqueKeys finds the runs that hold the given unique keys (their status is in their unique_states), from job_runs_unique.
select id, unique_key from workq.job_runs
where unique_key = any(@unique_keys::bytea[]) and (unique_states >> status) & 1 = 1;

-- name: JobRunsLatestByUniqueKeys :many
-- JobRunsLatestByUniqueKeys finds the newest run with each unique key whatever its status (rare path, as JobRunsLatestByDedupKeys: a duplicate whose run left its key's states before it was looked up; no index of job_runs covers those rows; job_runs_done's unique_key index covers the moved ones).
select distinct on (unique_key) id, unique_key
from (select id, unique_key from workq.job_runs union all select id, unique_key from workq.job_runs_done) j
where unique_key = any(@unique_keys::bytea[])
order by unique_key, id desc;

-- name: JobRunsCopyStart :one
-- JobRunsCopyStart opens the transaction of a COPY enqueue (EnqueueManyFast): it returns the transaction's clock, now(), the same value the copied rows' column defaults take, from which the client computes run_at = now() + delay (COPY cannot evaluate an expression per row), and queues NOTIFY workq_job_runs for each given queue, delivered at commit and only if the copied rows commit.
select now()::timestamptz as now, count(pg_notify('workq_job_runs', q))::bigint as notified
from unnest(@queues::text[]) q;

-- name: JobRunsLatestByDedupKeys :many
-- JobRunsLatestByDedupKeys finds the newest run holding each dedup key whatever its status (rare path: a duplicate whose live run finished before it was looked up; no index of job_runs covers finished keys; job_runs_done's dedup_key index covers the moved ones).
select distinct on (dedup_key) id, dedup_key
from (select id, dedup_key from workq.job_runs union all select id, dedup_key from workq.job_runs_done) j
where dedup_key = any(@dedup_keys::text[])
order by dedup_key, id desc;

-- name: JobRunsLiveByDedupKeys :many
-- JobRunsLiveByDedupKeys finds the live (ready or in-progress) runs holding the given dedup keys.
select id, dedup_key from workq.job_runs
where dedup_key = any(@dedup_keys::text[]) and status < 2;

-- name: JobRunsClaim :many
-- JobRunsClaim leases up to max_rows due job runs of one queue (priority desc, run_at, id) under owner_token, a fresh token the caller mints for this claim alone, within the global limit of the queue; with a resume point (resume_priority, resume_run_at) it reads that priority's rows from resume_run_at on instead of from its start (higher and lower priorities are read in full). Expired leases are reaped by LeaseReapExpired (the claimer runs it for its queue about once a second).
--
-- Why a resume point: claims take rows from the start of job_runs_claim,
-- and every row they take leaves a dead entry there until VACUUM removes
-- it. Between vacuums each claim steps over all of them: 75 ms of a claim
-- of 1,000 after a million jobs (docs/throughput.md). The runtime passes,
-- while its queue has a backlog, a point a margin before where its previous
-- claim started (lease.ClaimParams.Resume), and a full claim (no point) at
-- least once a second and whenever a claim was not full.
with budget as materialized (
    select workq.workq_claim_budget('job_runs', @queue, @max_rows::integer) as n
),
-- Priorities above the resume point's, from their start (without a point:
-- none, as no smallint is above 32767).
above as (
    select r.id from workq.job_runs r
    where r.queue = @queue and r.status = 0 and r.run_at <= now()
      and r.priority > coalesce(sqlc.narg('resume_priority')::smallint, 32767)
    order by r.priority desc, r.run_at, r.id
    limit (select b.n from budget b)
    for no key update skip locked
),
-- The resume point's priority from its run_at on (without a point: 32767
-- from the start).
resumed as (
    select r.id from workq.job_runs r
    where r.queue = @queue and r.status = 0 and r.run_at <= now()
      and r.priority = coalesce(sqlc.narg('resume_priority')::smallint, 32767)
      and r.run_at >= coalesce(sqlc.narg('resume_run_at')::timestamptz, '-infinity')
    order by r.priority desc, r.run_at, r.id
    limit greatest(0, (select b.n from budget b) - (select count(*) from above))
    for no key update skip locked
),
-- Lower priorities, from their start.
below as (
    select r.id from workq.job_runs r
    where r.queue = @queue and r.status = 0 and r.run_at <= now()
      and r.priority < coalesce(sqlc.narg('resume_priority')::smallint, 32767)
    order by r.priority desc, r.run_at, r.id
    limit greatest(0, (select b.n from budget b) - (select count(*) from above) - (select count(*) from resumed))
    for no key update skip locked
)
update workq.job_runs j set
    status = 1,
    owner_token = @owner_token::uuid,
    locked_until = now() + (@lease_ms::bigint) * interval '1 millisecond',
    lease_version = greatest(j.lease_version + 1, (select workq.workq_epoch())),
    attempts = j.attempts + 1,
    claimed_at = now(),
    claimed_by = @worker_id::text,
    updated_at = now()
-- Not a join with the candidates: the planner cannot estimate the budget
-- limit (it assumes 10% of the ready rows) and would hash or merge join the
-- table.
where j.id = any(array(select a.id from above a union all select m.id from resumed m union all select b.id from below b))
returning j.id, j.kind, j.payload, j.priority, j.run_at, j.attempts, j.max_attempts,
          j.lease_version, j.locked_until, j.created_at, j.metadata, j.limit_key;

-- name: JobRunsClaimIDs :many
-- JobRunsClaimIDs leases the ready job runs among ids under owner_token, as JobRunsClaim does: the second statement of a flow claim, whose workq_flow_pick chose and locked them in the same transaction; claimed_at is the pick's clock (its "at"), which its log of starts holds.
update workq.job_runs j set
    status = 1,
    owner_token = @owner_token::uuid,
    locked_until = sqlc.arg('claimed_at')::timestamptz + (@lease_ms::bigint) * interval '1 millisecond',
    lease_version = greatest(j.lease_version + 1, (select workq.workq_epoch())),
    attempts = j.attempts + 1,
    claimed_at = sqlc.arg('claimed_at')::timestamptz,
    claimed_by = @worker_id::text,
    updated_at = now()
where j.id = any(@ids::bigint[]) and j.status = 0
returning j.id, j.kind, j.payload, j.priority, j.run_at, j.attempts, j.max_attempts,
          j.lease_version, j.locked_until, j.created_at, j.metadata, j.limit_key;

-- name: JobRunsGet :one
-- JobRunsGet reads one job run, from the work table or, once it ended done and moved, from job_runs_done (one probe of each day's id index).
select * from workq.job_runs j where j.id = @id::bigint
union all
(select * from workq.job_runs_done d where d.id = @id::bigint limit 1)
limit 1;

-- name: JobRunsPage :many
-- JobRunsPage lists items newest first below before_id (keyset pagination over the primary key: rows inserted meanwhile have higher ids and never shift a later page), filtered by queue, status, kind, creation time, a text in last_error, case-insensitive, metadata containing an object and the limit key (null: any), and at or above min_id (admin bounds the ids a text or metadata search reads with it).
select * from (
    select * from workq.job_runs
    union all
    -- done rows only: a page of another status skips the done table (a one-time filter)
    select * from workq.job_runs_done d where sqlc.narg('status')::smallint is null or sqlc.narg('status')::smallint = 2
) t
where t.id < @before_id::bigint
  and (sqlc.narg('queue')::text is null or t.queue = sqlc.narg('queue')::text)
  and (sqlc.narg('status')::smallint is null or t.status = sqlc.narg('status')::smallint)
  and (sqlc.narg('kind')::text is null or t.kind = sqlc.narg('kind')::text)
  and (sqlc.narg('created_after')::timestamptz is null or t.created_at >= sqlc.narg('created_after')::timestamptz)
  and (sqlc.narg('created_before')::timestamptz is null or t.created_at < sqlc.narg('created_before')::timestamptz)
  and t.id >= @min_id::bigint
  and (sqlc.narg('error_text')::text is null or strpos(lower(t.last_error), lower(sqlc.narg('error_text')::text)) > 0)
  -- text, cast here: admin runs it with parameters typed by their Go values (pgx.QueryExecModeExec), where bytes are bytea
  and (sqlc.narg('metadata')::text is null or t.metadata @> sqlc.narg('metadata')::text::jsonb)
  and (sqlc.narg('limit_key')::text is null or t.limit_key = sqlc.narg('limit_key')::text)
order by t.id desc
limit @max_rows::integer;

-- name: JobRunsPageAsc :many
-- JobRunsPageAsc is JobRunsPage oldest first: items above after_id (the same keyset walk up the primary key, or up the failed index; rows inserted meanwhile have higher ids and come on a later page), with the same filters, and at or below max_id (admin bounds the ids a text or metadata search reads with it).
select * from (
    select * from workq.job_runs
    union all
    -- done rows only: a page of another status skips the done table (a one-time filter)
    select * from workq.job_runs_done d where sqlc.narg('status')::smallint is null or sqlc.narg('status')::smallint = 2
) t
where t.id > @after_id::bigint
  and (sqlc.narg('queue')::text is null or t.queue = sqlc.narg('queue')::text)
  and (sqlc.narg('status')::smallint is null or t.status = sqlc.narg('status')::smallint)
  and (sqlc.narg('kind')::text is null or t.kind = sqlc.narg('kind')::text)
  and (sqlc.narg('created_after')::timestamptz is null or t.created_at >= sqlc.narg('created_after')::timestamptz)
  and (sqlc.narg('created_before')::timestamptz is null or t.created_at < sqlc.narg('created_before')::timestamptz)
  and t.id <= @max_id::bigint
  and (sqlc.narg('error_text')::text is null or strpos(lower(t.last_error), lower(sqlc.narg('error_text')::text)) > 0)
  -- text, cast here: admin runs it with parameters typed by their Go values (pgx.QueryExecModeExec), where bytes are bytea
  and (sqlc.narg('metadata')::text is null or t.metadata @> sqlc.narg('metadata')::text::jsonb)
  and (sqlc.narg('limit_key')::text is null or t.limit_key = sqlc.narg('limit_key')::text)
order by t.id
limit @max_rows::integer;

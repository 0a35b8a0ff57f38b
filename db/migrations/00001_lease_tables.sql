-- The four work tables share one lease engine. Their lease columns are the
-- same on every table so that the claim/heartbeat/complete/reap SQL in
-- db/queries reads alike; docs/schema.md explains every column and index.
--
-- status: 0 ready, 1 in_progress, 2 done, 3 failed.
-- run_at is the eligibility time on every table (for timers it starts equal to
-- due_time, for scheduled job runs to scheduled_time); retries move run_at and
-- leave the domain time alone.
--
-- No index contains locked_until, so a heartbeat (which changes only
-- locked_until) is a HOT update. fillfactor leaves room on each page for it.

-- +goose Up
-- Names of queues, kinds and schedules: 1 to 128 of A-Z a-z 0-9 _ . : -.
-- A domain rather than a table CHECK: PostgreSQL re-evaluates every table
-- CHECK on every UPDATE, so a check on each claim and completion; a domain
-- constraint is checked only when a value is assigned (insert, or an update
-- of that column). The length is tested apart from the regex: a bounded
-- repetition ({1,128}) made the regex cost about 8 us per value, an enqueue
-- of two names 17 us per row; this form costs under 1 us.
create domain workq.workq_name as text
    check (value ~ '^[A-Za-z0-9_.:-]+$' and length(value) <= 128);

-- workq_table_code is a work table's code in run ids. Codes are assigned
-- once and never reused: a run id written today must read back tomorrow. A
-- new work table adds its name here with the next free code (at most 63) in
-- its own migration. An unknown name is an error, never another table's code.
-- +goose StatementBegin
create function workq.workq_unknown_table(p_table text)
returns bigint
language plpgsql immutable parallel safe
as $$
begin
    raise exception 'workq: unknown work table %', p_table
        using hint = 'register the table in workq_table_code (db/migrations) and in package lease';
end
$$;
-- +goose StatementEnd

create function workq.workq_table_code(p_table text)
returns bigint
language sql immutable parallel safe
as $$
    select case p_table
        when 'job_runs' then 0
        when 'outbox' then 1
        when 'inbox' then 2
        when 'timers' then 3
        else workq.workq_unknown_table(p_table) end
$$;

-- workq_run_id names one attempt: (work table, item id, lease_version), packed
-- into a version-8 UUID (RFC 9562, custom layout). Every claim increments
-- lease_version, so each attempt gets its own id without a random number per
-- row, and the id can be read back: run ids of one item are adjacent and in
-- claim order, and ids grow with item ids, so archive inserts land at the
-- right edge of the runs primary key instead of at random pages (random
-- UUIDs there cost a sixth of worker throughput; docs/throughput.md).
--   bits 0-47:  item id bits 59..12   bits 48-51: version 8
--   bits 52-63: item id bits 11..0    bits 64-65: variant 10
--   bits 66-71: table code (workq_table_code, 0-63)
--   bits 72-127: lease_version (56 bits)
-- Item ids are capped at 2^60 - 1 by their identity columns so that the
-- packing is unique. lease.RunID is the same function in Go
-- (test/run_id_test.go keeps the two equal). Written as plain expressions
-- (not STRICT) so the planner inlines both functions and, with the table
-- name a literal in every statement, folds the table's code to a constant.
create function workq.workq_run_id(p_table text, p_id bigint, p_lease_version bigint)
returns uuid
language sql immutable parallel safe
as $$
    select encode(
        int8send(((p_id >> 12) << 16) | 32768 | (p_id & 4095))
        || int8send((-9223372036854775808)::bigint
                    | (workq.workq_table_code(p_table) << 56)
                    | (p_lease_version & 72057594037927935)),
        'hex')::uuid
$$;

create table workq.schedules (
    id            bigint generated always as identity primary key,
    name          workq.workq_name not null unique,
    queue         workq.workq_name not null default 'default',
    kind          workq.workq_name not null,
    payload       jsonb not null default '{}',
    cron          text not null,
    timezone      text not null default 'UTC',
    priority      smallint not null default 0,
    max_attempts  integer not null default 4 check (max_attempts between 1 and 1000),
    enabled       boolean not null default true,
    next_run_at   timestamptz,
    last_run_at   timestamptz,
    created_at    timestamptz not null default now(),
    updated_at    timestamptz not null default now()
);
create index schedules_due on workq.schedules (next_run_at) where enabled;

create table workq.job_runs (
    id             bigint generated always as identity (maxvalue 1152921504606846975) primary key, -- 2^60 - 1: workq_run_id
    queue          workq.workq_name not null default 'default',
    kind           workq.workq_name not null,
    payload        jsonb not null default '{}',
    dedup_key      text check (length(dedup_key) between 1 and 512),
    schedule_id    bigint references workq.schedules (id) on delete set null,
    scheduled_time timestamptz,
    -- lease columns (identical on every work table)
    status         smallint not null default 0 check (status between 0 and 3),
    priority       smallint not null default 0,
    run_at         timestamptz not null default now(),
    owner_token    uuid,
    locked_until   timestamptz,
    lease_version  bigint not null default 0,
    attempts       integer not null default 0 check (attempts >= 0),
    max_attempts   integer not null default 4 check (max_attempts between 1 and 1000),
    claimed_at     timestamptz,
    claimed_by     text,
    last_error     text,
    created_at     timestamptz not null default now(),
    updated_at     timestamptz not null default now(),
    finished_at    timestamptz,
    -- in progress <=> a token; a token <=> a lease end. Complete relies on the
    -- first: a row matching an owner token is in progress.
    constraint job_runs_lease_ck check ((status = 1) = (owner_token is not null)),
    constraint job_runs_lease_pair_ck check ((owner_token is null) = (locked_until is null))
) with (fillfactor = 75);
-- claim: queue, priority desc, run_at, id over ready rows only
create index job_runs_claim on workq.job_runs (queue, priority desc, run_at, id) where status = 0;
-- the in-progress set, keyed by id (Complete and Heartbeat look ids up; the
-- reaper and the W count scan it, and it is bounded by worker concurrency);
-- it leaves out locked_until so heartbeats stay HOT
create index job_runs_in_progress on workq.job_runs (id) where status = 1;
-- retention of finished rows
create index job_runs_finished on workq.job_runs (finished_at) where status >= 2;
-- a schedule materialises each slot once; partial, so rows without a
-- schedule add no entry on each claim and completion
create unique index job_runs_schedule_slot on workq.job_runs (schedule_id, scheduled_time) where schedule_id is not null;
-- a dedup key names at most one live (ready or in-progress) job run
create unique index job_runs_dedup on workq.job_runs (dedup_key) where dedup_key is not null and status < 2;

create table workq.outbox (
    id             bigint generated always as identity (maxvalue 1152921504606846975) primary key, -- 2^60 - 1: workq_run_id
    queue          workq.workq_name not null default 'default',
    topic          text not null check (length(topic) between 1 and 256),
    partition_key  text check (length(partition_key) between 1 and 256),
    message_id     uuid not null default gen_random_uuid() unique,
    payload        jsonb not null default '{}',
    headers        jsonb not null default '{}' check (jsonb_typeof(headers) = 'object'),
    correlation_id text,
    status         smallint not null default 0 check (status between 0 and 3),
    priority       smallint not null default 0,
    run_at         timestamptz not null default now(),
    owner_token    uuid,
    locked_until   timestamptz,
    lease_version  bigint not null default 0,
    attempts       integer not null default 0 check (attempts >= 0),
    max_attempts   integer not null default 4 check (max_attempts between 1 and 1000),
    claimed_at     timestamptz,
    claimed_by     text,
    last_error     text,
    created_at     timestamptz not null default now(),
    updated_at     timestamptz not null default now(),
    finished_at    timestamptz,
    -- in progress <=> a token; a token <=> a lease end. Complete relies on the
    -- first: a row matching an owner token is in progress.
    constraint outbox_lease_ck check ((status = 1) = (owner_token is not null)),
    constraint outbox_lease_pair_ck check ((owner_token is null) = (locked_until is null))
) with (fillfactor = 75);
-- claim: creation order (id) within priority
create index outbox_claim on workq.outbox (queue, priority desc, id) where status = 0;
create index outbox_in_progress on workq.outbox (id) where status = 1;
create index outbox_finished on workq.outbox (finished_at) where status >= 2;

create table workq.outbox_joins (
    id             bigint generated always as identity primary key,
    expected_steps integer not null check (expected_steps > 0),
    completed_steps integer not null default 0,
    failed_steps   integer not null default 0,
    status         smallint not null default 0 check (status between 0 and 3),
    payload        jsonb not null default '{}',
    created_at     timestamptz not null default now(),
    updated_at     timestamptz not null default now(),
    finished_at    timestamptz
);

create table workq.outbox_join_members (
    join_id     bigint not null references workq.outbox_joins (id) on delete cascade,
    outbox_id   bigint not null references workq.outbox (id) on delete cascade,
    status      smallint not null default 0 check (status between 0 and 3),
    finished_at timestamptz,
    primary key (join_id, outbox_id)
);
create index outbox_join_members_outbox on workq.outbox_join_members (outbox_id);

create table workq.inbox (
    id             bigint generated always as identity (maxvalue 1152921504606846975) primary key, -- 2^60 - 1: workq_run_id
    queue          workq.workq_name not null default 'default',
    source         text not null check (length(source) between 1 and 256),
    message_id     text not null check (length(message_id) between 1 and 512),
    topic          text,
    payload        jsonb not null default '{}',
    payload_hash   bytea not null,
    first_seen_at  timestamptz not null default now(),
    last_seen_at   timestamptz not null default now(),
    seen_count     integer not null default 1,
    status         smallint not null default 0 check (status between 0 and 3),
    priority       smallint not null default 0,
    run_at         timestamptz not null default now(),
    owner_token    uuid,
    locked_until   timestamptz,
    lease_version  bigint not null default 0,
    attempts       integer not null default 0 check (attempts >= 0),
    max_attempts   integer not null default 4 check (max_attempts between 1 and 1000),
    claimed_at     timestamptz,
    claimed_by     text,
    last_error     text,
    created_at     timestamptz not null default now(),
    updated_at     timestamptz not null default now(),
    finished_at    timestamptz,
    -- in progress <=> a token; a token <=> a lease end. Complete relies on the
    -- first: a row matching an owner token is in progress.
    constraint inbox_lease_ck check ((status = 1) = (owner_token is not null)),
    constraint inbox_lease_pair_ck check ((owner_token is null) = (locked_until is null)),
    constraint inbox_source_message unique (source, message_id)
) with (fillfactor = 75);
-- claim: arrival order (run_at, id)
create index inbox_claim on workq.inbox (queue, run_at, id) where status = 0;
create index inbox_in_progress on workq.inbox (id) where status = 1;
create index inbox_finished on workq.inbox (finished_at) where status >= 2;

create table workq.timers (
    id             bigint generated always as identity (maxvalue 1152921504606846975) primary key, -- 2^60 - 1: workq_run_id
    queue          workq.workq_name not null default 'default',
    topic          text not null check (length(topic) between 1 and 256),
    payload        jsonb not null default '{}',
    due_time       timestamptz not null,
    status         smallint not null default 0 check (status between 0 and 3),
    priority       smallint not null default 0,
    run_at         timestamptz not null,
    owner_token    uuid,
    locked_until   timestamptz,
    lease_version  bigint not null default 0,
    attempts       integer not null default 0 check (attempts >= 0),
    max_attempts   integer not null default 4 check (max_attempts between 1 and 1000),
    claimed_at     timestamptz,
    claimed_by     text,
    last_error     text,
    created_at     timestamptz not null default now(),
    updated_at     timestamptz not null default now(),
    finished_at    timestamptz,
    -- in progress <=> a token; a token <=> a lease end. Complete relies on the
    -- first: a row matching an owner token is in progress.
    constraint timers_lease_ck check ((status = 1) = (owner_token is not null)),
    constraint timers_lease_pair_ck check ((owner_token is null) = (locked_until is null))
) with (fillfactor = 75);
-- claim: due order (run_at starts as due_time), id
create index timers_claim on workq.timers (queue, run_at, id) where status = 0;
create index timers_in_progress on workq.timers (id) where status = 1;
create index timers_finished on workq.timers (finished_at) where status >= 2;

-- One row per attempt, written when the attempt ends (ack, retry, fail,
-- release, snooze, or lease expiry found by the reaper). The attempt that is
-- running now is visible on its work row (lease_version, claimed_at,
-- claimed_by); its run id is workq_run_id(table, id, lease_version).
-- The primary key also serves "the attempts of one item": they are one range
-- of run ids (see workq_run_id), so there is no separate item index to write.
create table workq.runs (
    run_id        uuid primary key,
    work_table    text not null check (workq.workq_table_code(work_table) >= 0), -- unknown names raise
    item_id       bigint not null,
    queue         text not null,
    attempt       integer not null,
    lease_version bigint not null,
    owner_token   uuid not null,
    worker_id     text not null,
    started_at    timestamptz not null,
    finished_at   timestamptz not null,
    outcome       text not null check (outcome in ('done', 'retry', 'failed', 'released', 'snoozed', 'expired')),
    error         text
);
create index runs_finished on workq.runs (finished_at);

-- Global limit W per (table, queue): at most max_in_progress non-expired
-- in-progress rows. Absent row = no limit.
create table workq.queue_limits (
    work_table      text not null check (workq.workq_table_code(work_table) >= 0), -- unknown names raise
    queue           workq.workq_name not null,
    max_in_progress integer not null check (max_in_progress >= 0),
    updated_at      timestamptz not null default now(),
    primary key (work_table, queue)
);

-- workq_claim_budget returns how many rows a claim on (table, queue) may take
-- now: p_want when the queue has no limit, else what is left of W. It locks the
-- limit row, so claimers of a limited queue take turns, and because it is
-- VOLATILE plpgsql its count runs on a snapshot taken after that lock is held:
-- it sees every claim committed by the claimer that held the lock before it.
-- (A plain subquery would count on the outer statement's older snapshot and
-- could let two claimers both see the same free slots.)
-- +goose StatementBegin
create function workq.workq_claim_budget(p_table text, p_queue text, p_want integer)
returns integer
language plpgsql volatile
as $$
declare
    v_limit  integer;
    v_active integer;
begin
    select max_in_progress into v_limit
    from workq.queue_limits
    where work_table = p_table and queue = p_queue
    for update;
    if not found then
        return greatest(p_want, 0);
    end if;
    execute format(
        'select count(*) from workq.%I where queue = $1 and status = 1 and locked_until > now()',
        p_table)
    into v_active
    using p_queue;
    return greatest(0, least(p_want, v_limit - v_active));
end
$$;
-- +goose StatementEnd

-- +goose Down
drop function workq.workq_claim_budget(text, text, integer);
drop table workq.queue_limits;
drop table workq.runs;
drop table workq.timers;
drop table workq.inbox;
drop table workq.outbox_join_members;
drop table workq.outbox_joins;
drop table workq.outbox;
drop table workq.job_runs;
drop table workq.schedules;
drop function workq.workq_run_id(text, bigint, bigint);
drop function workq.workq_table_code(text);
drop function workq.workq_unknown_table(text);
drop domain workq.workq_name;

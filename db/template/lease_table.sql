-- The lease template: the columns every work table shares, under a name that
-- exists only for sqlc. The statements in db/queries/lease.sql are written
-- once against workq_lease_table; package lease rewrites that name to the
-- real table (from its closed registry) before they run, so one typed Go
-- method serves every work table. This file is never applied to a database:
-- sqlc.yaml lists it as schema, goose does not. test/lease_template_test.go
-- checks that every registered work table has each of these columns with the
-- same type, so a statement that type-checks here runs there. What differs
-- between tables (how rows arrive, claim order, the columns a claim returns)
-- stays in each table's own query file.
create table workq.workq_lease_table (
    id             bigint generated always as identity primary key,
    queue          workq.workq_name not null,
    status         smallint not null,
    priority       smallint not null,
    run_at         timestamptz not null,
    owner_token    uuid,
    locked_until   timestamptz,
    lease_version  bigint not null,
    attempts       integer not null,
    max_attempts   integer not null,
    claimed_at     timestamptz,
    claimed_by     text,
    last_error     text,
    created_at     timestamptz not null,
    updated_at     timestamptz not null,
    finished_at    timestamptz,
    cancel_requested_at timestamptz,
    output         jsonb
);
-- A work row's workflow (00026): job runs have one, the other tables never.
create function workq.workq_workflow_id(r workq.workq_lease_table) returns bigint
language sql immutable as 'select null::bigint';
-- Whether a work row's end is awaited (00026): job runs only.
create function workq.workq_awaited(r workq.workq_lease_table) returns boolean
language sql immutable as 'select null::boolean';
-- Its done table (00027): the same columns; a done row moves there.
create table workq.workq_lease_table_done (
    id             bigint not null,
    queue          workq.workq_name not null,
    status         smallint not null,
    priority       smallint not null,
    run_at         timestamptz not null,
    owner_token    uuid,
    locked_until   timestamptz,
    lease_version  bigint not null,
    attempts       integer not null,
    max_attempts   integer not null,
    claimed_at     timestamptz,
    claimed_by     text,
    last_error     text,
    created_at     timestamptz not null,
    updated_at     timestamptz not null,
    finished_at    timestamptz,
    cancel_requested_at timestamptz,
    output         jsonb
);
-- Whether a row that ends done stays in the work table (00027).
create function workq.workq_keeps_done(r workq.workq_lease_table) returns boolean
language sql immutable as 'select true';
-- The row as a done completion leaves it (00027).
create function workq.workq_done_row(r workq.workq_lease_table, p_output jsonb) returns workq.workq_lease_table
language sql stable as 'select r';
-- The same as a set-returning function, inlined once (00029).
create function workq.workq_done_rows(r workq.workq_lease_table, p_output jsonb) returns setof workq.workq_lease_table
language sql stable as 'select r.*';

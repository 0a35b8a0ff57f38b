-- The run archive, partitioned by day (issue 21 item 2; docs/design.md
-- "The run archive is partitioned by day").
--
-- runs becomes a table partitioned by range of finished_at: one partition
-- per UTC day, runs_pYYYYMMDD, made ahead of time by
-- workq_runs_add_partitions, and a DEFAULT partition, runs_default, so that
-- an insert never fails when maintenance has not made the day's partition.
-- Retention drops whole partitions (workq_runs_drop_partition) instead of
-- deleting rows: no dead tuples, no vacuum, no WAL per row, and the space
-- goes back to the operating system at once.
--
-- The primary key becomes (run_id, finished_at): a unique index of a
-- partitioned table must contain the partition key. run_id stays unique by
-- construction: workq_run_id(table, id, lease_version) names one attempt,
-- and its row is written once, by the statement that ends the attempt under
-- the lease's fencing (docs/schema.md "Run ids").
--
-- The upgrade keeps the rows where they are. A non-empty archive becomes
-- the partition runs_legacy, covering everything before the end of the
-- migration's day (or of the next day, after 18:00 UTC): no row is copied.
-- Attaching it costs no scan under a lock because a CHECK constraint that
-- implies its range is added NOT VALID (instant) and validated while
-- completions go on (VALIDATE takes a lock that inserts do not wait for);
-- its (run_id, finished_at) index was built concurrently by 00019. The
-- conversion itself is one short transaction under an ACCESS EXCLUSIVE lock
-- (renames, the new parent, ATTACH, the DEFAULT partition); the first day
-- partitions come after it. Retention deletes
-- runs_legacy's old rows in batches as before, and drops it whole once its
-- range is older than the retention age. An empty archive (a new install) is
-- simply replaced, with no legacy partition.
--
-- Each step is a transaction of its own (the VALIDATE must not hold the
-- conversion's lock), each skips itself once runs is partitioned, so a run
-- that failed at any point can run again. Inside a caller's transaction
-- (migrate.Options with a pgx.Tx) they all run there.
--
-- The functions qualify their tables with the schema like every other statement,
-- so the schema rewrite moves them (docs/design.md "Schema isolation"). They
-- compute day boundaries in UTC (SET timezone) and read partition bounds in
-- ISO format (SET datestyle), whatever the session's settings.

-- +goose NO TRANSACTION
-- +goose Up

-- workq_runs_partition_list lists the partitions of runs with their bounds
-- (-infinity for MINVALUE, infinity for MAXVALUE, null for the DEFAULT
-- partition) and PostgreSQL's estimate of their rows (0 before the first
-- ANALYZE), oldest first, the DEFAULT partition last. PostgreSQL keeps the
-- bounds only as an expression, which pg_get_expr prints.
create or replace function workq.workq_runs_partition_list()
returns table (partition_name text, lower_bound timestamptz, upper_bound timestamptz, is_default boolean, rows_estimate bigint)
language sql stable
set timezone = 'UTC'
set datestyle = 'ISO, YMD'
as $$
    select c.relname::text,
           case when b.m is null then null when b.m[1] = 'MINVALUE' then '-infinity' else btrim(b.m[1], '''') end::timestamptz,
           case when b.m is null then null when b.m[2] = 'MAXVALUE' then 'infinity' else btrim(b.m[2], '''') end::timestamptz,
           b.m is null,
           greatest(c.reltuples, 0)::bigint
    from pg_catalog.pg_inherits i
    join pg_catalog.pg_class c on c.oid = i.inhrelid
    cross join lateral (
        select regexp_match(pg_catalog.pg_get_expr(c.relpartbound, c.oid), '^FOR VALUES FROM \((.+)\) TO \((.+)\)$') as m
    ) b
    where i.inhparent = 'workq.runs'::regclass
    order by b.m is null, 3, 1
$$;

-- workq_runs_add_partitions makes the day partitions of runs from p_now's
-- UTC day to p_days_ahead days after it, and one for every day that has rows
-- in the DEFAULT partition, moving those rows into it (PostgreSQL refuses a
-- partition whose range holds rows of the DEFAULT partition). Days that end
-- at or before p_oldest (the retention cut-off; null: none) are left out:
-- their rows stay in the DEFAULT partition, whose old rows retention deletes,
-- rather than moved only to be dropped. A day that any partition already
-- covers, even in part, is skipped. It returns how many partitions it made.
--
-- A partition is made as a plain table and then attached: ATTACH PARTITION
-- takes SHARE UPDATE EXCLUSIVE on runs, which inserts do not wait for,
-- where CREATE TABLE ... PARTITION OF would take ACCESS EXCLUSIVE. The
-- DEFAULT partition is locked while it is checked (it is normally empty).
-- lock_timeout bounds every wait: a round that cannot get a lock fails and
-- the next one tries again, days ahead of need. Callers are serialised by
-- SHARE UPDATE EXCLUSIVE on runs itself (ONLY: not its partitions), which
-- conflicts with itself and not with inserts; an advisory lock would do
-- the same, but workq takes none, so that a pooler's operators can check
-- pg_locks for stray ones (TestPgBouncer).
-- +goose StatementBegin
create or replace function workq.workq_runs_add_partitions(p_now timestamptz, p_days_ahead integer, p_oldest timestamptz)
returns integer
language plpgsql volatile
set timezone = 'UTC'
set datestyle = 'ISO, YMD'
set lock_timeout = '1s'
as $$
declare
    v_default text;
    v_days timestamptz[];
    v_days_default timestamptz[];
    v_day timestamptz;
    v_name text;
    v_added integer := 0;
begin
    if p_now is null or p_days_ahead is null or p_days_ahead not between 0 and 366 then
        raise exception 'workq: run archive partitions: want a time and 0 to 366 days ahead, got % and %', p_now, p_days_ahead;
    end if;
    lock table only workq.runs in share update exclusive mode;
    select p.partition_name into v_default from workq.workq_runs_partition_list() p where p.is_default;
    v_days := array(select date_trunc('day', p_now) + g * interval '1 day' from generate_series(0, p_days_ahead) g);
    if v_default is not null then
        execute format('select array(select distinct date_trunc(''day'', d.finished_at) from workq.%I d where isfinite(d.finished_at))', v_default)
            into strict v_days_default;
        v_days := v_days || v_days_default;
    end if;
    for v_day in select distinct d from unnest(v_days) d where p_oldest is null or d + interval '1 day' > p_oldest order by d loop
        if exists (select 1 from workq.workq_runs_partition_list() p
                   where not p.is_default and p.lower_bound < v_day + interval '1 day' and p.upper_bound > v_day) then
            continue;
        end if;
        v_name := 'runs_p' || to_char(v_day, 'YYYYMMDD');
        execute format('create table workq.%I (like workq.runs including defaults including constraints)', v_name);
        if v_default is not null then
            -- SHARE: no insert lands in the DEFAULT partition between the
            -- move and the ATTACH (which would then refuse the partition);
            -- readers go on.
            execute format('lock table workq.%I in share mode', v_default);
            execute format('with moved as (delete from workq.%I where finished_at >= $1 and finished_at < $2 returning *) '
                           'insert into workq.%I select * from moved', v_default, v_name)
                using v_day, v_day + interval '1 day';
        end if;
        execute format('alter table workq.runs attach partition workq.%I for values from (%L) to (%L)',
                       v_name, v_day, v_day + interval '1 day');
        v_added := v_added + 1;
    end loop;
    return v_added;
end
$$;
-- +goose StatementEnd

-- workq_runs_drop_partition drops the oldest partition of runs (the
-- DEFAULT partition never) whose whole range ends at or before p_before,
-- and returns its name and estimated rows; no row when there is none. One
-- partition per call, so that each drop is its own short transaction.
-- Dropping a partition takes ACCESS EXCLUSIVE on runs until the
-- transaction ends, which completions (inserts into runs) wait for;
-- lock_timeout bounds how long they can queue behind a drop that waits
-- for a long transaction: the drop fails and the next round tries again.
-- (DETACH PARTITION CONCURRENTLY would not block them, but PostgreSQL
-- refuses it on a table with a DEFAULT partition.)
-- +goose StatementBegin
create or replace function workq.workq_runs_drop_partition(p_before timestamptz)
returns table (dropped text, rows_estimate bigint)
language plpgsql volatile
set lock_timeout = '1s'
as $$
begin
    select p.partition_name, p.rows_estimate into dropped, rows_estimate
    from workq.workq_runs_partition_list() p
    where not p.is_default and p.upper_bound <= p_before
    order by p.upper_bound
    limit 1;
    if not found then
        return;
    end if;
    execute format('drop table workq.%I', dropped);
    return next;
end
$$;
-- +goose StatementEnd

-- workq_runs_delete_old deletes up to p_max_rows rows that finished before
-- p_before from the partitions that are not one day wide: the DEFAULT
-- partition (rows written while no partition covered their day) and
-- runs_legacy (the archive from before partitioning, until it is dropped).
-- The day partitions are never deleted from: retention drops them whole.
-- One statement per partition, by primary key (= any(array(...)), as
-- RunsDeleteFinished did: a LIMIT inside IN is not seen by the planner).
-- +goose StatementBegin
create or replace function workq.workq_runs_delete_old(p_before timestamptz, p_max_rows integer)
returns bigint
language plpgsql volatile
as $$
declare
    v_part text;
    v_n bigint;
    v_total bigint := 0;
begin
    for v_part in
        select p.partition_name from workq.workq_runs_partition_list() p
        where p.is_default or p.lower_bound = '-infinity'
        order by p.is_default, p.partition_name
    loop
        execute format('delete from workq.%I where finished_at < $1 and run_id = any(array('
                       'select r.run_id from workq.%I r where r.finished_at < $1 order by r.finished_at limit $2))',
                       v_part, v_part)
            using p_before, p_max_rows - v_total;
        get diagnostics v_n = row_count;
        v_total := v_total + v_n;
        exit when v_total >= p_max_rows;
    end loop;
    return v_total;
end
$$;
-- +goose StatementEnd

-- 1. The CHECK constraint that lets runs_legacy be attached without a scan,
-- added NOT VALID (no scan; a brief ACCESS EXCLUSIVE lock). Its bound is the
-- end of the migration's UTC day, or of the next day after 18:00 UTC, so
-- that completions keep satisfying it until the conversion a few statements
-- on (or the end of the day of the newest row, should a row have ended in
-- the future). A rerun replaces it with a fresh bound.
-- +goose StatementBegin
do $$
begin
    if (select c.relkind from pg_catalog.pg_class c where c.oid = 'workq.runs'::regclass) <> 'r' then
        return;
    end if;
    alter table workq.runs drop constraint if exists runs_legacy_range;
    execute format('alter table workq.runs add constraint runs_legacy_range check (finished_at < %L) not valid',
                   greatest(date_trunc('day', now() + interval '6 hours', 'UTC'),
                            date_trunc('day', (select max(r.finished_at) from workq.runs r where r.finished_at < 'infinity'), 'UTC'))
                   + interval '24 hours');
end
$$;
-- +goose StatementEnd

-- 2. Validate it: a scan of the archive under SHARE UPDATE EXCLUSIVE, which
-- completions do not wait for.
-- +goose StatementBegin
do $$
begin
    if (select c.relkind from pg_catalog.pg_class c where c.oid = 'workq.runs'::regclass) = 'r'
       and exists (select 1 from pg_catalog.pg_constraint k
                   where k.conrelid = 'workq.runs'::regclass and k.conname = 'runs_legacy_range' and not k.convalidated) then
        alter table workq.runs validate constraint runs_legacy_range;
    end if;
end
$$;
-- +goose StatementEnd

-- 3. The conversion, in one transaction under ACCESS EXCLUSIVE: the old
-- table becomes runs_legacy (its (run_id) key is dropped, its 00019 index
-- becomes its primary key, which the new primary key adopts on ATTACH, as
-- runs_finished adopts its finished_at index), the new partitioned runs is
-- created with the same columns and constraints, runs_legacy is attached
-- up to the bound (implied by the validated CHECK: no scan), and the
-- DEFAULT partition is made. An empty archive is dropped and made anew.
-- +goose StatementBegin
do $$
declare
    v_keep boolean;
    v_bound timestamptz;
begin
    if (select c.relkind from pg_catalog.pg_class c where c.oid = 'workq.runs'::regclass) <> 'r' then
        return;
    end if;
    lock table workq.runs in access exclusive mode;
    v_keep := exists (select 1 from workq.runs);
    -- At or after the CHECK's bound (time only moves on, and so does the
    -- newest row), so implied by it.
    v_bound := greatest(date_trunc('day', now() + interval '6 hours', 'UTC'),
                        date_trunc('day', (select max(r.finished_at) from workq.runs r where r.finished_at < 'infinity'), 'UTC'))
               + interval '24 hours';
    if v_keep then
        -- 00019's index, unless a migration down removed it (then built
        -- here, under the lock).
        if to_regclass('workq.runs_run_id_finished') is null then
            create unique index runs_run_id_finished on workq.runs (run_id, finished_at);
        end if;
        alter table workq.runs rename to runs_legacy;
        alter table workq.runs_legacy drop constraint runs_pkey;
        alter index workq.runs_finished rename to runs_legacy_finished;
        alter table workq.runs_legacy add constraint runs_legacy_pkey primary key using index runs_run_id_finished;
    else
        drop table workq.runs;
    end if;
    create table workq.runs (
        run_id        uuid not null,
        work_table    text not null constraint runs_work_table_check check (workq.workq_table_code(work_table) >= 0), -- unknown names raise
        item_id       bigint not null,
        queue         text not null,
        attempt       integer not null,
        lease_version bigint not null,
        owner_token   uuid not null,
        worker_id     text not null,
        started_at    timestamptz not null,
        finished_at   timestamptz not null,
        outcome       text not null constraint runs_outcome_check
                      check (outcome in ('done', 'retry', 'failed', 'released', 'snoozed', 'expired', 'revived', 'cancelled')),
        error         text,
        constraint runs_pkey primary key (run_id, finished_at)
    ) partition by range (finished_at);
    create index runs_finished on workq.runs (finished_at);
    if v_keep then
        execute format('alter table workq.runs attach partition workq.runs_legacy for values from (minvalue) to (%L)', v_bound);
        alter table workq.runs_legacy drop constraint if exists runs_legacy_range;
    end if;
    create table workq.runs_default partition of workq.runs default;
end
$$;
-- +goose StatementEnd

-- 4. The day partitions from today (or the legacy bound) to three days on,
-- as the retention task makes them (maintain.RunsDaysAhead), after the
-- conversion: ATTACH does not need its lock, and each partition's index
-- builds (a file sync each) would lengthen it.
select workq.workq_runs_add_partitions(now(), 3, null);

-- +goose Down
-- Back to one plain table, every row copied into it (a migration down is
-- rare; the copy is the price of not keeping two layouts).
-- +goose StatementBegin
do $$
begin
    if (select c.relkind from pg_catalog.pg_class c where c.oid = 'workq.runs'::regclass) <> 'p' then
        return;
    end if;
    lock table workq.runs in access exclusive mode;
    create table workq.runs_unpartitioned (
        run_id        uuid not null,
        work_table    text not null constraint runs_work_table_check check (workq.workq_table_code(work_table) >= 0), -- unknown names raise
        item_id       bigint not null,
        queue         text not null,
        attempt       integer not null,
        lease_version bigint not null,
        owner_token   uuid not null,
        worker_id     text not null,
        started_at    timestamptz not null,
        finished_at   timestamptz not null,
        outcome       text not null constraint runs_outcome_check
                      check (outcome in ('done', 'retry', 'failed', 'released', 'snoozed', 'expired', 'revived', 'cancelled')),
        error         text
    );
    insert into workq.runs_unpartitioned (run_id, work_table, item_id, queue, attempt, lease_version, owner_token, worker_id,
                                          started_at, finished_at, outcome, error)
    select run_id, work_table, item_id, queue, attempt, lease_version, owner_token, worker_id,
           started_at, finished_at, outcome, error
    from workq.runs;
    drop table workq.runs;
    alter table workq.runs_unpartitioned rename to runs;
    alter table workq.runs add constraint runs_pkey primary key (run_id);
    create index runs_finished on workq.runs (finished_at);
    -- As 00019 left it.
    create unique index runs_run_id_finished on workq.runs (run_id, finished_at);
end
$$;
-- +goose StatementEnd
drop function if exists workq.workq_runs_delete_old(timestamptz, integer);
drop function if exists workq.workq_runs_drop_partition(timestamptz);
drop function if exists workq.workq_runs_add_partitions(timestamptz, integer, timestamptz);
drop function if exists workq.workq_runs_partition_list();

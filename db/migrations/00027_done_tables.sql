-- Finished work leaves the work table (issue 32; docs/design.md §31).
--
-- Each work table gets a done table, <table>_done, with the same columns in
-- the same order (LIKE), partitioned by UTC day of finished_at like the run
-- archive (00020): the attempt that ends an item done moves its row there
-- (LeaseComplete deletes it from the work table and inserts it here, in one
-- statement), and retention drops a day's partition whole. What claims,
-- heartbeats, reaps and the autovacuum of the work table read is then live
-- work: ready, in progress, and the finished rows some promise needs
-- (workq_keeps_done below), plus failed and cancelled items, which revive
-- and operators act on in place.
--
-- Which rows move is each table's workq_keeps_done(row): job runs move
-- unless they are a workflow's task (the workflow counts and reads them
-- until it ends, then retention deletes it whole), a schedule's slot (its
-- unique index is what keeps a slot from running twice) or unique over the
-- completed state (job_runs_unique must see them). The other tables keep
-- every row for now (the inbox's processed rows are its de-duplication
-- memory; the outbox's and timers' rows are a later change): their done
-- tables exist so that the shared lease statements, written once for every
-- table, read and write the same shapes, and they hold only the DEFAULT
-- partition.
--
-- The partition functions of 00020 are written for runs; the ones here take
-- the partitioned table's name and serve runs and the done tables alike
-- (00020's stay, for binaries from before this migration).
--
-- +goose Up

-- workq_day_partitions lists the partitions of p_parent (a partitioned
-- table of workq's schema) as workq_runs_partition_list does for runs.
create function workq.workq_day_partitions(p_parent text)
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
    where i.inhparent = format('workq.%I', p_parent)::regclass
    order by b.m is null, 3, 1
$$;

-- workq_day_partitions_add is workq_runs_add_partitions (00020) for any
-- day-partitioned table of workq's: partitions <parent>_pYYYYMMDD from
-- p_now's UTC day to p_days_ahead days on, and one for every day with rows
-- in the DEFAULT partition (moved in), leaving out days that end at or
-- before p_oldest. Made as plain tables, then attached (SHARE UPDATE
-- EXCLUSIVE: inserts go on); callers serialised by that lock on the parent.
-- +goose StatementBegin
create function workq.workq_day_partitions_add(p_parent text, p_now timestamptz, p_days_ahead integer, p_oldest timestamptz)
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
    if p_parent is null or p_now is null or p_days_ahead is null or p_days_ahead not between 0 and 366 then
        raise exception 'workq: day partitions: want a table, a time and 0 to 366 days ahead, got %, % and %', p_parent, p_now, p_days_ahead;
    end if;
    execute format('lock table only workq.%I in share update exclusive mode', p_parent);
    select p.partition_name into v_default from workq.workq_day_partitions(p_parent) p where p.is_default;
    v_days := array(select date_trunc('day', p_now) + g * interval '1 day' from generate_series(0, p_days_ahead) g);
    if v_default is not null then
        execute format('select array(select distinct date_trunc(''day'', d.finished_at) from workq.%I d where isfinite(d.finished_at))', v_default)
            into strict v_days_default;
        v_days := v_days || v_days_default;
    end if;
    for v_day in select distinct d from unnest(v_days) d where p_oldest is null or d + interval '1 day' > p_oldest order by d loop
        if exists (select 1 from workq.workq_day_partitions(p_parent) p
                   where not p.is_default and p.lower_bound < v_day + interval '1 day' and p.upper_bound > v_day) then
            continue;
        end if;
        v_name := p_parent || '_p' || to_char(v_day, 'YYYYMMDD');
        execute format('create table workq.%I (like workq.%I including defaults including constraints)', v_name, p_parent);
        if v_default is not null then
            -- SHARE: no insert lands in the DEFAULT partition between the
            -- move and the ATTACH (which would then refuse the partition).
            execute format('lock table workq.%I in share mode', v_default);
            execute format('with moved as (delete from workq.%I where finished_at >= $1 and finished_at < $2 returning *) '
                           'insert into workq.%I select * from moved', v_default, v_name)
                using v_day, v_day + interval '1 day';
        end if;
        execute format('alter table workq.%I attach partition workq.%I for values from (%L) to (%L)',
                       p_parent, v_name, v_day, v_day + interval '1 day');
        v_added := v_added + 1;
    end loop;
    return v_added;
end
$$;
-- +goose StatementEnd

-- workq_day_partition_drop drops the oldest partition of p_parent (never
-- the DEFAULT one) whose whole range ends at or before p_before, and returns
-- its name and estimated rows; no row when there is none. One per call.
-- +goose StatementBegin
create function workq.workq_day_partition_drop(p_parent text, p_before timestamptz)
returns table (dropped text, rows_estimate bigint)
language plpgsql volatile
set lock_timeout = '1s'
as $$
begin
    select p.partition_name, p.rows_estimate into dropped, rows_estimate
    from workq.workq_day_partitions(p_parent) p
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

-- workq_day_partitions_delete_old deletes up to p_max_rows rows that
-- finished before p_before from the partitions of p_parent that are not one
-- day wide (the DEFAULT partition; runs_legacy) and, with p_in_days, from
-- the day partitions that began before p_before too: a retention age under
-- a day (a done table's --retain-finished of an hour, say) is kept to the
-- age, not to the day, at the cost of deleting rows and leaving them to
-- vacuum in the partitions of the last day or two. By ctid; the rows'
-- order within a batch is not kept (the done tables' finished_at index is
-- a BRIN one, which finds the old pages but does not sort them).
-- +goose StatementBegin
create function workq.workq_day_partitions_delete_old(p_parent text, p_before timestamptz, p_max_rows integer, p_in_days boolean)
returns bigint
language plpgsql volatile
as $$
declare
    v_part text;
    v_n bigint;
    v_total bigint := 0;
begin
    for v_part in
        select p.partition_name from workq.workq_day_partitions(p_parent) p
        where p.is_default or p.lower_bound = '-infinity' or (p_in_days and p.lower_bound < p_before)
        order by p.is_default, p.lower_bound
    loop
        execute format('delete from workq.%I where finished_at < $1 and ctid = any(array('
                       'select r.ctid from workq.%I r where r.finished_at < $1 limit $2))',
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

-- The done tables. LIKE copies the columns in order with their types and
-- defaults, not the identity, keys, checks or indexes: a row is checked on
-- its way in to the work table. Read by id (<table>_done_id) and dropped
-- by day; job runs' keys are looked up by the rare duplicate path too.
create table workq.job_runs_done (like workq.job_runs including defaults) partition by range (finished_at);
create table workq.job_runs_done_default partition of workq.job_runs_done default;
create index job_runs_done_id on workq.job_runs_done (id);
-- BRIN: finished_at grows with the insert order, so a block range summary
-- finds a day's old pages for a retention under a day, for next to nothing
-- per insert (a B-tree would take an entry per done job).
create index job_runs_done_finished on workq.job_runs_done using brin (finished_at);
create index job_runs_done_dedup on workq.job_runs_done (dedup_key) where dedup_key is not null;
create index job_runs_done_unique on workq.job_runs_done (unique_key) where unique_key is not null;

create table workq.outbox_done (like workq.outbox including defaults) partition by range (finished_at);
create table workq.outbox_done_default partition of workq.outbox_done default;
create index outbox_done_id on workq.outbox_done (id);

create table workq.inbox_done (like workq.inbox including defaults) partition by range (finished_at);
create table workq.inbox_done_default partition of workq.inbox_done default;
create index inbox_done_id on workq.inbox_done (id);

create table workq.timers_done (like workq.timers including defaults) partition by range (finished_at);
create table workq.timers_done_default partition of workq.timers_done default;
create index timers_done_id on workq.timers_done (id);

-- job_runs_all: every job run, live or done, for SQL of one's own (and
-- operators' psql) that used to read done runs from job_runs. A view's
-- columns are fixed when it is made: a migration that adds a column to
-- job_runs makes it again (TestEveryDoneTableHasItsWorkTablesColumns).
create view workq.job_runs_all as
    select * from workq.job_runs
    union all
    select * from workq.job_runs_done;

-- workq_keeps_done(row): whether a row that ends done stays in its work
-- table (see the top). Inlined by the planner, like workq_workflow_id.
-- (unique_states >> 2) & 1: the completed state is among the unique ones.
create function workq.workq_keeps_done(r workq.job_runs) returns boolean
language sql immutable parallel safe as
'select r.workflow_id is not null or r.schedule_id is not null or (r.unique_key is not null and (r.unique_states >> 2) & 1 = 1)';
create function workq.workq_keeps_done(r workq.outbox) returns boolean
language sql immutable parallel safe as 'select true';
create function workq.workq_keeps_done(r workq.inbox) returns boolean
language sql immutable parallel safe as 'select true';
create function workq.workq_keeps_done(r workq.timers) returns boolean
language sql immutable parallel safe as 'select true';

-- workq_done_row(row, output) is the row as the completion leaves it (done,
-- lease cleared, finished and updated now, the handler's output when it
-- gave one), in the work table's own type, which is the done table's
-- column order: LeaseComplete inserts it into the done table. For job
-- runs, whose rows move, a row constructor in the table's column order
-- (jsonb_populate_record, which would serve any table, costs 3–4 µs a row);
-- a migration that adds a column to job_runs writes it again
-- (TestCompleteMovesDoneJobRuns fails until it does). The other tables',
-- never called while their rows stay, are written once for any columns.
create function workq.workq_done_row(r workq.job_runs, p_output jsonb) returns workq.job_runs
language sql stable parallel safe as
$$select (r.id, r.queue, r.kind, r.payload, r.dedup_key, r.schedule_id, r.scheduled_time, 2::smallint, r.priority, r.run_at,
          null::uuid, null::timestamptz, r.lease_version, r.attempts, r.max_attempts, r.claimed_at, r.claimed_by, r.last_error,
          r.created_at, now(), now(), r.metadata, r.cancel_requested_at, r.unique_key, r.unique_states, r.limit_key,
          r.workflow_id, r.awaited, coalesce(p_output, r.output))::workq.job_runs$$;
create function workq.workq_done_row(r workq.outbox, p_output jsonb) returns workq.outbox
language sql stable parallel safe as
$$select jsonb_populate_record(r, jsonb_build_object('status', 2, 'owner_token', null, 'locked_until', null,
    'finished_at', now(), 'updated_at', now(), 'output', coalesce(p_output, r.output)))$$;
create function workq.workq_done_row(r workq.inbox, p_output jsonb) returns workq.inbox
language sql stable parallel safe as
$$select jsonb_populate_record(r, jsonb_build_object('status', 2, 'owner_token', null, 'locked_until', null,
    'finished_at', now(), 'updated_at', now(), 'output', coalesce(p_output, r.output)))$$;
create function workq.workq_done_row(r workq.timers, p_output jsonb) returns workq.timers
language sql stable parallel safe as
$$select jsonb_populate_record(r, jsonb_build_object('status', 2, 'owner_token', null, 'locked_until', null,
    'finished_at', now(), 'updated_at', now(), 'output', coalesce(p_output, r.output)))$$;

-- Today's partitions and three days ahead for job runs' done table (the
-- maintenance task keeps them coming); the other done tables receive no
-- rows yet and keep only their DEFAULT partition.
select workq.workq_day_partitions_add('job_runs_done', now(), 3, null);

-- +goose Down
-- Done job runs go back to their table (a downgrade keeps them).
insert into workq.job_runs overriding system value select * from workq.job_runs_done;
drop view workq.job_runs_all;
drop function workq.workq_done_row(workq.job_runs, jsonb);
drop function workq.workq_done_row(workq.outbox, jsonb);
drop function workq.workq_done_row(workq.inbox, jsonb);
drop function workq.workq_done_row(workq.timers, jsonb);
drop function workq.workq_keeps_done(workq.job_runs);
drop function workq.workq_keeps_done(workq.outbox);
drop function workq.workq_keeps_done(workq.inbox);
drop function workq.workq_keeps_done(workq.timers);
drop table workq.timers_done;
drop table workq.inbox_done;
drop table workq.outbox_done;
drop table workq.job_runs_done;
drop function workq.workq_day_partitions_delete_old(text, timestamptz, integer, boolean);
drop function workq.workq_day_partition_drop(text, timestamptz);
drop function workq.workq_day_partitions_add(text, timestamptz, integer, timestamptz);
drop function workq.workq_day_partitions(text);

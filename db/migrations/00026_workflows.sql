-- Workflows (issue 31; docs/design.md §30, docs/concepts.md "Workflows").
--
-- A workflow is a set of job runs (its tasks, job_runs.workflow_id) with
-- dependencies between them. A task with dependencies is written pending
-- (status -1) and becomes ready (0) when all of them have ended; a
-- dependency that fails or is cancelled cancels its pending dependents,
-- unless the edge says to run them anyway (any_outcome).
--
-- Everything that decides a workflow happens in PostgreSQL, in the
-- statements that end its tasks, through one row trigger on job_runs (as
-- the outbox's joins do, 00004): no poller, no window in which a task has
-- ended and its dependents do not know.
--
-- workflows: one row per workflow, with its task count and how many have
--     ended done, failed and cancelled. Its row lock serialises every change
--     to its tasks' dependency counts: the trigger takes it first (the
--     counting UPDATE), the shared lease statements take it in id order
--     before their triggers fire (workq_workflow_id below), and adding tasks
--     takes it too. Under READ COMMITTED every statement of the trigger
--     after that lock sees the latest committed counts, so exactly one
--     ending releases a dependent (the UPDATE … WHERE status = -1 that moves
--     it), however many dependencies end at once on however many workers.
--     status: 0 running, 2 completed (every task done), 3 failed (a task
--     failed or was cancelled), 4 cancelled (Client.CancelWorkflow).
-- workflow_tasks: a task's name within its workflow and its counts:
--     deps_left, its dependencies that have not ended (or ended and were
--     revived); deps_failed, those that ended failed or cancelled on an
--     edge that cancels. dep_cancelled: the task was cancelled because of
--     them, and comes back pending when they are revived.
-- workflow_deps: the edges, looked up by the dependency when it ends.
--     any_outcome: the dependent runs whatever the dependency's outcome.
--
-- The work tables' other columns for this (job_runs.workflow_id, output,
-- awaited and the pending status) are in 00025; the other tables get
-- output here, as the lease template has it.

-- +goose Up
alter table workq.outbox add column if not exists output jsonb;
alter table workq.inbox add column if not exists output jsonb;
alter table workq.timers add column if not exists output jsonb;

create table workq.workflows (
    id                  bigint generated always as identity primary key,
    name                text not null check (length(name) between 1 and 256),
    status              smallint not null default 0 check (status in (0, 2, 3, 4)),
    tasks               integer not null default 0,
    done                integer not null default 0,
    failed              integer not null default 0,
    cancelled           integer not null default 0,
    metadata            jsonb,
    cancel_requested_at timestamptz,
    created_at          timestamptz not null default now(),
    finished_at         timestamptz
);
-- retention: finished workflows oldest first
create index workflows_finished on workq.workflows (finished_at) where status <> 0;

create table workq.workflow_tasks (
    job_id        bigint primary key,
    workflow_id   bigint not null,
    name          text not null check (length(name) between 1 and 256),
    deps          integer not null default 0,
    deps_left     integer not null default 0,
    deps_failed   integer not null default 0,
    dep_cancelled boolean not null default false,
    constraint workflow_tasks_name unique (workflow_id, name)
);

create table workq.workflow_deps (
    dep_id      bigint not null,
    task_id     bigint not null,
    workflow_id bigint not null,
    any_outcome boolean not null default false,
    primary key (dep_id, task_id)
);
create index workflow_deps_task on workq.workflow_deps (task_id);

-- workq_workflow_id(row) is a work row's workflow, for the shared lease
-- statements (db/queries/lease.sql), which are written once for every
-- table: job runs have one, the other tables never. A one-line SQL
-- function, inlined by the planner into the column itself or a constant
-- null: it costs the statements nothing.
create function workq.workq_workflow_id(r workq.job_runs) returns bigint
language sql immutable parallel safe as 'select r.workflow_id';
create function workq.workq_workflow_id(r workq.outbox) returns bigint
language sql immutable parallel safe as 'select null::bigint';
create function workq.workq_workflow_id(r workq.inbox) returns bigint
language sql immutable parallel safe as 'select null::bigint';
create function workq.workq_workflow_id(r workq.timers) returns bigint
language sql immutable parallel safe as 'select null::bigint';
-- workq_awaited(row) likewise: whether somebody waits for the row's end
-- (Client.Wait sets job_runs.awaited).
create function workq.workq_awaited(r workq.job_runs) returns boolean
language sql immutable parallel safe as 'select r.awaited';
create function workq.workq_awaited(r workq.outbox) returns boolean
language sql immutable parallel safe as 'select null::boolean';
create function workq.workq_awaited(r workq.inbox) returns boolean
language sql immutable parallel safe as 'select null::boolean';
create function workq.workq_awaited(r workq.timers) returns boolean
language sql immutable parallel safe as 'select null::boolean';

-- workq_workflows_ended(ids, workflows, statuses): the tasks ids (of
-- workflows, in the same order) ended in statuses, by the completion or
-- reap statement that calls it (LeaseComplete, LeaseReapExpired: an
-- attempt in progress ended). The same decisions as workq_workflow_moved,
-- one statement per step for the whole batch instead of two updates per
-- task: it locks the workflows in id order, counts the tasks on each (one
-- update per workflow, ending those whose tasks have all ended), the
-- dependencies on each dependent (one update per dependent), releases the
-- dependents whose dependencies have all ended well (one update, one
-- NOTIFY per queue) and cancels those with a failed dependency on a
-- cancelling edge (one update; the row trigger moves each of those in
-- turn: its counts, its own dependents, its waiter). A fan-in of 10,000
-- tasks ended in batches of a few hundred updates its final task's counts
-- once per batch, not 10,000 times (which also made each update walk an
-- ever longer chain of the row's versions). The calling statement's own
-- rows are in progress and its dependents pending: none of the rows it
-- updates is one the statement updated.
-- +goose StatementBegin
create function workq.workq_workflows_ended(p_ids bigint[], p_workflows bigint[], p_statuses smallint[])
returns integer
language plpgsql volatile
as $$
declare
    v_rel bigint[];
    v_bad bigint[];
    v_bad_dep bigint[];
    v_bad_status smallint[];
    v_queues text[];
    v_ended bigint[];
begin
    if coalesce(cardinality(p_ids), 0) = 0 then
        return 0;
    end if;
    if not (p_workflows[1] = all(p_workflows)) then
        -- several workflows: their locks in id order (the counting
        -- update below would take them in its own order)
        perform 1 from workq.workflows x where x.id = any(p_workflows) order by x.id for no key update;
    end if;
    -- count the tasks on each workflow, ending those whose tasks have all
    -- ended (one statement)
    with m as (select unnest(p_workflows) as wf, unnest(p_statuses) as st),
    c as (
        select m.wf, count(*) filter (where m.st = 2) as d, count(*) filter (where m.st = 3) as f,
               count(*) filter (where m.st = 4) as x
        from m group by m.wf
    ),
    u as (
        update workq.workflows x set done = x.done + c.d, failed = x.failed + c.f, cancelled = x.cancelled + c.x,
            status = case when x.status = 0 and x.done + c.d + x.failed + c.f + x.cancelled + c.x >= x.tasks
                          then case when x.cancel_requested_at is not null then 4
                                    when x.failed + c.f + x.cancelled + c.x > 0 then 3 else 2 end
                          else x.status end,
            finished_at = case when x.status = 0 and x.done + c.d + x.failed + c.f + x.cancelled + c.x >= x.tasks
                               then now() else x.finished_at end
        from c where x.id = c.wf
        returning x.id, (x.finished_at = now() and x.status <> 0) as ended
    )
    select array_agg(u.id) filter (where u.ended) into v_ended from u;
    if v_ended is not null then
        perform pg_notify('workq_done', 'w' || e) from unnest(v_ended) e;
    end if;
    with m as (select unnest(p_ids) as id, unnest(p_statuses) as st),
    e as (
        select d.task_id, count(*) as n,
               count(*) filter (where not (m.st = 2 or d.any_outcome)) as bad,
               (array_agg(d.dep_id order by d.dep_id) filter (where not (m.st = 2 or d.any_outcome)))[1] as bad_dep,
               (array_agg(m.st order by d.dep_id) filter (where not (m.st = 2 or d.any_outcome)))[1] as bad_st
        from m join workq.workflow_deps d on d.dep_id = m.id
        group by d.task_id
    ),
    k as (
        update workq.workflow_tasks k set deps_left = k.deps_left - e.n, deps_failed = k.deps_failed + e.bad
        from e where k.job_id = e.task_id
        returning k.job_id, k.deps_left, k.deps_failed, e.bad, e.bad_dep, e.bad_st
    )
    select array_agg(k.job_id order by k.job_id) filter (where k.deps_left <= 0 and k.deps_failed <= 0),
           array_agg(k.job_id order by k.job_id) filter (where k.bad > 0),
           array_agg(k.bad_dep order by k.job_id) filter (where k.bad > 0),
           array_agg(k.bad_st order by k.job_id) filter (where k.bad > 0)
    into v_rel, v_bad, v_bad_dep, v_bad_status
    from k;
    if v_rel is not null then
        with r as (
            update workq.job_runs j set status = 0, run_at = greatest(j.run_at, now()), updated_at = now()
            where j.id = any(v_rel) and j.status = -1
            returning j.queue
        )
        select array_agg(distinct r.queue) into v_queues from r;
        perform pg_notify('workq_job_runs', q) from unnest(v_queues) q;
    end if;
    if v_bad is not null then
        -- the row trigger moves each cancelled dependent in turn
        with x as (
            select b.task, b.dep, b.st, k.name
            from unnest(v_bad, v_bad_dep, v_bad_status) b(task, dep, st)
            left join workq.workflow_tasks k on k.job_id = b.dep
        ),
        c as (
            update workq.job_runs j set status = 4, finished_at = now(), updated_at = now(),
                last_error = format('dependency %s %s', coalesce(x.name, x.dep::text),
                                    case x.st when 3 then 'failed' else 'was cancelled' end)
            from x where j.id = x.task and j.status = -1
            returning j.id
        )
        update workq.workflow_tasks set dep_cancelled = true where job_id = any(array(select c.id from c));
    end if;
    return cardinality(p_ids);
end
$$;
-- +goose StatementEnd

-- workq_workflow_moved: task p_task of p_workflow entered (p_sign 1) or
-- left (p_sign -1, a revive) the final status p_status. It counts it on the
-- workflow (which ends when every task has ended, and notifies
-- '<schema>_done' with 'w<id>'), and on each dependent: a dependent whose
-- dependencies have all ended well is released (pending -> ready, with a
-- NOTIFY of its queue as an enqueue sends), one with a dependency that
-- failed on a cancelling edge is cancelled, and that cancel is moved in
-- turn. Leaving undoes the counts and brings back to pending the
-- dependents it had cancelled, and theirs. The cascade is a work list, not
-- a recursion through the trigger (whose WHEN holds for top-level
-- statements only): a chain of a thousand tasks would exhaust the stack.
-- +goose StatementBegin
create function workq.workq_workflow_moved(p_workflow bigint, p_task bigint, p_status smallint, p_sign integer)
returns void
language plpgsql volatile
as $$
declare
    w record;
    e record;
    t record;
    v_ok boolean;
    v_queue text;
    v_awaited boolean;
    v_name text;
    v_tasks bigint[] := array[p_task];
    v_statuses smallint[] := array[p_status];
    v_signs integer[] := array[p_sign];
    v_task bigint;
    v_status smallint;
    v_sign integer;
    i integer := 1;
    -- the counts to add to the workflow, once, at the end
    v_done integer := 0;
    v_failed integer := 0;
    v_cancelled integer := 0;
    v_left boolean := false;
begin
    -- The workflow's lock first: every change to its tasks' counts is
    -- serialised by it (the statements after it see the latest ones).
    select x.status into w from workq.workflows x where x.id = p_workflow for no key update;
    if not found then
        return; -- deleted with its tasks (retention)
    end if;
    while i <= cardinality(v_tasks) loop
        v_task := v_tasks[i];
        v_status := v_statuses[i];
        v_sign := v_signs[i];
        i := i + 1;
        v_done := v_done + v_sign * (v_status = 2)::integer;
        v_failed := v_failed + v_sign * (v_status = 3)::integer;
        v_cancelled := v_cancelled + v_sign * (v_status = 4)::integer;
        v_left := v_left or v_sign < 0;
        if v_sign < 0 then
            -- A task revived (or brought back) before its dependencies have
            -- ended again waits for them: pending, not ready. (Its
            -- dependencies revived by the same statement may count before
            -- or after it; the dependents' branch below covers the other
            -- order.)
            update workq.job_runs j set status = -1, updated_at = now()
            from workq.workflow_tasks k
            where j.id = v_task and j.status = 0 and k.job_id = j.id and k.deps_left > 0 and k.deps_failed <= 0;
        end if;
        v_name := null;
        for e in select d.task_id, d.any_outcome from workq.workflow_deps d where d.dep_id = v_task order by d.task_id loop
            v_ok := v_status = 2 or e.any_outcome;
            update workq.workflow_tasks set
                deps_left = deps_left - v_sign,
                deps_failed = deps_failed + case when v_ok then 0 else v_sign end
            where job_id = e.task_id
            returning deps_left, deps_failed, dep_cancelled into t;
            continue when not found;
            if v_sign > 0 and not v_ok then
                if v_name is null then
                    select name into v_name from workq.workflow_tasks where job_id = v_task;
                end if;
                update workq.job_runs set status = 4, finished_at = now(), updated_at = now(),
                    last_error = format('dependency %s %s', coalesce(v_name, v_task::text),
                                        case v_status when 3 then 'failed' else 'was cancelled' end)
                where id = e.task_id and status = -1
                returning awaited into v_awaited;
                if found then
                    update workq.workflow_tasks set dep_cancelled = true where job_id = e.task_id;
                    v_tasks := v_tasks || e.task_id;
                    v_statuses := v_statuses || 4::smallint;
                    v_signs := v_signs || 1;
                    if v_awaited then
                        perform pg_notify('workq_done', 'j' || e.task_id);
                    end if;
                end if;
            elsif v_sign > 0 and t.deps_left <= 0 and t.deps_failed <= 0 then
                update workq.job_runs set status = 0, run_at = greatest(run_at, now()), updated_at = now()
                where id = e.task_id and status = -1
                returning queue into v_queue;
                if found then
                    perform pg_notify('workq_job_runs', v_queue);
                end if;
            elsif v_sign < 0 and t.dep_cancelled and t.deps_failed <= 0 then
                update workq.workflow_tasks set dep_cancelled = false where job_id = e.task_id;
                update workq.job_runs set status = -1, finished_at = null, last_error = null, updated_at = now()
                where id = e.task_id and status = 4;
                if found then
                    v_tasks := v_tasks || e.task_id;
                    v_statuses := v_statuses || 4::smallint;
                    v_signs := v_signs || -1;
                end if;
            elsif v_sign < 0 and t.deps_left > 0 and t.deps_failed <= 0 then
                -- a dependent released (or revived) but not started waits
                -- again for this dependency
                update workq.job_runs set status = -1, updated_at = now()
                where id = e.task_id and status = 0;
            end if;
        end loop;
    end loop;
    -- One update of the workflow for the whole cascade (once per task, a
    -- chain of thousands made the row's versions ever longer to walk): it
    -- ends when every task has ended, and runs again when one left.
    with u as (
        update workq.workflows x set
            done = x.done + v_done, failed = x.failed + v_failed, cancelled = x.cancelled + v_cancelled,
            status = case
                when v_left and x.status <> 0 then 0
                when x.status = 0 and x.done + v_done + x.failed + v_failed + x.cancelled + v_cancelled >= x.tasks then
                    case when x.cancel_requested_at is not null then 4
                         when x.failed + v_failed + x.cancelled + v_cancelled > 0 then 3 else 2 end
                else x.status end,
            finished_at = case
                when v_left and x.status <> 0 then null
                when x.status = 0 and x.done + v_done + x.failed + v_failed + x.cancelled + v_cancelled >= x.tasks then now()
                else x.finished_at end
        where x.id = p_workflow
        returning x.status
    )
    select u.status into v_status from u;
    if w.status = 0 and v_status <> 0 then
        perform pg_notify('workq_done', 'w' || p_workflow);
    end if;
end
$$;
-- +goose StatementEnd

-- +goose StatementBegin
create function workq.workq_workflow_on_status()
returns trigger
language plpgsql volatile
as $$
begin
    if new.workflow_id is not null then
        if new.status >= 2 then
            perform workq.workq_workflow_moved(new.workflow_id, new.id, new.status, 1);
        else
            perform workq.workq_workflow_moved(new.workflow_id, new.id, old.status, -1);
        end if;
    end if;
    if new.status >= 2 and new.awaited then
        perform pg_notify('workq_done', 'j' || new.id);
    end if;
    return null;
end
$$;
-- +goose StatementEnd

-- Fires only for a workflow's task or an awaited job that enters or leaves
-- a final status: PostgreSQL evaluates WHEN without calling the function,
-- so every other job queues no trigger event, and heartbeats (which do not
-- set status) are not considered at all. Not for an attempt in progress
-- that ends (old.owner_token set): the statements that end those,
-- LeaseComplete and LeaseReapExpired, call workq_workflows_ended for their
-- whole batch. Not for the updates the function itself makes
-- (pg_trigger_depth): it walks its cascade itself.
create trigger job_runs_workflow after update of status on workq.job_runs
    for each row when ((new.workflow_id is not null or new.awaited) and (new.status >= 2) <> (old.status >= 2)
                       and old.owner_token is null and pg_trigger_depth() = 0)
    execute function workq.workq_workflow_on_status();

-- A task deleted before it ended counts as cancelled (its dependents and
-- its workflow would otherwise wait for it forever); its own rows go with it.
-- +goose StatementBegin
create function workq.workq_workflow_on_delete()
returns trigger
language plpgsql volatile
as $$
begin
    if old.status < 2 then
        perform workq.workq_workflow_moved(old.workflow_id, old.id, 4::smallint, 1);
    end if;
    delete from workq.workflow_deps where dep_id = old.id;
    delete from workq.workflow_tasks where job_id = old.id;
    return null;
end
$$;
-- +goose StatementEnd

create trigger job_runs_workflow_delete after delete on workq.job_runs
    for each row when (old.workflow_id is not null and pg_trigger_depth() = 0)
    execute function workq.workq_workflow_on_delete();

-- workq_workflow_attach(workflow, ids): the tasks ids (job runs already
-- written with the workflow's id, pending when they have dependencies) and
-- their rows in workflow_tasks and workflow_deps (written by the same
-- caller, deps_left = their dependency count) join the workflow. Under the
-- workflow's lock it counts them, and sets each pending one's counts from
-- the dependencies that have already ended (a task added to a running
-- workflow may depend on finished tasks): released at once when all ended
-- well, cancelled when one failed on a cancelling edge. Refuses a
-- workflow that does not exist (WQW01), has ended or is being cancelled
-- (WQW02).
-- +goose StatementBegin
create function workq.workq_workflow_attach(p_workflow bigint, p_ids bigint[])
returns integer
language plpgsql volatile
as $$
declare
    w record;
    t record;
    v_queue text;
begin
    select * into w from workq.workflows where id = p_workflow for no key update;
    if not found then
        raise exception 'workflow % does not exist', p_workflow using errcode = 'WQW01';
    end if;
    if w.status <> 0 or w.cancel_requested_at is not null then
        raise exception 'workflow % has ended or is cancelled', p_workflow using errcode = 'WQW02';
    end if;
    update workq.workflows set tasks = tasks + cardinality(p_ids) where id = p_workflow;
    -- dependencies that have already ended (only an addition has any)
    for t in
        select d.task_id,
               count(*) filter (where j.status = 2 or (j.status >= 2 and d.any_outcome)) as ok,
               count(*) filter (where j.status >= 3 and not d.any_outcome) as bad
        from workq.workflow_deps d join workq.job_runs j on j.id = d.dep_id
        where d.task_id = any(p_ids) and j.status >= 2
        group by d.task_id
        order by d.task_id
    loop
        update workq.workflow_tasks set deps_left = deps_left - t.ok - t.bad, deps_failed = deps_failed + t.bad
        where job_id = t.task_id;
    end loop;
    for t in
        select k.job_id, k.deps_left, k.deps_failed from workq.workflow_tasks k
        where k.job_id = any(p_ids) and (k.deps_failed > 0 or k.deps_left <= 0) and k.deps > 0
        order by k.job_id
    loop
        if t.deps_failed > 0 then
            update workq.workflow_tasks set dep_cancelled = true where job_id = t.job_id;
            update workq.job_runs set status = 4, finished_at = now(), updated_at = now(),
                last_error = 'a dependency failed or was cancelled before this task was added'
            where id = t.job_id and status = -1;
        else
            update workq.job_runs set status = 0, run_at = greatest(run_at, now()), updated_at = now()
            where id = t.job_id and status = -1
            returning queue into v_queue;
            if found then
                perform pg_notify('workq_job_runs', v_queue);
            end if;
        end if;
    end loop;
    return cardinality(p_ids);
end
$$;
-- +goose StatementEnd

-- +goose Down
drop function workq.workq_workflow_attach(bigint, bigint[]);
drop trigger job_runs_workflow_delete on workq.job_runs;
drop function workq.workq_workflow_on_delete();
drop trigger job_runs_workflow on workq.job_runs;
drop function workq.workq_workflow_on_status();
drop function workq.workq_workflow_moved(bigint, bigint, smallint, integer);
drop function workq.workq_workflow_id(workq.job_runs);
drop function workq.workq_workflow_id(workq.outbox);
drop function workq.workq_workflow_id(workq.inbox);
drop function workq.workq_workflow_id(workq.timers);
drop function workq.workq_awaited(workq.job_runs);
drop function workq.workq_awaited(workq.outbox);
drop function workq.workq_awaited(workq.inbox);
drop function workq.workq_awaited(workq.timers);
drop function workq.workq_workflows_ended(bigint[], bigint[], smallint[]);
drop table workq.workflow_deps;
drop table workq.workflow_tasks;
drop table workq.workflows;
alter table workq.timers drop column if exists output;
alter table workq.inbox drop column if exists output;
alter table workq.outbox drop column if exists output;

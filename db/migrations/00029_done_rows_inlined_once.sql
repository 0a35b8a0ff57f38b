-- The done row as a set-returning function, inlined once (issue 32;
-- docs/design.md §4.2a).
--
-- LeaseComplete inserted (workq_done_row(row, output)).* into the done
-- table. PostgreSQL expands (f(x)).* into one field selection per column,
-- so planning inlined workq_done_row once per column, 29 times for job
-- runs, parsing and analysing its body each time: about 40% of the time
-- it took to plan the statement, which PostgreSQL does for each of a
-- connection's first five executions (docs/throughput.md, "Planning and
-- the completion's shape"). A set-returning SQL function in FROM is
-- inlined once, as a subquery that the planner pulls up into the
-- statement: the same plan, the same column expressions at execution,
-- planned in about a third of the time.
--
-- A migration that adds a column to job_runs writes this function and
-- workq_done_row again: TestCompleteMovesDoneJobRuns fails until this one
-- is, TestDoneRowFunctionsAgree until the two make the same row.
-- workq_done_row stays for the statements of the previous release during
-- a rolling upgrade; a later migration drops it.
--
-- +goose Up
create function workq.workq_done_rows(r workq.job_runs, p_output jsonb) returns setof workq.job_runs
language sql stable parallel safe as
$$select r.id, r.queue, r.kind, r.payload, r.dedup_key, r.schedule_id, r.scheduled_time, 2::smallint, r.priority, r.run_at,
         null::uuid, null::timestamptz, r.lease_version, r.attempts, r.max_attempts, r.claimed_at, r.claimed_by, r.last_error,
         r.created_at, now(), now(), r.metadata, r.cancel_requested_at, r.unique_key, r.unique_states, r.limit_key,
         r.workflow_id, r.awaited, coalesce(p_output, r.output)$$;
-- The other tables' rows stay in place (workq_keeps_done): never called.
create function workq.workq_done_rows(r workq.outbox, p_output jsonb) returns setof workq.outbox
language sql stable parallel safe as
$$select * from jsonb_populate_record(r, jsonb_build_object('status', 2, 'owner_token', null, 'locked_until', null,
    'finished_at', now(), 'updated_at', now(), 'output', coalesce(p_output, r.output)))$$;
create function workq.workq_done_rows(r workq.inbox, p_output jsonb) returns setof workq.inbox
language sql stable parallel safe as
$$select * from jsonb_populate_record(r, jsonb_build_object('status', 2, 'owner_token', null, 'locked_until', null,
    'finished_at', now(), 'updated_at', now(), 'output', coalesce(p_output, r.output)))$$;
create function workq.workq_done_rows(r workq.timers, p_output jsonb) returns setof workq.timers
language sql stable parallel safe as
$$select * from jsonb_populate_record(r, jsonb_build_object('status', 2, 'owner_token', null, 'locked_until', null,
    'finished_at', now(), 'updated_at', now(), 'output', coalesce(p_output, r.output)))$$;

-- +goose Down
drop function workq.workq_done_rows(workq.job_runs, jsonb);
drop function workq.workq_done_rows(workq.outbox, jsonb);
drop function workq.workq_done_rows(workq.inbox, jsonb);
drop function workq.workq_done_rows(workq.timers, jsonb);

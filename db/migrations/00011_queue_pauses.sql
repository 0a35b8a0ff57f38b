-- Pausing a queue: no worker of any process claims from a paused (table,
-- queue); items in flight finish, heartbeats and completions go on. A pause
-- is a row of its own, apart from the queue's limit W, so pausing keeps the
-- limit and resuming restores it. workq_claim_budget (called by every
-- claim) returns 0 for a paused queue: one primary-key probe per claim.

-- +goose Up
create table workq.queue_pauses (
    work_table text not null check (workq.workq_table_code(work_table) >= 0), -- unknown names raise
    queue      workq.workq_name not null,
    paused_at  timestamptz not null default now(),
    paused_by  text not null check (length(paused_by) between 1 and 256),
    reason     text check (length(reason) <= 1024),
    primary key (work_table, queue)
);

-- +goose StatementBegin
create or replace function workq.workq_claim_budget(p_table text, p_queue text, p_want integer)
returns integer
language plpgsql volatile
as $$
declare
    v_limit  integer;
    v_active integer;
begin
    if exists (select 1 from workq.queue_pauses where work_table = p_table and queue = p_queue) then
        return 0;
    end if;
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
-- +goose StatementBegin
create or replace function workq.workq_claim_budget(p_table text, p_queue text, p_want integer)
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
drop table workq.queue_pauses;

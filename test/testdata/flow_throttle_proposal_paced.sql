-- flow_throttle_proposal.sql plus a gentler decrease, a slower growth and
-- paced starts
-- (docs/notes-hd.md, "Adaptive"), as flow_throttle_proposal.sql: run on a
-- measurement's database with WORKQ_MEASURE_SQL (test/flow_measure_test.go)
-- to compare it with migration 00024's. Changes, marked "proposal":
--   1. The rate observed at a lowering is the scope's starts in the last
--      second, for the queue too (its rows claimed in the last second), not
--      its completions archived in the last second: at the first 429 of a
--      burst the successes' completions are often not flushed yet, so the
--      archive says 0 and the rate collapsed to 1/s.
--   2. The first lowering halves the starts of the last second; a later
--      one (the scope adapting) takes min(0.8 x the adapted rate, starts).
--   3. The step is recomputed at every lowering: a twentieth of the new
--      rate at the first, a hundredth at a later one (at least 0.5/s), so
--      that near the rate that was throttled the rate grows slowly and a
--      Retry-After pause of the whole scope comes seldom.
--   4. workq_flow_left paces an adapting scope: at most a tenth of its
--      rate (at least 1) in any 100 ms.
-- The adaptation still ends once the rate grows back to 10 times the
-- first lowered rate (unchanged).
create or replace function workq.workq_flow_throttle(p_table text, p_queue text, p_kind text, p_key text, p_retry_ms bigint)
returns timestamptz
language plpgsql volatile
as $$
declare
    v_st    workq.flow_state%rowtype;
    v_until timestamptz := now() + greatest(p_retry_ms, 0) * interval '1 millisecond';
    v_obs   double precision;
    v_cur   double precision;
    v_rate  double precision;
begin
    insert into workq.flow_queues (work_table, queue, auto) values (p_table, p_queue, true)
    on conflict (work_table, queue) do nothing;
    insert into workq.flow_state (work_table, queue, kind, key) values (p_table, p_queue, p_kind, p_key)
    on conflict (work_table, queue, kind, key) do nothing;
    select * into v_st from workq.flow_state
    where work_table = p_table and queue = p_queue and kind = p_kind and key = p_key
    for update;
    if v_st.throttled_until > now() or v_st.adapt_at > now() - interval '1 second' then
        update workq.flow_state set throttled_until = greatest(coalesce(throttled_until, v_until), v_until), updated_at = now()
        where work_table = p_table and queue = p_queue and kind = p_kind and key = p_key;
        return greatest(coalesce(v_st.throttled_until, v_until), v_until);
    end if;
    select sum(u.n) into v_obs from unnest(v_st.log_at, v_st.log_n) u(at, n) where u.at > now() - interval '1 second';
    if p_kind = '' and p_key = '' then
        -- proposal 1: the queue's starts in the last second (claimed_at
        -- stays on a row after its attempt ends)
        execute format('select count(*) from workq.%I where queue = $1 and claimed_at > now() - interval ''1 second''', p_table)
        into v_obs using p_queue;
    end if;
    v_cur := workq.workq_flow_rate(v_st);
    -- proposal 2
    -- proposal 2, gentler once adapting: the first lowering halves the
    -- starts of the last second, a later one takes 0.8 of the adapted rate
    v_rate := greatest(1, case when v_cur is null then coalesce(nullif(v_obs, 0), 2) / 2
                               else least(v_cur * 0.8, coalesce(nullif(v_obs, 0), v_cur)) end);
    update workq.flow_state set
        throttled_until = v_until,
        adapt_rate = v_rate,
        adapt_at = now(),
        adapt_step = case when v_cur is null then greatest(v_rate / 20, 0.5) else greatest(v_rate / 100, 0.5) end, -- proposal 3
        adapt_end = case when v_cur is null then greatest(v_rate * 10, 10) else adapt_end end,
        updated_at = now()
    where work_table = p_table and queue = p_queue and kind = p_kind and key = p_key;
    return v_until;
end
$$;

create or replace function workq.workq_flow_left(p_table text, p_queue text, p_kind text, p_key text)
returns integer
language plpgsql volatile
as $$
declare
    v_rule workq.flow_limits%rowtype;
    v_st   workq.flow_state%rowtype;
    v_left integer;
    v_n    bigint;
    v_rate double precision;
begin
    select * into v_rule from workq.flow_limits
    where work_table = p_table and queue = p_queue and kind = p_kind and per_key = (p_key <> '');
    select * into v_st from workq.flow_state
    where work_table = p_table and queue = p_queue and kind = p_kind and key = p_key;
    if v_st.throttled_until > now() then
        return 0;
    end if;
    if v_rule.rate is not null then
        -- every start after the window's start, also those of claims whose
        -- transactions began after this one's (now() is the transaction's
        -- start): a window of period that holds now() never has more.
        select coalesce(sum(u.n), 0) into v_n
        from unnest(v_st.log_at, v_st.log_n) u(at, n)
        where u.at > now() - v_rule.period_ms * interval '1 millisecond';
        v_left := greatest(0, v_rule.rate - v_n);
    end if;
    v_rate := workq.workq_flow_rate(v_st);
    if v_rate is not null then
        select coalesce(sum(u.n), 0) into v_n
        from unnest(v_st.log_at, v_st.log_n) u(at, n)
        where u.at > now() - interval '1 second';
        v_left := least(coalesce(v_left, 2147483647), greatest(0, floor(v_rate)::bigint - v_n));
        -- proposal 4: paced, at most a tenth of the adapted rate (at least
        -- 1) in any 100 ms, so the starts are spread over the second and a
        -- receiver's own window sees the adapted rate, not blocks of it
        select coalesce(sum(u.n), 0) into v_n
        from unnest(v_st.log_at, v_st.log_n) u(at, n)
        where u.at > now() - interval '100 milliseconds';
        v_left := least(v_left, greatest(0, ceil(v_rate / 10)::bigint - v_n));
    end if;
    if v_rule.concurrency is not null then
        -- Every item in progress, also one whose lease expired and is not
        -- reaped yet: "one at a time" holds while its handler may still run.
        if p_key <> '' then
            select count(*) into v_n from workq.job_runs
            where queue = p_queue and status = 1 and limit_key = p_key;
        else
            execute format('select count(*) from workq.%I where queue = $1 and status = 1 %s', p_table,
                           case when p_kind <> '' then format('and %I = $2', workq.workq_flow_kind_column(p_table)) else '' end)
            into v_n
            using p_queue, p_kind;
        end if;
        v_left := least(coalesce(v_left, 2147483647), greatest(0, v_rule.concurrency - v_n));
    end if;
    return v_left;
end
$$;


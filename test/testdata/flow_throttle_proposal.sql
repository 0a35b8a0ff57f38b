-- A proposed workq_flow_throttle (docs/notes-hd.md, "Adaptive"): run on a
-- measurement's database with WORKQ_MEASURE_SQL (test/flow_measure_test.go)
-- to compare it with migration 00024's. Changes, marked "proposal":
--   1. The rate observed at a lowering is the scope's starts in the last
--      second, for the queue too (its rows claimed in the last second), not
--      its completions archived in the last second: at the first 429 of a
--      burst the successes' completions are often not flushed yet, so the
--      archive says 0 and the rate collapsed to 1/s.
--   2. Each lowering halves min(adapted rate, starts in the last second).
--   3. The step is recomputed at every lowering (a twentieth of the new
--      rate, at least 0.5/s), not kept from the first: the growth back is
--      proportional to where the rate settled.
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
    v_rate := greatest(1, least(coalesce(v_cur, 'infinity'), coalesce(nullif(v_obs, 0), v_cur, 1)) / 2);
    update workq.flow_state set
        throttled_until = v_until,
        adapt_rate = v_rate,
        adapt_at = now(),
        adapt_step = greatest(v_rate / 20, 0.5), -- proposal 3
        adapt_end = case when v_cur is null then greatest(v_rate * 10, 10) else adapt_end end,
        updated_at = now()
    where work_table = p_table and queue = p_queue and kind = p_kind and key = p_key;
    return v_until;
end
$$;

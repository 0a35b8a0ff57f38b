-- Flow control (issue 30): rate limits, concurrency per kind and per key,
-- fair claims over keys, pause per kind and limits that adapt to a
-- throttling service downstream; docs/concepts.md ("Flow control") has
-- the semantics and docs/design.md the reasoning.
--
-- flow_queues: one row per (table, queue) under flow control. Its
--     presence is what sends a queue's claims down the flow path:
--     workq_claim_budget returns 0 for such a queue, so the fast claim
--     statements never take its rows, and the runtime claims through
--     workq_flow_pick (job runs, inbox, timers) or workq_flow_grant (the
--     outbox) instead, which lock this row: the flow claims of one queue
--     take turns, as claims of a queue with a limit W already do. fair:
--     claims take keys in turn. auto: made by a throttle alone, removed
--     when the adaptation ends.
-- flow_limits: the rules. (kind '', per_key false) is the queue's own;
--     (kind k, false) a kind's (the outbox's and timers' topic, the
--     inbox's source); (kind '', per_key true) every limit key's, each
--     counted apart. rate: at most rate starts in any window of period_ms
--     (sliding, not aligned); concurrency: at most that many in progress.
-- flow_kind_pauses: a kind paused within its queue.
-- flow_state: per scope (the queue: kind '' and key ''; a kind; a key)
--     the log of its recent starts (times and counts, the window the
--     longest rate needs and at least a second) and its throttle and
--     adaptation.

-- +goose Up
create table workq.flow_queues (
    work_table text not null check (workq.workq_table_code(work_table) >= 0), -- unknown names raise
    queue      workq.workq_name not null,
    fair       boolean not null default false,
    auto       boolean not null default false,
    -- Where a keyed claim's scan for jobs without a key stopped (claim
    -- order; null: from the head), so that it goes on from there.
    keyless_priority smallint,
    keyless_run_at   timestamptz,
    keyless_id       bigint,
    updated_at timestamptz not null default now(),
    primary key (work_table, queue)
);

create table workq.flow_limits (
    work_table  text not null,
    queue       workq.workq_name not null,
    kind        text not null default '' check (length(kind) <= 256),
    per_key     boolean not null default false,
    rate        integer check (rate > 0),
    period_ms   bigint not null default 1000 check (period_ms between 1 and 86400000),
    concurrency integer check (concurrency >= 0),
    updated_at  timestamptz not null default now(),
    primary key (work_table, queue, kind, per_key),
    foreign key (work_table, queue) references workq.flow_queues (work_table, queue) on delete cascade,
    check (rate is not null or concurrency is not null),
    check (not (per_key and kind <> ''))
);

create table workq.flow_kind_pauses (
    work_table text not null,
    queue      workq.workq_name not null,
    kind       text not null check (length(kind) between 1 and 256),
    paused_at  timestamptz not null default now(),
    paused_by  text not null check (length(paused_by) between 1 and 256),
    reason     text check (length(reason) <= 1024),
    primary key (work_table, queue, kind),
    foreign key (work_table, queue) references workq.flow_queues (work_table, queue) on delete cascade
);

create table workq.flow_state (
    work_table      text not null,
    queue           workq.workq_name not null,
    kind            text not null default '',
    key             text not null default '',
    log_at          timestamptz[] not null default '{}',
    log_n           integer[] not null default '{}',
    throttled_until timestamptz,
    adapt_rate      double precision, -- starts per second while adapting (null: not adapting)
    adapt_step      double precision, -- added to it per second since adapt_at
    adapt_at        timestamptz,      -- when adapt_rate was last lowered
    adapt_end       double precision, -- the adaptation ends when the rate grows back to this
    updated_at      timestamptz not null default now(),
    primary key (work_table, queue, kind, key),
    foreign key (work_table, queue) references workq.flow_queues (work_table, queue) on delete cascade
);

-- workq_queue_budget: what workq_claim_budget returned before flow control
-- (the queue's pause and its limit W), for the flow path.
-- +goose StatementBegin
create function workq.workq_queue_budget(p_table text, p_queue text, p_want integer)
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

-- workq_claim_budget: 0 for a queue under flow control (its claims go
-- through workq_flow_pick or workq_flow_grant), else as before. One more
-- primary-key probe per claim.
-- +goose StatementBegin
create or replace function workq.workq_claim_budget(p_table text, p_queue text, p_want integer)
returns integer
language plpgsql volatile
as $$
begin
    if exists (select 1 from workq.flow_queues where work_table = p_table and queue = p_queue) then
        return 0;
    end if;
    return workq.workq_queue_budget(p_table, p_queue, p_want);
end
$$;
-- +goose StatementEnd

-- workq_claim_budget with a grant: the outbox's claim inside a flow claim's
-- transaction, after workq_flow_grant granted p_grant rows (null: the fast
-- path, as the three-argument form).
-- +goose StatementBegin
create function workq.workq_claim_budget(p_table text, p_queue text, p_want integer, p_grant integer)
returns integer
language plpgsql volatile
as $$
begin
    if p_grant is null then
        return workq.workq_claim_budget(p_table, p_queue, p_want);
    end if;
    return greatest(0, least(p_want, p_grant));
end
$$;
-- +goose StatementEnd

-- workq_flow_kind_column: the column a table's per-kind limits count by.
-- +goose StatementBegin
create function workq.workq_flow_kind_column(p_table text)
returns text
language sql immutable
as $$
    select case p_table when 'job_runs' then 'kind' when 'inbox' then 'source' else 'topic' end
$$;
-- +goose StatementEnd

-- workq_flow_rate: the starts per second an adapting scope may make now
-- (null: not adapting, or grown back to where the adaptation ends).
-- +goose StatementBegin
create function workq.workq_flow_rate(s workq.flow_state)
returns double precision
language sql stable
as $$
    select case when s.adapt_rate is null then null
                when r >= s.adapt_end then null
                else r end
    from (select s.adapt_rate + coalesce(s.adapt_step, 0)
                 * greatest(0, floor(extract(epoch from now() - greatest(s.adapt_at, coalesce(s.throttled_until, s.adapt_at))))) as r) x
$$;
-- +goose StatementEnd

-- workq_flow_starts: a scope's starts in the last p_ms milliseconds.
-- +goose StatementBegin
create function workq.workq_flow_starts(s workq.flow_state, p_ms bigint)
returns bigint
language sql stable
as $$
    select coalesce(sum(u.n), 0)::bigint from unnest(s.log_at, s.log_n) u(at, n)
    where u.at > now() - p_ms * interval '1 millisecond'
$$;
-- +goose StatementEnd

-- workq_flow_left: how many starts the scope (p_kind, p_key) of a queue may
-- make now under its rule and its throttle (null: no limit). The flow
-- claim holds the queue's flow_queues row, so the counts are its alone.
-- +goose StatementBegin
create function workq.workq_flow_left(p_table text, p_queue text, p_kind text, p_key text)
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
        -- The adapted rate per second, paced: at most a tenth of it (at
        -- least one) in any 100 ms, so that the starts spread over the
        -- second and the service's own window sees the rate, not blocks.
        v_left := least(coalesce(v_left, 2147483647),
                        greatest(0, floor(v_rate)::bigint - workq.workq_flow_starts(v_st, 1000)),
                        greatest(0, ceil(v_rate / 10)::bigint - workq.workq_flow_starts(v_st, 100)));
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
-- +goose StatementEnd

-- workq_flow_wait_ms: how long until the queue's own scope may start
-- again when its rate or its throttle stops it now (0: it may; null: no
-- rate and no throttle), so that a claimer waits exactly that long.
-- +goose StatementBegin
create function workq.workq_flow_wait_ms(p_table text, p_queue text)
returns bigint
language plpgsql stable
as $$
declare
    v_rate   integer;
    v_period bigint;
    v_st     workq.flow_state%rowtype;
    v_wait   bigint;
    v_over   bigint;
begin
    select * into v_st from workq.flow_state where work_table = p_table and queue = p_queue and kind = '' and key = '';
    if v_st.throttled_until > now() then
        v_wait := ceil(extract(epoch from v_st.throttled_until - now()) * 1000);
    end if;
    select l.rate, l.period_ms into v_rate, v_period from workq.flow_limits l
    where l.work_table = p_table and l.queue = p_queue and l.kind = '' and not l.per_key and l.rate is not null;
    if v_rate is null then
        return v_wait;
    end if;
    v_over := workq.workq_flow_starts(v_st, v_period) - v_rate + 1;
    if v_over <= 0 then
        return coalesce(v_wait, 0);
    end if;
    -- the window has room again once the oldest v_over starts leave it
    return greatest(coalesce(v_wait, 0), (
        select ceil(extract(epoch from x.at + v_period * interval '1 millisecond' - now()) * 1000)::bigint
        from (select u.at, sum(u.n) over (order by u.at rows unbounded preceding) as c
              from unnest(v_st.log_at, v_st.log_n) u(at, n)
              where u.at > now() - v_period * interval '1 millisecond') x
        where x.c >= v_over
        order by x.at
        limit 1));
end
$$;
-- +goose StatementEnd

-- workq_flow_log: records p_n starts of a scope at p_at when the scope
-- counts starts (a rate rule, or adapting), keeping the window its rule
-- needs plus a second, and ends an adaptation that has grown back. The
-- second: claims take the queue's lock in an order that need not be their
-- transactions' start order, and a claim that began earlier counts back
-- from its earlier now(); trimming at the trimming claim's now() minus
-- the window alone could drop entries that claim still counts. p_at is the claim's
-- start time (claimed_at, started_at in the run archive): the flow pick's
-- clock after it counted, never before the now() the counts looked back
-- from, so a window that holds p_at never holds more than its rate
-- (workq_flow_left). The outbox's claim stamps each row with its own
-- clock: workq_flow_started logs the clock after it, no earlier than any
-- of them (never the transaction's now(), which precedes them).
-- +goose StatementBegin
create function workq.workq_flow_log(p_table text, p_queue text, p_kind text, p_key text, p_n integer, p_at timestamptz)
returns void
language plpgsql volatile
as $$
declare
    v_keep bigint;
begin
    select greatest(max(l.period_ms), 1000) into v_keep from workq.flow_limits l
    where l.work_table = p_table and l.queue = p_queue and l.kind = p_kind and l.per_key = (p_key <> '') and l.rate is not null;
    if v_keep is null then
        -- no rate rule: only an adapting scope counts its starts
        update workq.flow_state s set
            log_at = array(select u.at from unnest(s.log_at, s.log_n) u(at, n) where u.at > now() - interval '2 seconds' order by u.at) || p_at,
            log_n  = array(select u.n from unnest(s.log_at, s.log_n) u(at, n) where u.at > now() - interval '2 seconds' order by u.at) || p_n,
            adapt_rate = case when workq.workq_flow_rate(s) is null then null else s.adapt_rate end,
            updated_at = now()
        where s.work_table = p_table and s.queue = p_queue and s.kind = p_kind and s.key = p_key
          and (s.adapt_rate is not null or s.throttled_until > now() - interval '1 second');
        return;
    end if;
    insert into workq.flow_state as s (work_table, queue, kind, key, log_at, log_n)
    values (p_table, p_queue, p_kind, p_key, array[p_at], array[p_n])
    on conflict (work_table, queue, kind, key) do update set
        log_at = array(select u.at from unnest(s.log_at, s.log_n) u(at, n)
                       where u.at > now() - (v_keep + 1000) * interval '1 millisecond' order by u.at) || p_at,
        log_n  = array(select u.n from unnest(s.log_at, s.log_n) u(at, n)
                       where u.at > now() - (v_keep + 1000) * interval '1 millisecond' order by u.at) || p_n,
        adapt_rate = case when workq.workq_flow_rate(s) is null then null else s.adapt_rate end,
        updated_at = now();
end
$$;
-- +goose StatementEnd

-- workq_flow_ready: whether a queue has a due ready row that a claim did
-- not take (p_ids) and that is not of a paused kind: a claim that took
-- less than it could was then held back by a limit (or by rows another
-- claimer holds), and its claimer claims again soon rather than at its
-- next poll.
-- +goose StatementBegin
create function workq.workq_flow_ready(p_table text, p_queue text, p_ids bigint[], p_paused text[])
returns boolean
language plpgsql volatile
as $$
declare
    v boolean;
begin
    execute format('select exists (select 1 from workq.%I where queue = $1 and status = 0 and run_at <= now()
                      and not (id = any($2)) and not (%I = any($3)))', p_table, workq.workq_flow_kind_column(p_table))
    into v using p_queue, p_ids, p_paused;
    return v;
end
$$;
-- +goose StatementEnd

-- workq_flow_keyless: the due job runs without a limit key among the next
-- p_cap ready rows of a keyed queue in claim order, from where the
-- queue's last such scan stopped (flow_queues.keyless_*, which it moves on,
-- wrapping to the head when it reaches the end). Jobs without a key have
-- no index of their own (one would cost every queue, keyed or not), so a
-- keyed claim reads the main claim index a bounded stretch at a time: a
-- keyless job behind any backlog of keyed ones is found within
-- backlog / p_cap claims, and a claim never reads more than p_cap rows
-- for them. The caller holds the queue's flow_queues row.
-- +goose StatementBegin
create function workq.workq_flow_keyless(p_queue text, p_cap integer)
returns table (id bigint, kind text)
language plpgsql volatile
as $$
declare
    v_p  smallint;
    v_r  timestamptz;
    v_i  bigint;
    v_n  integer := 0;
    v_lp smallint;
    v_lr timestamptz;
    v_li bigint;
    c    record;
begin
    select q.keyless_priority, q.keyless_run_at, q.keyless_id into v_p, v_r, v_i
    from workq.flow_queues q where q.work_table = 'job_runs' and q.queue = p_queue;
    if v_p is null then
        v_p := 32767;
        v_r := '-infinity';
        v_i := 0;
    end if;
    for c in
        select s.id, s.kind, s.limit_key, s.priority, s.run_at from (
            (select j.id, j.kind::text as kind, j.limit_key, j.priority, j.run_at from workq.job_runs j
             where j.queue = p_queue and j.status = 0 and j.priority = v_p and (j.run_at, j.id) > (v_r, v_i)
             order by j.priority desc, j.run_at, j.id limit p_cap)
            union all
            (select j.id, j.kind::text, j.limit_key, j.priority, j.run_at from workq.job_runs j
             where j.queue = p_queue and j.status = 0 and j.priority < v_p
             order by j.priority desc, j.run_at, j.id limit p_cap)
        ) s
        order by s.priority desc, s.run_at, s.id
        limit p_cap
    loop
        v_n := v_n + 1;
        v_lp := c.priority;
        v_lr := c.run_at;
        v_li := c.id;
        if c.limit_key is null and c.run_at <= now() then
            id := c.id;
            kind := c.kind;
            return next;
        end if;
    end loop;
    if v_n < p_cap then
        -- the end: the next scan starts at the head
        v_lp := null;
        v_lr := null;
        v_li := null;
    end if;
    update workq.flow_queues q set keyless_priority = v_lp, keyless_run_at = v_lr, keyless_id = v_li
    where q.work_table = 'job_runs' and q.queue = p_queue;
end
$$;
-- +goose StatementEnd

-- workq_flow_pick: the flow claim of job runs, inbox messages and timers.
-- It locks the queue's flow_queues row (null: the queue is not under flow
-- control, claim on the fast path), takes the queue's pause and W into
-- account, then the queue's, each kind's and each key's rules and
-- throttles, picks and row-locks up to p_want ready due rows within them
-- (in claim order; with keys, walking them in turn from after p_after_key,
-- each key an equal share of the claim), logs their starts, and returns
-- {"ids": [...], "after": last key visited, "at": the claim's start
-- time, "limited": whether a limit cut it short, "wait_ms": when the
-- queue's own rate or throttle lets it start again}. The caller claims
-- exactly those ids in the same transaction, with claimed_at = at: they
-- are locked and ready, so every start logged here is a claim.
-- +goose StatementBegin
create function workq.workq_flow_pick(p_table text, p_queue text, p_want integer, p_after_key text)
returns jsonb
language plpgsql volatile
as $$
declare
    v_kcol     text := workq.workq_flow_kind_column(p_table);
    v_order    text := case p_table when 'job_runs' then 'priority desc, run_at, id' else 'run_at, id' end;
    v_fair     boolean;
    v_auto     boolean;
    v_budget   integer;
    v_left     integer;
    v_n        integer;
    v_blocked  text[] := '{}';
    v_kinds    jsonb := '{}';  -- kind -> starts it may still make (kinds with a limit)
    v_taken    jsonb := '{}';  -- kind -> starts picked
    v_keyed    boolean := false;
    v_keys     text[] := '{}';
    v_got      integer[] := '{}';
    v_room     integer[];
    v_want     integer[];
    v_krate    integer;
    v_kperiod  bigint;
    v_kconc    integer;
    v_quota    integer;
    v_key      text;
    v_last     text;
    v_end      boolean;
    v_ids      bigint[] := '{}';
    v_at       timestamptz;
    r          record;
begin
    select q.fair, q.auto into v_fair, v_auto from workq.flow_queues q
    where q.work_table = p_table and q.queue = p_queue
    for update;
    if not found then
        return null;
    end if;
    if v_auto and not v_fair
       and not exists (select 1 from workq.flow_limits l where l.work_table = p_table and l.queue = p_queue)
       and not exists (select 1 from workq.flow_kind_pauses p where p.work_table = p_table and p.queue = p_queue)
       and not exists (select 1 from workq.flow_state s where s.work_table = p_table and s.queue = p_queue
                       and (s.throttled_until > now() or workq.workq_flow_rate(s) is not null)) then
        -- A throttle alone put the queue under flow control, and it and its
        -- adaptation are over: back to the fast claim (the caller commits).
        delete from workq.flow_queues q where q.work_table = p_table and q.queue = p_queue;
        return jsonb_build_object('off', true);
    end if;
    v_budget := workq.workq_queue_budget(p_table, p_queue, p_want);
    v_left := least(v_budget, coalesce(workq.workq_flow_left(p_table, p_queue, '', ''), 2147483647));
    if v_left <= 0 then
        -- limited only when flow control (not the queue's pause or W) held
        -- ready work back: a claimer then claims again when it may
        return jsonb_build_object('ids', '[]'::jsonb, 'after', p_after_key,
                                  'limited', v_budget > 0 and workq.workq_flow_ready(p_table, p_queue, '{}', '{}'),
                                  'wait_ms', workq.workq_flow_wait_ms(p_table, p_queue));
    end if;

    -- Kinds: paused, throttled or out of starts are blocked; the others
    -- with a limit get what they may still start.
    for r in
        select k.kind from (
            select l.kind from workq.flow_limits l where l.work_table = p_table and l.queue = p_queue and l.kind <> ''
            union select s.kind from workq.flow_state s where s.work_table = p_table and s.queue = p_queue and s.kind <> '' and s.key = ''
        ) k
    loop
        v_n := workq.workq_flow_left(p_table, p_queue, r.kind, '');
        if v_n is null then
            continue;
        elsif v_n <= 0 then
            v_blocked := v_blocked || r.kind;
        else
            v_kinds := v_kinds || jsonb_build_object(r.kind, v_n);
        end if;
    end loop;
    v_blocked := v_blocked || array(select p.kind from workq.flow_kind_pauses p where p.work_table = p_table and p.queue = p_queue);

    v_keyed := p_table = 'job_runs' and (v_fair
        or exists (select 1 from workq.flow_limits l where l.work_table = p_table and l.queue = p_queue and l.per_key)
        or exists (select 1 from workq.flow_state s where s.work_table = p_table and s.queue = p_queue and s.key <> ''
                   and (s.throttled_until > now() or s.adapt_rate is not null)));

    if not v_keyed then
        -- In claim order, past blocked kinds; a kind that runs out of starts
        -- midway is passed over from then on (its rows stay locked until
        -- commit, a moment). The scan is bounded (a LIMIT, which also keeps
        -- the plan's estimate of a million-row backlog below
        -- jit_above_cost).
        for r in execute format(
            'select id, %I::text as kind from workq.%I where queue = $1 and status = 0 and run_at <= now()
               and not (%I = any($2)) order by %s limit $3 for update skip locked', v_kcol, p_table, v_kcol, v_order)
            using p_queue, v_blocked, 4 * p_want + 256
        loop
            if v_kinds ? r.kind then
                continue when (v_kinds ->> r.kind)::integer <= 0;
                v_kinds := jsonb_set(v_kinds, array[r.kind], to_jsonb((v_kinds ->> r.kind)::integer - 1));
            end if;
            v_ids := v_ids || r.id;
            v_taken := jsonb_set(v_taken, array[r.kind], to_jsonb(coalesce((v_taken ->> r.kind)::integer, 0) + 1));
            exit when cardinality(v_ids) >= v_left;
        end loop;
    else
        -- The keys with due jobs, from after p_after_key, wrapping around (a
        -- skip scan of job_runs_key_claim; ORDER BY ... LIMIT 1 rather than
        -- min(), which without statistics was planned as an aggregate over
        -- the whole index): at most one per start the claim
        -- may make, and at most 1000. A key whose jobs are all due later is
        -- passed over; at most 4 x that many + 64 keys are looked at, and
        -- the next claim goes on after the last one looked at.
        v_key := coalesce(p_after_key, '');
        v_n := least(v_left, 1000);
        with recursive w(k, n, d, due) as (
            select m.k, 1, (m.due)::int, m.due from (
                select f.k, f.k is not null and d.x is not null as due
                from (select (select j.limit_key from workq.job_runs j
                              where j.queue = p_queue and j.status = 0 and j.limit_key is not null and j.limit_key > v_key
                              order by j.limit_key limit 1) as k) f
                left join lateral (select 1 as x from workq.job_runs j
                                   where j.queue = p_queue and j.status = 0 and j.limit_key = f.k and j.run_at <= now()
                                   order by j.priority desc, j.run_at, j.id limit 1) d on true) m
            union all
            select m.k, w.n + 1, w.d + (m.due)::int, m.due from w cross join lateral (
                select f.k, f.k is not null and d.x is not null as due
                from (select (select j.limit_key from workq.job_runs j
                              where j.queue = p_queue and j.status = 0 and j.limit_key is not null and j.limit_key > w.k
                              order by j.limit_key limit 1) as k) f
                left join lateral (select 1 as x from workq.job_runs j
                                   where j.queue = p_queue and j.status = 0 and j.limit_key = f.k and j.run_at <= now()
                                   order by j.priority desc, j.run_at, j.id limit 1) d on true) m
            where w.k is not null and w.n < 4 * v_n + 64 and w.d < v_n
        )
        select coalesce(array_agg(w.k order by w.n) filter (where w.due), '{}'),
               (array_agg(w.k order by w.n desc) filter (where w.k is not null))[1],
               count(*) filter (where w.k is null) > 0
        into v_keys, v_last, v_end
        from w;
        if v_end and v_key <> '' and cardinality(v_keys) < v_n then
            -- wrapped: from the first key up to p_after_key
            with recursive w(k, n, d, due) as (
                select m.k, 1, (m.due)::int, m.due from (
                    select f.k, f.k is not null and f.k <= v_key and d.x is not null as due
                    from (select (select j.limit_key from workq.job_runs j
                                  where j.queue = p_queue and j.status = 0 and j.limit_key is not null and j.limit_key > ''
                                  order by j.limit_key limit 1) as k) f
                    left join lateral (select 1 as x from workq.job_runs j
                                       where j.queue = p_queue and j.status = 0 and j.limit_key = f.k and j.run_at <= now()
                                       order by j.priority desc, j.run_at, j.id limit 1) d on true) m
                union all
                select m.k, w.n + 1, w.d + (m.due)::int, m.due from w cross join lateral (
                    select f.k, f.k is not null and f.k <= v_key and d.x is not null as due
                    from (select (select j.limit_key from workq.job_runs j
                                  where j.queue = p_queue and j.status = 0 and j.limit_key is not null and j.limit_key > w.k
                                  order by j.limit_key limit 1) as k) f
                    left join lateral (select 1 as x from workq.job_runs j
                                       where j.queue = p_queue and j.status = 0 and j.limit_key = f.k and j.run_at <= now()
                                       order by j.priority desc, j.run_at, j.id limit 1) d on true) m
                where w.k is not null and w.k < v_key and w.n < 4 * v_n + 64 and w.d < v_n - cardinality(v_keys)
            )
            select v_keys || coalesce(array_agg(w.k order by w.n) filter (where w.due), '{}'),
                   coalesce((array_agg(w.k order by w.n desc) filter (where w.k is not null and w.k <= v_key))[1], v_last)
            into v_keys, v_last
            from w;
        elsif v_end then
            v_last := null; -- the walk reached the last key: the next one starts over
        end if;
        begin
            -- The rule per key, read once; each key's room under it, its
            -- throttle and its adaptation, in one statement.
            select l.rate, l.period_ms, l.concurrency into v_krate, v_kperiod, v_kconc
            from workq.flow_limits l where l.work_table = p_table and l.queue = p_queue and l.kind = '' and l.per_key;
            v_room := array(
                select greatest(0, case when s.throttled_until > now() then 0 else least(
                           case when v_krate is null then 2147483647 else v_krate - workq.workq_flow_starts(s, v_kperiod) end,
                           coalesce(floor(workq.workq_flow_rate(s))::bigint - workq.workq_flow_starts(s, 1000), 2147483647),
                           coalesce(ceil(workq.workq_flow_rate(s) / 10)::bigint - workq.workq_flow_starts(s, 100), 2147483647),
                           case when v_kconc is null then 2147483647 else v_kconc - coalesce(c.n, 0) end) end)::integer
                from unnest(v_keys) with ordinality k(key, o)
                left join workq.flow_state s on s.work_table = p_table and s.queue = p_queue and s.kind = '' and s.key = k.key
                left join (select j.limit_key, count(*) as n from workq.job_runs j
                           where v_kconc is not null and j.queue = p_queue and j.status = 1 and j.limit_key = any(v_keys)
                           group by j.limit_key) c on c.limit_key = k.key
                order by k.o);
            -- Each key an equal share, and the jobs without a key one more;
            -- then (a second pass) what the keys that had more may take of
            -- what is left.
            v_quota := ceil(v_left::numeric / (cardinality(v_keys) + 1))::integer;
            v_got := array_fill(0, array[cardinality(v_keys)]);
            for pass in 1 .. 2 loop
                exit when cardinality(v_ids) >= v_left;
                v_want := array(
                    select case when pass = 1 then least(v_quota, u.room)
                                when u.got = v_quota then least(u.room - u.got, v_left - cardinality(v_ids))
                                else 0 end
                    from unnest(v_room, v_got) with ordinality u(room, got, o) order by u.o);
                for r in
                    select t.o, t.id, t.kind
                    from unnest(v_keys, v_want) with ordinality u(key, n, o)
                    cross join lateral (
                        select j.id, j.kind::text as kind, u.o from workq.job_runs j
                        where j.queue = p_queue and j.status = 0 and j.limit_key = u.key and j.run_at <= now()
                          and not (j.kind = any(v_blocked)) and not (j.id = any(v_ids))
                        order by j.priority desc, j.run_at, j.id
                        limit u.n
                        for update skip locked) t
                    where u.n > 0
                loop
                    exit when cardinality(v_ids) >= v_left;
                    if v_kinds ? r.kind then
                        continue when (v_kinds ->> r.kind)::integer <= 0;
                        v_kinds := jsonb_set(v_kinds, array[r.kind], to_jsonb((v_kinds ->> r.kind)::integer - 1));
                    end if;
                    v_ids := v_ids || r.id;
                    v_taken := jsonb_set(v_taken, array[r.kind], to_jsonb(coalesce((v_taken ->> r.kind)::integer, 0) + 1));
                    v_got[r.o] := v_got[r.o] + 1;
                end loop;
                if pass = 1 then
                    -- The jobs without a key: their share, from where the
                    -- queue's last scan for them stopped.
                    v_n := least(v_quota, v_left - cardinality(v_ids));
                    for r in select c.id, c.kind from workq.workq_flow_keyless(p_queue, p_want + 16) c loop
                        exit when v_n <= 0;
                        continue when r.kind = any(v_blocked);
                        if v_kinds ? r.kind then
                            continue when (v_kinds ->> r.kind)::integer <= 0;
                        end if;
                        perform 1 from workq.job_runs j where j.id = r.id and j.status = 0 for update skip locked;
                        continue when not found;
                        if v_kinds ? r.kind then
                            v_kinds := jsonb_set(v_kinds, array[r.kind], to_jsonb((v_kinds ->> r.kind)::integer - 1));
                        end if;
                        v_ids := v_ids || r.id;
                        v_taken := jsonb_set(v_taken, array[r.kind], to_jsonb(coalesce((v_taken ->> r.kind)::integer, 0) + 1));
                        v_n := v_n - 1;
                    end loop;
                end if;
            end loop;
        end;
        p_after_key := coalesce(v_last, '');
    end if;

    -- The claim's start time, read after every count: the claim sets
    -- claimed_at to it (JobRunsClaimIDs), so the run archive's started_at
    -- is what the log holds, and a start never predates the end of an
    -- item whose slot it took.
    v_at := clock_timestamp();
    if cardinality(v_ids) > 0 then
        -- The keys' starts, in one statement: all of them under a rate per
        -- key, else only those adapting after a throttle.
        if v_krate is not null then
            insert into workq.flow_state as s (work_table, queue, kind, key, log_at, log_n)
            select p_table, p_queue, '', k.key, array[v_at], array[k.n]
            from unnest(v_keys, v_got) k(key, n) where k.n > 0
            on conflict (work_table, queue, kind, key) do update set
                log_at = array(select u.at from unnest(s.log_at, s.log_n) u(at, n)
                               where u.at > now() - (greatest(v_kperiod, 1000) + 1000) * interval '1 millisecond' order by u.at) || v_at,
                log_n  = array(select u.n from unnest(s.log_at, s.log_n) u(at, n)
                               where u.at > now() - (greatest(v_kperiod, 1000) + 1000) * interval '1 millisecond' order by u.at) || excluded.log_n,
                adapt_rate = case when workq.workq_flow_rate(s) is null then null else s.adapt_rate end,
                updated_at = now();
        elsif cardinality(v_keys) > 0 then
            update workq.flow_state s set
                log_at = array(select u.at from unnest(s.log_at, s.log_n) u(at, n) where u.at > now() - interval '2 seconds' order by u.at) || v_at,
                log_n  = array(select u.n from unnest(s.log_at, s.log_n) u(at, n) where u.at > now() - interval '2 seconds' order by u.at) || k.n,
                adapt_rate = case when workq.workq_flow_rate(s) is null then null else s.adapt_rate end,
                updated_at = now()
            from unnest(v_keys, v_got) k(key, n)
            where k.n > 0 and s.work_table = p_table and s.queue = p_queue and s.kind = '' and s.key = k.key
              and (s.adapt_rate is not null or s.throttled_until > now() - interval '1 second');
        end if;
        perform workq.workq_flow_log(p_table, p_queue, '', '', cardinality(v_ids), v_at);
        for r in select t.key as kind, t.value::integer as n from jsonb_each_text(v_taken) t loop
            perform workq.workq_flow_log(p_table, p_queue, r.kind, '', r.n, v_at);
        end loop;
    end if;
    return jsonb_build_object('ids', to_jsonb(v_ids), 'after', coalesce(p_after_key, ''), 'at', v_at,
        'limited', cardinality(v_ids) < v_budget and workq.workq_flow_ready(p_table, p_queue, v_ids,
                   array(select p.kind from workq.flow_kind_pauses p where p.work_table = p_table and p.queue = p_queue)),
        'wait_ms', workq.workq_flow_wait_ms(p_table, p_queue));
end
$$;
-- +goose StatementEnd

-- workq_flow_grant: the flow claim of the outbox, whose claim keeps its
-- own order over partition keys: it locks the queue's flow_queues row
-- (null: not under flow control) and returns how many rows the queue may
-- start now (its pause, W, rule and throttle); the outbox claim then runs
-- in the same transaction with that grant, and workq_flow_started logs
-- what it took. The outbox takes rules of the queue only.
-- +goose StatementBegin
create function workq.workq_flow_grant(p_table text, p_queue text, p_want integer)
returns integer
language plpgsql volatile
as $$
begin
    perform 1 from workq.flow_queues q where q.work_table = p_table and q.queue = p_queue for update;
    if not found then
        return null;
    end if;
    if exists (select 1 from workq.flow_kind_pauses p where p.work_table = p_table and p.queue = p_queue) then
        -- the outbox's claim cannot pass a topic over: a paused topic
        -- pauses its queue
        return 0;
    end if;
    return greatest(0, least(workq.workq_queue_budget(p_table, p_queue, p_want),
                             coalesce(workq.workq_flow_left(p_table, p_queue, '', ''), 2147483647)));
end
$$;
-- +goose StatementEnd

-- workq_flow_started: logs p_n starts of a queue (after workq_flow_grant
-- and the outbox claim, in their transaction). At the clock now, not at
-- now(): the claim set each row's claimed_at (the run archive's
-- started_at) to the clock when it took it, which follows the
-- transaction's start by the wait for the queue's lock and by everything
-- between the grant and the claim (much on a loaded machine). Logged at
-- now(), the starts counted a wait earlier than they happened, and the
-- next claim, counting back from its own now(), started a full batch less
-- than a period after them. The clock after the claim is no earlier than
-- any of its starts and no later than the next claim's (it holds the lock
-- until it commits), so a window that holds a start holds every start the
-- claim that made it counted.
-- +goose StatementBegin
create function workq.workq_flow_started(p_table text, p_queue text, p_n integer)
returns integer
language plpgsql volatile
as $$
begin
    if p_n > 0 then
        perform workq.workq_flow_log(p_table, p_queue, '', '', p_n, clock_timestamp());
    end if;
    return p_n;
end
$$;
-- +goose StatementEnd

-- workq_flow_throttle: a handler (or a publisher that got 429 or 503) says
-- the service downstream of a scope (a key, a kind, or the queue) is
-- overloaded: no process starts the scope's work until now() + p_retry_ms,
-- and then it starts at most the rate it lowered to, growing back step by
-- step (multiplicative decrease, additive increase). One lowering per
-- burst: throttles while the scope is still throttled, or within a second
-- of the last lowering, only extend the wait. A first lowering halves the
-- scope's starts of the last second; a later one takes 0.8 of the rate it
-- adapts at (or its starts, if fewer); the rate grows back by a twentieth
-- of the first lowered rate a second, by a hundredth of a later one, and
-- starts are paced (workq_flow_left). Measured against a receiver that
-- takes 100 requests a second (docs/throughput.md, "Flow control").
-- Returns until when the scope is throttled.
-- +goose StatementBegin
create function workq.workq_flow_throttle(p_table text, p_queue text, p_kind text, p_key text, p_retry_ms bigint)
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
    -- The queue's row first, as a flow claim takes it (FOR UPDATE, then the
    -- states): inserting a state takes KEY SHARE on it for its foreign key,
    -- and doing that after the state's row would deadlock with a claim
    -- that logs the same new key.
    perform 1 from workq.flow_queues q where q.work_table = p_table and q.queue = p_queue for key share;
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
    -- The scope's starts in the last second: from its log, or for a queue
    -- not logging yet (a first throttle) its items claimed in the last
    -- second, in progress (the in-progress index) or ended (the run
    -- archive, by finished_at): every start is in exactly one of them.
    -- Not its completions: at the first 429 of a burst the successes'
    -- completions may not be flushed yet.
    v_obs := workq.workq_flow_starts(v_st, 1000);
    if v_obs = 0 and p_kind = '' and p_key = '' then
        execute format('select count(*) from workq.%I where queue = $1 and status = 1 and claimed_at > now() - interval ''1 second''', p_table)
        into v_obs using p_queue;
        v_obs := v_obs + (select count(*) from workq.runs r
                          where r.finished_at > now() - interval '1 second' and r.work_table = p_table and r.queue = p_queue
                            and r.started_at > now() - interval '1 second' and r.outcome <> 'revived');
    end if;
    v_cur := workq.workq_flow_rate(v_st);
    -- A first lowering halves the starts of the last second; a later one
    -- (adapting) takes 0.8 of the adapted rate, or the starts if fewer.
    v_rate := greatest(1, case when v_cur is null then coalesce(nullif(v_obs, 0), 2) / 2
                               else least(v_cur * 0.8, coalesce(nullif(v_obs, 0), v_cur)) end);
    update workq.flow_state set
        throttled_until = v_until,
        adapt_rate = v_rate,
        adapt_at = now(),
        -- grows by a twentieth of the first lowered rate a second, then by
        -- a hundredth of each later one: slowly near the rate that was
        -- throttled, so a pause of the whole scope comes seldom
        adapt_step = case when v_cur is null then greatest(v_rate / 20, 0.5) else greatest(v_rate / 100, 0.5) end,
        adapt_end = case when v_cur is null then greatest(v_rate * 10, 10) else adapt_end end,
        updated_at = now()
    where work_table = p_table and queue = p_queue and kind = p_kind and key = p_key;
    return v_until;
end
$$;
-- +goose StatementEnd

-- +goose Down
drop function workq.workq_flow_throttle(text, text, text, text, bigint);
drop function workq.workq_flow_started(text, text, integer);
drop function workq.workq_flow_grant(text, text, integer);
drop function workq.workq_flow_pick(text, text, integer, text);
drop function workq.workq_flow_keyless(text, integer);
drop function workq.workq_flow_ready(text, text, bigint[], text[]);
drop function workq.workq_flow_log(text, text, text, text, integer, timestamptz);
drop function workq.workq_flow_wait_ms(text, text);
drop function workq.workq_flow_left(text, text, text, text);
drop function workq.workq_flow_starts(workq.flow_state, bigint);
drop function workq.workq_flow_rate(workq.flow_state);
drop function workq.workq_flow_kind_column(text);
drop function workq.workq_claim_budget(text, text, integer, integer);
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
drop function workq.workq_queue_budget(text, text, integer);
drop table workq.flow_state;
drop table workq.flow_kind_pauses;
drop table workq.flow_limits;
drop table workq.flow_queues;

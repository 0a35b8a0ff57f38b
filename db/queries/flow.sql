-- name: FlowPick :one
-- FlowPick runs workq_flow_pick (migration 00024): inside a flow claim's transaction it chooses, row-locks and logs the rows a queue under flow control may start now; null when the queue is not under flow control.
select workq.workq_flow_pick(@work_table::text, @queue::text, @max_rows::integer, @after_key::text)::jsonb as pick;

-- name: FlowGrant :one
-- FlowGrant runs workq_flow_grant: inside a flow claim's transaction, how many rows the outbox queue may start now; -1 when the queue is not under flow control.
select coalesce(workq.workq_flow_grant(@work_table::text, @queue::text, @max_rows::integer), -1)::integer as granted;

-- name: FlowStarted :one
-- FlowStarted logs n starts of a queue under flow control (after FlowGrant and the claim, in the same transaction).
select workq.workq_flow_started(@work_table::text, @queue::text, @n::integer)::integer as n;

-- name: FlowIsOn :one
-- FlowIsOn says whether a queue is under flow control (its claims go through FlowPick or FlowGrant).
select exists (select 1 from workq.flow_queues where work_table = @work_table::text and queue = @queue::text)::boolean as on;

-- name: FlowThrottle :one
-- FlowThrottle runs workq_flow_throttle: the scope (a key, a kind, or the queue: '' for neither) starts nothing until retry_ms from now, then adapts its rate; returns until when.
select workq.workq_flow_throttle(@work_table::text, @queue::text, @kind::text, @key::text, @retry_ms::bigint)::timestamptz as until;

-- name: FlowQueueEnsure :exec
-- FlowQueueEnsure puts a queue under flow control (an operator's setting follows: the row is no longer the throttle's own).
insert into workq.flow_queues (work_table, queue) values (@work_table, @queue)
on conflict (work_table, queue) do update set auto = false, updated_at = now();

-- name: FlowFairSet :exec
-- FlowFairSet says whether claims of a queue take its limit keys in turn.
insert into workq.flow_queues (work_table, queue, fair) values (@work_table, @queue, @fair)
on conflict (work_table, queue) do update set fair = excluded.fair, auto = false, updated_at = now();

-- name: FlowLimitSet :exec
-- FlowLimitSet sets one rule of a queue under flow control (FlowQueueEnsure first, in the same transaction).
insert into workq.flow_limits (work_table, queue, kind, per_key, rate, period_ms, concurrency)
values (@work_table, @queue, @kind, @per_key, sqlc.narg('rate')::integer, @period_ms, sqlc.narg('concurrency')::integer)
on conflict (work_table, queue, kind, per_key) do update set
    rate = excluded.rate, period_ms = excluded.period_ms, concurrency = excluded.concurrency, updated_at = now();

-- name: FlowLimitDelete :execrows
-- FlowLimitDelete removes one rule.
delete from workq.flow_limits
where work_table = @work_table and queue = @queue and kind = @kind and per_key = @per_key;

-- name: FlowKindPause :one
-- FlowKindPause pauses one kind within its queue and says whether it was running (a second pause keeps the first's time, actor and reason); FlowQueueEnsure first, in the same transaction.
insert into workq.flow_kind_pauses (work_table, queue, kind, paused_by, reason)
values (@work_table, @queue, @kind, @paused_by, sqlc.narg('reason')::text)
on conflict (work_table, queue, kind) do nothing
returning true as paused;

-- name: FlowKindResume :one
-- FlowKindResume resumes one kind and wakes the queue's workers (NOTIFY on the table's channel, delivered at commit); 0 when it was not paused.
with resumed as (
    delete from workq.flow_kind_pauses where work_table = @work_table and queue = @queue and kind = @kind
    returning queue
),
woken as (
    select pg_notify('workq_' || @work_table::text, r.queue) as sent from resumed r
)
select count(*)::bigint as resumed from resumed cross join (select count(*) as n from woken) w;

-- name: FlowTidy :execrows
-- FlowTidy takes a queue out of flow control when nothing of it is left: not fair, no rule, no paused kind, no scope throttled or adapting.
delete from workq.flow_queues q
where q.work_table = @work_table and q.queue = @queue and not q.fair
  and not exists (select 1 from workq.flow_limits l where l.work_table = q.work_table and l.queue = q.queue)
  and not exists (select 1 from workq.flow_kind_pauses p where p.work_table = q.work_table and p.queue = q.queue)
  and not exists (select 1 from workq.flow_state s where s.work_table = q.work_table and s.queue = q.queue
                  and (s.throttled_until > now() or workq.workq_flow_rate(s) is not null));

-- name: FlowQueuesList :many
-- FlowQueuesList lists the queues under flow control.
select work_table, queue, fair, auto, updated_at from workq.flow_queues order by work_table, queue;

-- name: FlowLimitsList :many
-- FlowLimitsList lists every rule, with its scope's use now: for a rule of a queue or a kind, its starts in the current window (the period up to now), its items in progress and until when it is throttled; for a rule per key, the number of keys with starts in the window, the busiest key's starts and the most items in progress of one key. A new work table adds its branch to in_progress.
select l.work_table, l.queue, l.kind, l.per_key, l.rate, l.period_ms, l.concurrency, l.updated_at,
       coalesce((select workq.workq_flow_starts(s, l.period_ms) from workq.flow_state s
                 where s.work_table = l.work_table and s.queue = l.queue and s.kind = l.kind and s.key = '' and not l.per_key), 0)::bigint as started,
       coalesce((select max(workq.workq_flow_starts(s, l.period_ms)) from workq.flow_state s
                 where s.work_table = l.work_table and s.queue = l.queue and s.kind = '' and s.key <> '' and l.per_key), 0)::bigint as busiest_key_started,
       (select count(*) from workq.flow_state s
        where s.work_table = l.work_table and s.queue = l.queue and s.kind = '' and s.key <> '' and l.per_key
          and workq.workq_flow_starts(s, l.period_ms) > 0)::bigint as active_keys,
       -- items in progress: the scope's (queue or kind; also those whose
       -- lease expired, until reaped, as a concurrency counts them), or for
       -- a rule per key the busiest key's
       (case when l.per_key then
            coalesce((select max(x.n) from (select count(*) as n from workq.job_runs j
                                             where j.queue = l.queue and j.status = 1 and j.limit_key is not null
                                             group by j.limit_key) x), 0)
        else (case l.work_table
            when 'job_runs' then (select count(*) from workq.job_runs where queue = l.queue and status = 1 and (l.kind = '' or kind = l.kind))
            when 'outbox' then (select count(*) from workq.outbox where queue = l.queue and status = 1 and (l.kind = '' or topic = l.kind))
            when 'inbox' then (select count(*) from workq.inbox where queue = l.queue and status = 1 and (l.kind = '' or source = l.kind))
            when 'timers' then (select count(*) from workq.timers where queue = l.queue and status = 1 and (l.kind = '' or topic = l.kind))
        end) end)::bigint as in_progress,
       -- milliseconds since the Unix epoch, 0 when not throttled
       coalesce((select floor(extract(epoch from max(s.throttled_until)) * 1000) from workq.flow_state s
                 where s.work_table = l.work_table and s.queue = l.queue and s.kind = l.kind and s.key = '' and not l.per_key
                   and s.throttled_until > now()), 0)::bigint as throttled_until_ms
from workq.flow_limits l
order by l.work_table, l.queue, l.kind, l.per_key;

-- name: FlowStatesList :many
-- FlowStatesList lists the scopes that are throttled or adapting now, with the rate they adapt at (starts per second; 0 when not adapting) and their starts in the last second.
select s.work_table, s.queue, s.kind, s.key,
       s.throttled_until,
       coalesce(workq.workq_flow_rate(s), 0)::float8 as adapt_rate,
       workq.workq_flow_starts(s, 1000)::bigint as started_last_second
from workq.flow_state s
where s.throttled_until > now() or workq.workq_flow_rate(s) is not null
order by s.work_table, s.queue, s.kind, s.key;

-- name: FlowKindPausesList :many
-- FlowKindPausesList lists every kind paused within its queue.
select work_table, queue, kind, paused_at, paused_by, reason from workq.flow_kind_pauses order by work_table, queue, kind;

-- name: FlowKeyInProgress :one
-- FlowKeyInProgress counts a limit key's job runs in progress in a queue.
select count(*)::bigint as n from workq.job_runs where queue = @queue and status = 1 and limit_key = @limit_key::text;

-- name: FlowWaitMs :one
-- FlowWaitMs says how long until a queue's own rate or throttle lets it start again (0: now; -1: it has neither).
select coalesce(workq.workq_flow_wait_ms(@work_table::text, @queue::text), -1)::bigint as wait_ms;

-- name: FlowPurgeKeys :execrows
-- FlowPurgeKeys deletes up to max_rows limit keys' states that nothing needs any more (retention): untouched for longer than the longest rate period, and neither throttled nor adapting. A key's state is written again at its next start.
delete from workq.flow_state s
where s.ctid = any(array(
    select x.ctid from workq.flow_state x
    where x.key <> '' and x.updated_at < now() - interval '25 hours'
      and not coalesce(x.throttled_until > now(), false) and workq.workq_flow_rate(x) is null
    limit @max_rows::integer));

-- name: FlowPurgeAutoQueues :execrows
-- FlowPurgeAutoQueues takes the queues that a throttle alone put under flow control out of it once the throttle and the adaptation have ended (retention).
delete from workq.flow_queues q
where q.auto and not q.fair
  and not exists (select 1 from workq.flow_limits l where l.work_table = q.work_table and l.queue = q.queue)
  and not exists (select 1 from workq.flow_kind_pauses p where p.work_table = q.work_table and p.queue = q.queue)
  and not exists (select 1 from workq.flow_state s where s.work_table = q.work_table and s.queue = q.queue
                  and (s.throttled_until > now() or workq.workq_flow_rate(s) is not null));

-- name: FlowQueueLock :exec
-- FlowQueueLock locks a queue's flow_queues row (if any) before FlowTidy runs in a statement of its own: the tidy's snapshot then sees every setting committed before the lock was granted, so a rule set meanwhile is never deleted with the row.
select 1 from workq.flow_queues where work_table = @work_table and queue = @queue for update;

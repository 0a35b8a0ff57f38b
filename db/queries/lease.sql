-- name: LeaseHeartbeat :many
-- LeaseHeartbeat extends the leases of many items, each guarded by its own owner token, in one statement, and says for each input id whether it extended it, whether the lease is lost for certain (another token, or expired by the database clock at the moment the row is examined: clock_timestamp(), not the statement's start), and whether its cancel was requested (cancel_requested_at: the holder cancels the handler; the fallback for a missed NOTIFY). A row locked by a concurrent statement (a completion, a reap, a heartbeat that timed out client-side) is neither: it is skipped rather than waited for, so a heartbeat never deadlocks, and its fate is left to that statement.
with args as materialized (
    -- The arrays as a row the planner cannot see into, as in
    -- LeaseComplete: a custom plan of a few leases would otherwise look
    -- cheaper than the generic plan and be made again at every beat.
    select @ids::bigint[] as ids, @owner_tokens::text[] as owner_tokens
),
o as materialized (
    -- unnest (in the select list: one row per element) from a one-row
    -- generate_series whose bound the plan cannot see. A generic plan (what a
    -- cached prepared statement switches to after five executions) cannot see
    -- the arrays and estimates unnest at 10 rows; on that estimate it joined o
    -- to the table in a nested loop over a materialized scan, comparing every
    -- element with every row (quadratic in the batch). The generate_series is
    -- estimated at 1000 rows, so o at 10,000, which the planner hashes or
    -- merges (TestLeasePlans checks the generic plans). Subscripting the
    -- arrays by generate_series would be estimated the same but walks a text
    -- array from its start for every element: +25% for a batch of 1000.
    select unnest(args.ids) as id, unnest(args.owner_tokens)::uuid as owner_token
    from args, generate_series(1, least(cardinality(args.ids), 1))
),
held as (
    -- status = 1 is implied by a matching token (the lease CHECK) and left out
    -- for the same reason as in LeaseComplete: it invites a nested loop over
    -- the in-progress index.
    -- id = any(@ids) besides the join: with statistics taken while the table
    -- was small the planner hash-joined o to a sequential scan of the whole
    -- table; this bounds the table side to the input's ids whatever the join.
    select h.id from workq.workq_lease_table h, o
    where h.id = any((select x.ids from args x)::bigint[]) and h.id = o.id and h.owner_token = o.owner_token
      and h.locked_until > clock_timestamp()
    for no key update of h skip locked
),
extended as (
    update workq.workq_lease_table t set locked_until = now() + (@lease_ms::bigint) * interval '1 millisecond'
    where t.id = any(array(select held.id from held))
    returning t.id
)
select o.id::bigint as id,
       (e.id is not null)::boolean as extended,
       -- Read on the statement's snapshot: a token that is gone or an expired
       -- lease there is lost whatever any concurrent statement does.
       (e.id is null and (r.id is null or r.owner_token is distinct from o.owner_token
                          or r.locked_until <= clock_timestamp()))::boolean as lost,
       (r.cancel_requested_at is not null and r.owner_token = o.owner_token)::boolean as cancel_requested
from o
left join extended e on e.id = o.id
-- r.id = any(@ids) for the same reason as in held: without it, statistics
-- taken while the table was small made this a hash join over a sequential
-- scan of the whole table (job_runs tipped over when it gained a column).
left join workq.workq_lease_table r on r.id = o.id and r.id = any((select x.ids from args x)::bigint[]);

-- name: LeaseComplete :one
-- LeaseComplete ends many attempts in one statement, each guarded by its own owner token (done, retry with a delay or failed when exhausted, failed, snoozed or released without using an attempt, cancelled), archives each attempt in runs (except one that moves its row: the done row is that attempt, LeaseDoneRuns), and returns the ids it applied to and the status each was left in, as two arrays in one row. An attempt whose cancel was requested (cancel_requested_at) ends cancelled whatever its outcome, keeping the cancel's last_error. An attempt that ends its item done moves the row to the table's done table (<table>_done, dropped by day) unless workq_keeps_done keeps it in place (a workflow's task, a schedule's slot, a job unique over the completed state; every row of the tables other than job runs).
with args as materialized (
    -- The batch's arrays as one row the planner cannot see into, read by
    -- everything below: a custom plan (what a prepared statement gets for
    -- its first five executions, and for good once their average cost is
    -- below the generic plan's) then estimates the batch as the generic
    -- plan does, the two cost the same, and PostgreSQL keeps the generic
    -- plan for every batch size. With the arrays as constants a custom plan
    -- of a small batch looked far cheaper, so every flush of fewer than
    -- about 200 completions was planned again: ~3 ms of the server's time
    -- for a batch of one that then ran in 0.5 ms (docs/throughput.md).
    select @ids::bigint[] as ids, @tokens::uuid[] as tokens, @token_of::integer[] as token_of, @outcomes::text[] as outcomes,
           @errors::text[] as errors, @delays_ms::bigint[] as delays_ms, @outputs::text[] as outputs
),
o as materialized (
    -- from a one-row generate_series for the generic plan's sake: see LeaseHeartbeat.
    -- The owner tokens are the batch's distinct ones (a claim's attempts
    -- share its token), each completion naming its own by position (1 on):
    -- a uuid array has fixed-size elements, so the subscript is an offset,
    -- where a token's text per completion cost 40 bytes to send and 0.4 µs
    -- to parse (docs/throughput.md).
    select unnest(args.ids) as id, (args.tokens)[unnest(args.token_of)] as owner_token, unnest(args.outcomes) as outcome,
           unnest(args.errors) as error, unnest(args.delays_ms) as delay_ms, unnest(args.outputs) as output
    from args, generate_series(1, least(cardinality(args.ids), 1))
),
d as (
    -- Done, with no cancel requested, and nothing keeps it: the row leaves
    -- the work table (a delete writes no index entry and leaves the table
    -- holding live work) for the done table (moved, below). The same fence
    -- (id and owner token) as u, which takes every row this did not.
    delete from workq.workq_lease_table j
    using o
    -- The choice is one expression over both sides, a join filter: as
    -- separate conditions the table's would be estimated on their own (one
    -- row on stale statistics) and drive a nested loop over o, quadratic
    -- in the batch (TestLeasePlans).
    -- (the cast keeps "= any" from reading the subquery as a set)
    where j.id = any((select x.ids from args x)::bigint[]) and j.id = o.id and j.owner_token = o.owner_token
      and case when o.outcome = 'done' then j.cancel_requested_at is null and not workq.workq_keeps_done(j) else false end
    -- The row as it was, column by column: (j).*, which PostgreSQL expands
    -- to the table's own columns (sqlc leaves it alone, where j.* would be
    -- expanded to the template's).
    returning (j).*
),
outs as materialized (
    -- The outputs of the done completions, by attempt (id and token), as
    -- one value the move looks each row up in (null when the batch has
    -- none). Not a join of d and o: the planner estimates d at one row and
    -- could loop over o for each moved row, quadratic in the batch
    -- (TestLeasePlans caught such a plan).
    select jsonb_object_agg(o.id::text || ' ' || o.owner_token::text, o.output) as by_attempt
    from o where o.outcome = 'done' and o.output <> ''
),
moved as (
    -- The done row (workq_done_rows) of each: a set-returning SQL function
    -- in FROM, which the planner inlines once and pulls up, so every
    -- column is a plain expression over d's (TestCompleteDoneRowIsInlined
    -- checks that no function is called). As (workq_done_row(...)).* it
    -- was inlined once per column, 29 times for job runs, about 40% of the
    -- statement's planning (migration 00029); returned from the delete as
    -- one composite value and expanded here, the row was formed and then
    -- taken apart column by column, about 1.5 µs a row (docs/throughput.md).
    -- (x).*, which PostgreSQL expands to the function's columns (sqlc
    -- leaves it alone, where x.* would be expanded to the template's).
    insert into workq.workq_lease_table_done
    select (x).* from d, outs t,
        lateral workq.workq_done_rows(row(d.*)::workq.workq_lease_table,
            case when t.by_attempt is not null then (t.by_attempt ->> (d.id::text || ' ' || d.owner_token::text))::jsonb end) x
),
u as (
    update workq.workq_lease_table j set
        status = case
            when j.cancel_requested_at is not null or o.outcome = 'cancelled' then 4
            when o.outcome = 'done' then 2
            when o.outcome = 'failed' or (o.outcome = 'retry' and j.attempts >= j.max_attempts) then 3
            else 0 end,
        attempts = case when o.outcome in ('snoozed', 'released') and j.cancel_requested_at is null
                        then j.attempts - 1 else j.attempts end,
        -- A retry with no attempt left ends failed: its run_at stays (the backoff
        -- time is when it would have run again, and it never will).
        run_at = case when o.outcome in ('retry', 'snoozed', 'released') and j.cancel_requested_at is null
                           and not (o.outcome = 'retry' and j.attempts >= j.max_attempts)
                      then now() + o.delay_ms * interval '1 millisecond' else j.run_at end,
        last_error = case when j.cancel_requested_at is not null then j.last_error
                          when o.outcome in ('retry', 'failed', 'cancelled') then nullif(o.error, '') else j.last_error end,
        finished_at = case when o.outcome in ('done', 'failed', 'cancelled') or j.cancel_requested_at is not null
                                or (o.outcome = 'retry' and j.attempts >= j.max_attempts)
                           then now() end,
        -- what the handler returned, kept when the attempt ends the job done
        -- ('' or, when no completion of the batch has one, null: none)
        output = case when nullif(o.output, '') is not null and o.outcome = 'done' and j.cancel_requested_at is null
                      then o.output::jsonb else j.output end,
        owner_token = null,
        locked_until = null,
        updated_at = now()
    from o
    -- Guarded by id + owner token. A row carrying a token is in progress (the lease
    -- CHECK constraint), so status = 1 is implied; it is not written out because it
    -- lets the planner drive this join from the in-progress index on a stale
    -- one-row estimate, a nested loop that is quadratic in the batch size.
    -- id = any(array) as well: it bounds the table side of the join to the
    -- batch's ids whatever join the planner picks (see LeaseHeartbeat).
    --
    -- Every row the move did not take, by id rather than by the move's
    -- test again: a row another transaction changed while this one waited
    -- for its lock (a cancel requested, a schedule deleted: ON DELETE SET
    -- NULL) is re-tested on its new version by the move and by this update
    -- alike, and could fail both tests and stay in progress. The ids are
    -- the batch's less the moved ones, computed once (an init plan), so a
    -- batch that all moved probes the table for nothing: the moved rows,
    -- dead to this statement, were looked up again for every id and then
    -- filtered out (0.8 µs a job, docs/throughput.md). not in over a
    -- subquery: a hashed subplan (<> all over an array compares each id
    -- with every moved id, quadratic in the batch).
    where j.id = any(array(select b.id from o b where b.id not in (select d.id from d)))
      and j.id = o.id and j.owner_token = o.owner_token
      and o.outcome in ('done', 'retry', 'failed', 'snoozed', 'released', 'cancelled')
    returning j.id, j.status, j.queue, j.attempts, j.lease_version, j.claimed_at, j.claimed_by, o.owner_token, o.outcome, o.error,
              j.last_error, workq.workq_workflow_id(j) as workflow_id, workq.workq_awaited(j) as awaited
),
ended as (
    select u.id, u.status, u.queue, u.attempts, u.lease_version, u.claimed_at, u.claimed_by, u.owner_token, u.outcome, u.error,
           u.last_error, u.workflow_id, u.awaited
    from u
    union all
    select d.id, 2::smallint, d.queue, d.attempts, d.lease_version, d.claimed_at, d.claimed_by,
           d.owner_token, 'done'::text, null::text, d.last_error, null::bigint, workq.workq_awaited(row(d.*)::workq.workq_lease_table)
    from d
),
archived as (
    insert into workq.runs (run_id, work_table, item_id, queue, attempt, lease_version, owner_token, worker_id, started_at, finished_at, outcome, error)
    select workq.workq_run_id('workq_lease_table', u.id, u.lease_version), 'workq_lease_table', u.id, u.queue,
           case when u.outcome in ('snoozed', 'released') and u.status = 0 then u.attempts + 1 else u.attempts end,
           u.lease_version, u.owner_token, u.claimed_by, u.claimed_at, now(),
           case when u.status = 3 then 'failed' when u.status = 4 then 'cancelled' else u.outcome end,
           case when u.status = 4 then u.last_error else nullif(u.error, '') end
    -- u, not ended: a row that moved is its own last attempt (LeaseDoneRuns
    -- reads it as a run, its run id naming the claim), which saves a heap
    -- row and two index entries per done job (migration 00028).
    from u
),
joins as (
    -- The joins of the outbox members this statement ended, locked in join
    -- id order now that the members' rows are, before the join trigger
    -- counts them at the statement's end in the update's row order: two
    -- completions never deadlock on joins (migration 00015; for the other
    -- tables it does nothing). The final select's one-time filter runs it.
    -- For the other tables the comparison of two constants folds at plan
    -- time and takes the array and the call out of the plan (it built an
    -- array of the batch's ids for a call that returned at once; with the
    -- answer as two arrays, 0.2–0.3 µs a job, docs/throughput.md). A table
    -- that gains joins must be named here as well as in workq_lock_joins.
    select case when 'workq_lease_table' = 'outbox'
                then workq.workq_lock_joins('workq_lease_table', array(select u.id from ended u where u.status >= 2))
                else 0 end as n
),
wf as (
    -- The job runs of workflows it ended: counted, their dependents
    -- released or cancelled, in one call for the batch (00026; the
    -- workflows locked in id order: two statements never deadlock on
    -- them). Empty arrays for every other job and table (workq_workflow_id
    -- is inlined: the column, or null), and the call returns at once.
    -- (no call at all for a batch without them; a workflow's tasks never move)
    select coalesce((select workq.workq_workflows_ended(
        array(select u.id from u where u.workflow_id is not null and u.status >= 2 order by u.id),
        array(select u.workflow_id from u where u.workflow_id is not null and u.status >= 2 order by u.id),
        array(select u.status from u where u.workflow_id is not null and u.status >= 2 order by u.id))
      where exists (select 1 from u where u.workflow_id is not null and u.status >= 2)), 0) as n
),
awaited as (
    -- Client.Wait's jobs (workq_awaited: job_runs.awaited, null elsewhere)
    select count(pg_notify('workq_done', 'j' || u.id)) as n from ended u where u.awaited and u.status >= 2
)
-- One row of two arrays, not a row per completion: a batch of 1,000 sent
-- 1,000 data rows for the client to read one by one (docs/throughput.md).
-- The where clause is a one-time filter that runs the CTEs above.
select coalesce(array_agg(u.id), '{}')::bigint[] as ids, coalesce(array_agg(u.status), '{}')::smallint[] as statuses
from ended u where (select j.n from joins j) >= 0 and (select f.n from wf f) >= 0
  and (select a.n from awaited a) >= 0;

-- name: LeaseReapExpired :many
-- LeaseReapExpired requeues up to max_rows items whose lease expired, of one queue or (queue null) of all, failing those with no attempts left and cancelling those whose cancel was requested; it archives the lost attempts and is safe to run from many reapers and claimers at once. A lease that expired before the server last started is reaped only 10 s after that start, so that its owner can write its completion first.
-- The expired leases' owner tokens by id. They come from an ordered scan
-- of <T>_in_progress, which marks the entries of long-completed rows dead
-- as it passes; planned here, the reap was a bitmap scan that read the heap
-- page of every such entry on every call (workq_expired_leases, migration
-- 00030; docs/design.md §4.3). A lease that ran out while the server was
-- down (a restart longer than the lease) waits 10 s after the server
-- started: its owner, whose handler may have finished, reconnects and
-- writes its completion (fenced by the token) instead of the job running
-- again. The tokens are kept for the archive: RETURNING shows the nulled
-- token, and a join of the reaped rows with a list of them was planned as
-- a nested loop (quadratic in the rows reaped). The function's query runs
-- on a snapshot taken after the statement's: a lease it finds expired
-- that the update's snapshot does not (expired in between) stays locked
-- and unreaped until the next reap, never reaped twice.
with expired as materialized (
    select workq.workq_expired_leases('workq_lease_table', sqlc.narg('queue')::text, @max_rows::integer) as by_id
),
reaped as (
    update workq.workq_lease_table j set
        status = case when j.cancel_requested_at is not null then 4 when j.attempts >= j.max_attempts then 3 else 0 end,
        owner_token = null,
        locked_until = null,
        run_at = now(),
        last_error = format('lease expired on attempt %s of %s (worker %s)%s', j.attempts, j.max_attempts, j.claimed_by,
                            case when j.cancel_requested_at is not null then '; ' || j.last_error
                                 when j.attempts >= j.max_attempts then '; no attempts left' else '' end),
        finished_at = case when j.attempts >= j.max_attempts or j.cancel_requested_at is not null then now() end,
        updated_at = now()
    -- Rechecked on the locked row: a heartbeat or completion that committed
    -- after this statement's snapshot leaves the row alone.
    where j.id = any(array(select k::bigint from expired e, jsonb_object_keys(e.by_id) k)) and j.status = 1 and j.locked_until <= now()
    returning j.id, j.status, j.queue, j.attempts, j.lease_version, j.claimed_at, j.claimed_by, j.last_error,
              workq.workq_workflow_id(j) as workflow_id, workq.workq_awaited(j) as awaited
),
archived as (
    insert into workq.runs (run_id, work_table, item_id, queue, attempt, lease_version, owner_token, worker_id, started_at, finished_at, outcome, error)
    select workq.workq_run_id('workq_lease_table', r.id, r.lease_version), 'workq_lease_table', r.id, r.queue, r.attempts, r.lease_version,
           (t.by_id ->> r.id::text)::uuid, r.claimed_by, r.claimed_at, now(), 'expired', r.last_error
    from reaped r, expired t
),
joins as (
    -- The joins of the outbox members it failed, in join id order (see LeaseComplete).
    select workq.workq_lock_joins('workq_lease_table', array(select r.id from reaped r where r.status >= 2)) as n
),
wf as (
    -- The job runs of workflows it ended, in one call (see LeaseComplete).
    -- (no call at all for a batch without them)
    select coalesce((select workq.workq_workflows_ended(
        array(select r.id from reaped r where r.workflow_id is not null and r.status >= 2 order by r.id),
        array(select r.workflow_id from reaped r where r.workflow_id is not null and r.status >= 2 order by r.id),
        array(select r.status from reaped r where r.workflow_id is not null and r.status >= 2 order by r.id))
      where exists (select 1 from reaped r where r.workflow_id is not null and r.status >= 2)), 0) as n
),
awaited as (
    select count(pg_notify('workq_done', 'j' || r.id)) as n from reaped r where r.awaited and r.status >= 2
)
select r.id, r.status, r.queue::text as queue from reaped r where (select j.n from joins j) >= 0 and (select f.n from wf f) >= 0
  and (select a.n from awaited a) >= 0;

-- name: LeaseHeldBy :many
-- LeaseHeldBy lists the in-progress items one claim's owner token still holds, with their lease versions (rare path: a claim whose result the caller never saw, released by token; it reads the in-progress set, which worker concurrency bounds).
select id, lease_version from workq.workq_lease_table
where status = 1 and owner_token = @owner_token::uuid
order by id;

-- name: LeaseCountByState :many
-- LeaseCountByState counts items per queue and status, with in-progress rows split by whether their lease has expired; done items that moved to the done table count as done.
select queue, status, (status = 1 and locked_until <= now())::boolean as expired, count(*)::bigint as count
from (select x.queue, x.status, x.locked_until from workq.workq_lease_table x
      union all select y.queue, y.status, y.locked_until from workq.workq_lease_table_done y) t
group by queue, status, expired
order by queue, status, expired;

-- name: LeaseDeleteFinished :execrows
-- LeaseDeleteFinished deletes up to max_rows done, failed or cancelled items that finished more than older_than_ms ago (retention).
-- By primary key (= any(array(...))), not "in (select ...)", which the
-- planner may turn into a hash join over the whole table.
delete from workq.workq_lease_table
where id = any(array(
    select f.id from workq.workq_lease_table f
    where f.status >= 2 and f.finished_at < now() - (@older_than_ms::bigint) * interval '1 millisecond'
      -- a workflow's tasks go with their workflow (WorkflowDeleteFinished),
      -- never before it has ended (inlined: job_runs.workflow_id, or null)
      and workq.workq_workflow_id(f) is null
    order by f.finished_at
    limit @max_rows::integer
));

-- name: LeaseRevive :many
-- LeaseRevive puts failed and cancelled items back to ready (attempts reset, due now), bumps each one's lease_version and archives the action in runs (outcome revived, by actor, with the reason), and returns the ids it revived; items that are neither are left alone.
with revived as (
    update workq.workq_lease_table j set
        status = 0,
        attempts = 0,
        run_at = now(),
        lease_version = greatest(j.lease_version + 1, (select workq.workq_epoch())),
        finished_at = null,
        cancel_requested_at = null,
        updated_at = now()
    where j.id = any(@ids::bigint[]) and j.status in (3, 4)
    returning j.id, j.queue, j.lease_version, j.last_error, workq.workq_workflow_id(j) as workflow_id
),
archived as (
    insert into workq.runs (run_id, work_table, item_id, queue, attempt, lease_version, owner_token, worker_id, started_at, finished_at, outcome, error)
    select workq.workq_run_id('workq_lease_table', r.id, r.lease_version), 'workq_lease_table', r.id, r.queue, 0, r.lease_version,
           '00000000-0000-0000-0000-000000000000'::uuid, @actor::text, now(), now(), 'revived', nullif(@reason::text, '')
    from revived r
),
joins as (
    -- The joins of the outbox members it revived, in join id order (see LeaseComplete).
    select workq.workq_lock_joins('workq_lease_table', array(select r.id from revived r)) as n
),
wf as (
    -- The workflows of the job runs it moved, in id order (see LeaseComplete).
    select count(*) as n from (
        select w.id from workq.workflows w
        where w.id = any(array(select revived.workflow_id from revived where revived.workflow_id is not null))
        order by w.id
        for no key update of w
    ) l
)
select r.id from revived r where (select j.n from joins j) >= 0 and (select f.n from wf f) >= 0;

-- name: LeaseStuck :many
-- LeaseStuck counts, per queue, the items in progress that were claimed more than older_than_ms ago (a worker holding an item far past its lease: a hung handler that still heartbeats, or a lease no reaper expires), with the oldest claim time; it reads the in-progress set, which worker concurrency bounds.
select queue, count(*)::bigint as count, min(claimed_at)::timestamptz as oldest_claim
from workq.workq_lease_table
where status = 1 and claimed_at < now() - (@older_than_ms::bigint) * interval '1 millisecond'
group by queue
order by queue;

-- name: LeaseQueueDepth :many
-- LeaseQueueDepth counts, per queue, the ready items that are due (ready) and not yet due (scheduled), the in-progress items, and the age in seconds of the oldest due ready item (0 when none is due), for metrics. Each part reads one partial index (the claim index, status = 0; <T>_in_progress, status = 1), never the finished rows; its cost is the size of the backlog. The outbox has its own (OutboxQueueDepth).
select d.queue::text as queue, sum(d.ready)::bigint as ready, sum(d.scheduled)::bigint as scheduled, sum(d.in_progress)::bigint as in_progress,
       coalesce(extract(epoch from now() - min(d.oldest_due)), 0)::float8 as oldest_ready_seconds
from (
    select r.queue, count(*) filter (where r.run_at <= now()) as ready, count(*) filter (where r.run_at > now()) as scheduled,
           0::bigint as in_progress, min(r.run_at) filter (where r.run_at <= now()) as oldest_due
    from workq.workq_lease_table r where r.status = 0 group by r.queue
    union all
    select p.queue, 0::bigint, 0::bigint, count(*), null::timestamptz
    from workq.workq_lease_table p where p.status = 1 group by p.queue
) d
group by d.queue
order by d.queue;

-- name: LeaseCancel :many
-- LeaseCancel cancels the ready, pending (a workflow's task waiting for its dependencies) and in-progress items among ids and returns them, each with requested = false when it ended at once or true when it is running. A ready item ends cancelled (status 4) with last_error "cancelled by <actor>[: reason]", its lease_version bumped and the action archived in runs (outcome cancelled, by actor, with the reason). An in-progress item gets cancel_requested_at and that last_error, and a NOTIFY on '<schema>_cancel' with payload '<table>:<id>': its holder cancels the handler, and the statement that ends the attempt (completion or reap) ends it cancelled and archives it. Finished items are left alone.
with cancelled as (
    update workq.workq_lease_table j set
        status = case when j.status <= 0 then 4 else j.status end,
        lease_version = case when j.status <= 0 then greatest(j.lease_version + 1, (select workq.workq_epoch())) else j.lease_version end,
        last_error = 'cancelled by ' || @actor::text || coalesce(': ' || nullif(@reason::text, ''), ''),
        finished_at = case when j.status <= 0 then now() else j.finished_at end,
        cancel_requested_at = case when j.status = 1 then coalesce(j.cancel_requested_at, now()) end,
        updated_at = now()
    -- -1: a workflow's pending task (job runs only)
    where j.id = any(@ids::bigint[]) and j.status in (-1, 0, 1)
    returning j.id, j.queue, j.attempts, j.lease_version, (j.status = 1)::boolean as requested, workq.workq_workflow_id(j) as workflow_id
),
archived as (
    insert into workq.runs (run_id, work_table, item_id, queue, attempt, lease_version, owner_token, worker_id, started_at, finished_at, outcome, error)
    select workq.workq_run_id('workq_lease_table', c.id, c.lease_version), 'workq_lease_table', c.id, c.queue, c.attempts, c.lease_version,
           '00000000-0000-0000-0000-000000000000'::uuid, @actor::text, now(), now(), 'cancelled', nullif(@reason::text, '')
    from cancelled c where not c.requested
),
notified as (
    select count(pg_notify('workq_cancel', 'workq_lease_table' || ':' || c.id)) as n from cancelled c where c.requested
),
joins as (
    -- The joins of the outbox members it cancelled, in join id order (see LeaseComplete).
    select workq.workq_lock_joins('workq_lease_table', array(select c.id from cancelled c where not c.requested)) as n
),
wf as (
    -- The workflows of the job runs it moved, in id order (see LeaseComplete).
    select count(*) as n from (
        select w.id from workq.workflows w
        where w.id = any(array(select cancelled.workflow_id from cancelled where cancelled.workflow_id is not null))
        order by w.id
        for no key update of w
    ) l
)
select c.id, c.requested from cancelled c where (select j.n from joins j) >= 0 and (select n.n from notified n) >= 0
  and (select f.n from wf f) >= 0;

-- name: LeaseDoneRuns :many
-- LeaseDoneRuns reads, for the items among ids that ended done and moved to the done table, the attempt that ended them: a done row is that attempt, which LeaseComplete does not also archive in runs (migration 00028). Read by an item's attempts, and by Resolve: after a completion's unseen commit, and for a flush whose batch holds a CompleteTx attempt. One probe of each day's id index.
select d.id, workq.workq_run_id('workq_lease_table', d.id, d.lease_version)::uuid as run_id, d.queue, d.attempts, d.lease_version,
       coalesce(d.claimed_by, '')::text as worker_id, coalesce(d.claimed_at, d.finished_at)::timestamptz as started_at,
       d.finished_at::timestamptz as finished_at
from workq.workq_lease_table_done d
where d.id = any(@ids::bigint[])
order by d.id, d.lease_version;

-- name: LeaseStatus :one
-- LeaseStatus reads one item's status and whether its cancel was requested (no row: no such item), from the work table or its done table.
select status, (cancel_requested_at is not null)::boolean as cancel_requested from workq.workq_lease_table where id = @id::bigint
union all
(select d.status, false from workq.workq_lease_table_done d where d.id = @id::bigint limit 1)
limit 1;

-- name: LeaseStatuses :many
-- LeaseStatuses reads the status of each of ids that exists (an id with no row is missing from the result): why an action left them alone.
select t.id, t.status from (
    select x.id, x.status from workq.workq_lease_table x where x.id = any(@ids::bigint[])
    union all
    select y.id, y.status from workq.workq_lease_table_done y where y.id = any(@ids::bigint[])
) t order by t.id;

-- name: LeaseDelete :many
-- LeaseDelete deletes the finished (done, failed or cancelled) items among ids and returns the ids it deleted; ready and in-progress items are left alone, and so are a workflow's tasks, which go with their workflow (its counts and its dependents' outputs need them). Their archived attempts stay in runs until the archive's own retention.
-- Done items that moved are deleted from the done table (never a workflow's task: those never move); the done row was the item's last attempt (migration 00028), which goes to runs with the nil token, so that the item's attempts stay whole until the archive's retention.
with work as (
    delete from workq.workq_lease_table j
    where j.id = any(@ids::bigint[]) and j.status >= 2 and workq.workq_workflow_id(j) is null
    returning j.id
),
done as (
    delete from workq.workq_lease_table_done d
    where d.id = any(@ids::bigint[])
    returning d.id, d.queue, d.attempts, d.lease_version, d.claimed_by, d.claimed_at, d.finished_at
),
last_attempts as (
    -- on conflict: a row that 00027's completion moved has its run already
    insert into workq.runs (run_id, work_table, item_id, queue, attempt, lease_version, owner_token, worker_id, started_at, finished_at, outcome, error)
    select workq.workq_run_id('workq_lease_table', d.id, d.lease_version), 'workq_lease_table', d.id, d.queue, d.attempts, d.lease_version,
           '00000000-0000-0000-0000-000000000000'::uuid, coalesce(d.claimed_by, ''), coalesce(d.claimed_at, d.finished_at), d.finished_at, 'done', null
    from done d
    on conflict do nothing
)
select work.id from work
union all
select done.id from done;

-- name: LeaseQueueStats :many
-- LeaseQueueStats counts one table's items per queue: ready (due), scheduled (ready, not due yet), in progress (and how many of those have an expired lease or were claimed in the last minute), done, failed, cancelled and pending (a workflow's tasks waiting for their dependencies), with the age in milliseconds of the oldest due ready item on the database clock (0: none); done items that moved to the done table count as done. It reads the whole table and its done table: an operator's command, not a per-scrape query.
select queue,
       count(*) filter (where status = 0 and run_at <= now())::bigint as ready,
       count(*) filter (where status = 0 and run_at > now())::bigint as scheduled,
       count(*) filter (where status = 1)::bigint as in_progress,
       count(*) filter (where status = 1 and locked_until <= now())::bigint as expired,
       count(*) filter (where status = 1 and claimed_at > now() - interval '1 minute')::bigint as claimed_recently,
       count(*) filter (where status = 2)::bigint as done,
       count(*) filter (where status = 3)::bigint as failed,
       count(*) filter (where status = 4)::bigint as cancelled,
       count(*) filter (where status = -1)::bigint as pending,
       coalesce(floor(extract(epoch from now() - min(run_at) filter (where status = 0 and run_at <= now())) * 1000), 0)::bigint as oldest_ready_age_ms
from (select x.queue, x.status, x.run_at, x.locked_until, x.claimed_at from workq.workq_lease_table x
      union all select y.queue, y.status, y.run_at, y.locked_until, y.claimed_at from workq.workq_lease_table_done y) t
group by queue
order by queue;

-- name: LeaseClaimByID :one
-- LeaseClaimByID leases one ready item by id under owner_token, setting the lease columns exactly as a claim does, except that the attempt it starts is at least min_attempt (as though the earlier attempts had been used; 0 or 1: the next one). The runtime never uses it (it claims by queue, in order, within the queue's limit): package workqtest does, to run one handler on an item the caller's transaction has just written.
update workq.workq_lease_table t set
    status = 1,
    owner_token = @owner_token::uuid,
    locked_until = now() + (@lease_ms::bigint) * interval '1 millisecond',
    lease_version = greatest(t.lease_version + 1, (select workq.workq_epoch())),
    attempts = greatest(t.attempts + 1, @min_attempt::integer),
    claimed_at = now(),
    claimed_by = @worker_id::text,
    updated_at = now()
where t.id = @id::bigint and t.status = 0
returning t.id, t.queue, t.priority, t.run_at, t.attempts, t.max_attempts, t.lease_version, t.locked_until, t.created_at;

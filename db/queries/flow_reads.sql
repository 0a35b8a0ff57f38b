-- name: FlowJobLimitKey :one
-- FlowJobLimitKey is a job run's limit key (empty when it has none), for what the item waits for.
select coalesce(limit_key, '')::text as limit_key from workq.job_runs where id = @id;

-- name: FlowKeyStarts :one
-- FlowKeyStarts is a limit key's starts in the window of period_ms that ends now (0: none logged).
select coalesce((select workq.workq_flow_starts(s, @period_ms::bigint) from workq.flow_state s
                 where s.work_table = @work_table::text and s.queue = @queue::text and s.kind = '' and s.key = @key::text), 0)::bigint as started;

-- name: FlowScopeInProgress :one
-- FlowScopeInProgress counts the items in progress of a queue, or of one kind of it (its kind, topic or the inbox's source; '' for the whole queue), as workq_flow_left counts them for a concurrency rule: also those whose lease expired, until they are reaped. Through the in-progress partial indexes; a new work table adds its branch.
select (case @work_table::text
    when 'job_runs' then (select count(*) from workq.job_runs where queue = @queue::text and status = 1 and (@kind::text = '' or kind = @kind::text))
    when 'outbox' then (select count(*) from workq.outbox where queue = @queue::text and status = 1 and (@kind::text = '' or topic = @kind::text))
    when 'inbox' then (select count(*) from workq.inbox where queue = @queue::text and status = 1 and (@kind::text = '' or source = @kind::text))
    when 'timers' then (select count(*) from workq.timers where queue = @queue::text and status = 1 and (@kind::text = '' or topic = @kind::text))
end)::bigint as n;

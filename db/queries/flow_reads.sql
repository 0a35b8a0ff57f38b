-- name: FlowJobLimitKey :one
-- FlowJobLimitKey is a job run's limit key (empty when it has none), for what the item waits for.
select coalesce(limit_key, '')::text as limit_key from workq.job_runs where id = @id;

-- name: FlowKeyStarts :one
-- FlowKeyStarts is a limit key's starts in the window of period_ms that ends now (0: none logged).
select coalesce((select workq.workq_flow_starts(s, @period_ms::bigint) from workq.flow_state s
                 where s.work_table = @work_table::text and s.queue = @queue::text and s.kind = '' and s.key = @key::text), 0)::bigint as started;

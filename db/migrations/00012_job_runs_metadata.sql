-- Job runs carry metadata of their own, apart from the payload: today the
-- W3C trace context (a JSON object with traceparent and tracestate) of the
-- span that enqueued them, so that the handler's span continues the
-- producer's trace. The column is nullable, without a default and without
-- a check: adding it rewrites and scans nothing, and a row enqueued
-- without tracing stores no value (a bit in the null bitmap the row already
-- has). The client writes JSON objects only.

-- +goose Up
alter table workq.job_runs add column metadata jsonb;

-- +goose Down
alter table workq.job_runs drop column metadata;

-- name: QueueLimitsSet :exec
-- QueueLimitsSet sets the global limit W of in-progress rows for one (table, queue).
insert into workq.queue_limits (work_table, queue, max_in_progress)
values (@work_table, @queue, @max_in_progress)
on conflict (work_table, queue) do update set max_in_progress = excluded.max_in_progress, updated_at = now();

-- name: QueueLimitsDelete :execrows
-- QueueLimitsDelete removes the global limit of one (table, queue).
delete from workq.queue_limits where work_table = @work_table and queue = @queue;

-- name: QueueLimitsList :many
-- QueueLimitsList lists every configured global limit.
select work_table, queue, max_in_progress, updated_at from workq.queue_limits order by work_table, queue;

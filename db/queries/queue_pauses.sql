-- name: QueuePausesPause :one
-- QueuePausesPause pauses one (table, queue) and says whether it was running (a pause of a paused queue keeps the first pause's time, actor and reason).
insert into workq.queue_pauses (work_table, queue, paused_by, reason)
values (@work_table, @queue, @paused_by, sqlc.narg('reason')::text)
on conflict (work_table, queue) do nothing
returning true as paused;

-- name: QueuePausesResume :one
-- QueuePausesResume resumes one (table, queue), wakes its workers (NOTIFY on the table's channel, delivered at commit), and returns 0 when it was not paused.
with resumed as (
    delete from workq.queue_pauses where work_table = @work_table and queue = @queue
    returning queue
),
woken as (
    select pg_notify('workq_' || @work_table::text, r.queue) as sent from resumed r
)
-- A cross join reads woken: a SELECT CTE that nothing reads never runs.
select count(*)::bigint as resumed from resumed cross join (select count(*) as n from woken) w;

-- name: QueuePausesList :many
-- QueuePausesList lists every paused queue.
select work_table, queue, paused_at, paused_by, reason from workq.queue_pauses order by work_table, queue;

-- name: AdminFailedCounts :many
-- AdminFailedCounts counts the failed items of every work table per queue. Each part reads the table's failed index (<table>_failed, status = 3) and the failed rows it points at, never the done rows: its cost is the number of failed items.
select 'job_runs'::text as work_table, j.queue::text as queue, count(*)::bigint as failed from workq.job_runs j where j.status = 3 group by j.queue
union all
select 'outbox'::text, o.queue::text, count(*)::bigint from workq.outbox o where o.status = 3 group by o.queue
union all
select 'inbox'::text, i.queue::text, count(*)::bigint from workq.inbox i where i.status = 3 group by i.queue
union all
select 'timers'::text, t.queue::text, count(*)::bigint from workq.timers t where t.status = 3 group by t.queue
order by 1, 2;

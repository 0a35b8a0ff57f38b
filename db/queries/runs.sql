-- name: RunsListByItem :many
-- RunsListByItem lists the archived attempts of one work item, oldest first.
select * from runs
where work_table = @work_table and item_id = @item_id
order by started_at, attempt;

-- name: RunsGet :one
-- RunsGet reads one archived attempt by run id.
select * from runs where run_id = @run_id;

-- name: RunsDeleteFinished :execrows
-- RunsDeleteFinished deletes up to max_rows archived attempts that finished more than older_than_ms ago (retention).
delete from runs
where run_id in (
    select r.run_id from runs r
    where r.finished_at < now() - (@older_than_ms::bigint) * interval '1 millisecond'
    order by r.finished_at
    limit @max_rows::integer
);

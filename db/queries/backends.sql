-- name: BackendActive :one
-- BackendActive says whether the server process pid is still running a statement (a claim whose client gave up on it may still be running on the server).
select coalesce((select a.state = 'active' from pg_catalog.pg_stat_activity a where a.pid = @pid::integer), false)::boolean as active;

-- name: BackendCancel :one
-- BackendCancel asks the server process pid to cancel its current statement (pg_cancel_backend; same role only).
select pg_cancel_backend(@pid::integer) as cancelled;

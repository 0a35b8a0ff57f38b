-- name: BackendState :one
-- BackendState says whether the server process pid still exists (present), whether it is running a statement (active), and whether its client's TCP port is port (ours: the process serves the connection the caller opened, not a pooler's). A process whose client closed its connection may still read and run a statement the client sent before it closed, even while it shows as idle.
select exists (select 1 from pg_catalog.pg_stat_activity a where a.pid = @pid::integer)::boolean as present,
       coalesce((select a.state = 'active' from pg_catalog.pg_stat_activity a where a.pid = @pid::integer), false)::boolean as active,
       coalesce((select a.client_port = @port::integer from pg_catalog.pg_stat_activity a where a.pid = @pid::integer), false)::boolean as ours;

-- name: BackendCancel :one
-- BackendCancel asks the server process pid to cancel its current statement (pg_cancel_backend; same role only).
select pg_cancel_backend(@pid::integer) as cancelled;

-- name: BackendTerminate :one
-- BackendTerminate ends the server process pid (pg_terminate_backend; same role only): a statement it has not read yet never runs, one it runs aborts, one that committed stays.
select pg_terminate_backend(@pid::integer) as terminated;

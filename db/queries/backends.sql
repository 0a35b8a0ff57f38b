-- name: BackendState :one
-- BackendState says whether the server process pid still exists (present) and whether it is running a statement (active). A process whose client closed its connection may still read and run a statement the client sent before it closed, even while it shows as idle; it exits once it reads the end of the connection.
select exists (select 1 from pg_catalog.pg_stat_activity a where a.pid = @pid::integer)::boolean as present,
       coalesce((select a.state = 'active' from pg_catalog.pg_stat_activity a where a.pid = @pid::integer), false)::boolean as active;

-- name: BackendCancel :one
-- BackendCancel asks the server process pid to cancel its current statement (pg_cancel_backend; same role only).
select pg_cancel_backend(@pid::integer) as cancelled;

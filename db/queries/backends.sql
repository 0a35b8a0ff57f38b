-- name: BackendState :one
-- BackendState says whether the server process pid still exists (present) and whether it is running a statement (active).
select exists (select 1 from pg_catalog.pg_stat_activity a where a.pid = @pid::integer)::boolean as present,
       coalesce((select a.state = 'active' from pg_catalog.pg_stat_activity a where a.pid = @pid::integer), false)::boolean as active;

-- name: BackendTerminateOwn :one
-- BackendTerminateOwn ends the server process pid (pg_terminate_backend; same role only) if its client is at addr and port, the caller's own connection as the server sees it, in the same statement as the check; false when it is not (gone, another client's, or seen through a pooler or NAT). Ending a process runs no statement it has not read yet, aborts one it runs (also one blocked writing to or reading from a client that is gone, which ignores a cancel) and keeps one that committed.
select coalesce((select pg_terminate_backend(a.pid) from pg_catalog.pg_stat_activity a
                 where a.pid = @pid::integer and a.client_port = @port::integer and a.client_addr = @addr::inet), false)::boolean as terminated;

-- name: WorkTablesToVacuum :many
-- WorkTablesToVacuum lists the work tables this role may vacuum (it owns them, or is a member of their owner) whose dead tuples, as of the server's statistics, are at least min_dead and at least a fifth of their live rows: the vacuum task's next round (maintain.VacuumTask).
select c.relname::text as work_table, coalesce(s.n_live_tup, 0)::bigint as live, coalesce(s.n_dead_tup, 0)::bigint as dead
from pg_catalog.pg_class c
join pg_catalog.pg_stat_user_tables s on s.relid = c.oid
where c.oid in ('workq.job_runs'::regclass, 'workq.outbox'::regclass, 'workq.inbox'::regclass, 'workq.timers'::regclass)
  and pg_catalog.pg_has_role(c.relowner, 'USAGE')
  and s.n_dead_tup >= @min_dead::bigint and s.n_dead_tup * 5 >= s.n_live_tup
order by c.relname;

-- name: OldestSnapshotStart :one
-- OldestSnapshotStart is when the oldest transaction of this database that holds a snapshot or a transaction id (another session's, that this role can see: pg_read_all_stats sees all) or a prepared transaction began (now: none): no vacuum removes a tuple that died after it began. The vacuum task skips a table whose last vacuum started after it.
select coalesce(least(
    (select min(a.xact_start) from pg_catalog.pg_stat_activity a
     where a.datname = current_database() and (a.backend_xmin is not null or a.backend_xid is not null) and a.pid <> pg_catalog.pg_backend_pid()
       -- a vacuum's own snapshot holds no horizon back (autovacuum workers, a VACUUM running)
       and a.backend_type = 'client backend' and not (a.state = 'active' and a.query ~* '^\s*vacuum\s')),
    (select min(p.prepared) from pg_catalog.pg_prepared_xacts p where p.database = current_database())
), now())::timestamptz as oldest;

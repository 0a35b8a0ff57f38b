-- name: WorkTablesToVacuum :many
-- WorkTablesToVacuum lists the work tables this role may vacuum (it owns them, or is a member of their owner) whose dead tuples, as of the server's statistics, are at least min_dead and at least a fifth of their live rows: the vacuum task's next round (maintain.VacuumTask).
select c.relname::text as work_table, coalesce(s.n_live_tup, 0)::bigint as live, coalesce(s.n_dead_tup, 0)::bigint as dead
from pg_catalog.pg_class c
join pg_catalog.pg_stat_user_tables s on s.relid = c.oid
where c.oid in ('workq.job_runs'::regclass, 'workq.outbox'::regclass, 'workq.inbox'::regclass, 'workq.timers'::regclass)
  and pg_catalog.pg_has_role(c.relowner, 'USAGE')
  and s.n_dead_tup >= @min_dead::bigint and s.n_dead_tup * 5 >= s.n_live_tup
order by c.relname;

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

-- name: DoneBrinIndexes :many
-- DoneBrinIndexes lists the BRIN indexes of the done tables' partitions that rows may still be landing in (the DEFAULT partition, and the day partitions whose day ended less than a day ago) and that this role may maintain. A block range that rows filled since the last vacuum is not summarized, and an unsummarized range matches every search: without DoneBrinSummarize, the dashboard's finished_at ranges (RunsLastMinute, RunsEndedBetween) would read every page a day's done rows filled since that partition's last vacuum.
select x.oid::bigint as index_oid, x.relname::text as index_name
from (values ('job_runs_done'), ('outbox_done'), ('inbox_done'), ('timers_done')) d (parent)
cross join lateral workq.workq_day_partitions(d.parent) p
join pg_catalog.pg_class t on t.oid = format('workq.%I', p.partition_name)::regclass
join pg_catalog.pg_index i on i.indrelid = t.oid
join pg_catalog.pg_class x on x.oid = i.indexrelid
join pg_catalog.pg_am a on a.oid = x.relam
where a.amname = 'brin' and (p.is_default or p.upper_bound > now() - interval '1 day')
  and pg_catalog.pg_has_role(t.relowner, 'USAGE')
order by x.oid;

-- name: DoneBrinSummarize :one
-- DoneBrinSummarize summarizes the new block ranges of one BRIN index (brin_summarize_new_values: it reads only the ranges not summarized yet, and inserts keep a summarized range current) and returns how many; it waits at most lock_timeout_ms for the table's SHARE UPDATE EXCLUSIVE lock (a vacuum of the partition holds it).
select set_config('lock_timeout', (@lock_timeout_ms::bigint)::text || 'ms', true) as lock_timeout,
       pg_catalog.brin_summarize_new_values((@index_oid::bigint)::oid::regclass)::bigint as summarized;

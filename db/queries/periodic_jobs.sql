-- Periodic jobs declared in code (Config.PeriodicJobs): internal/schedule's
-- Reconcile. docs/schedules.md, "Periodic jobs declared in code", has the
-- rule these implement.

-- name: PeriodicSetsLock :exec
-- PeriodicSetsLock serialises the reconciles of one schema until the transaction ends (two processes starting together agree on one order); readers are not blocked.
lock table workq.periodic_job_sets in share row exclusive mode;

-- name: PeriodicSetsSeen :one
-- PeriodicSetsSeen records that a live process declares the set fingerprint (first seen now when new; alive for alive_seconds more) and says whether a newer set (first seen later) is alive, and whether this set is the one applied last.
with mine as (
    insert into workq.periodic_job_sets as p (fingerprint, alive_until)
    values (@fingerprint, now() + make_interval(secs => @alive_seconds::float8))
    on conflict (fingerprint) do update set alive_until = greatest(p.alive_until, excluded.alive_until)
    returning fingerprint, first_seen_at, applied_at
)
select
    exists (select 1 from workq.periodic_job_sets s
            where s.alive_until > now() and s.fingerprint <> m.fingerprint
              and (s.first_seen_at, s.fingerprint) > (m.first_seen_at, m.fingerprint))::boolean as superseded,
    coalesce(m.applied_at >= (select max(a.applied_at) from workq.periodic_job_sets a), false)::boolean as current
from mine m;

-- name: PeriodicSetsApplied :exec
-- PeriodicSetsApplied marks the set fingerprint as the one applied last (clock_timestamp: later than any set applied before under the lock).
update workq.periodic_job_sets set applied_at = clock_timestamp() where fingerprint = @fingerprint;

-- name: PeriodicSetsPrune :exec
-- PeriodicSetsPrune forgets sets no process has declared for a month, except the one applied last.
delete from workq.periodic_job_sets
where alive_until < now() - interval '30 days'
  and applied_at is distinct from (select max(a.applied_at) from workq.periodic_job_sets a);

-- name: SchedulesForReconcile :many
-- SchedulesForReconcile reads and locks every declared schedule and every schedule named in names (a declaration may collide with an operator's schedule), in name order.
select * from workq.schedules
where declared or name = any(@names::text[])
order by name
for no key update;

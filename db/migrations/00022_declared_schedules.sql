-- Periodic jobs declared in code (issue 29): Config.PeriodicJobs is the
-- source of truth for the schedules it declares, and only for those.
--
-- schedules.declared: true for a schedule a Client's PeriodicJobs wrote;
--     false (every schedule before this migration) for one an operator
--     created through CreateSchedule, the API or the CLI, which no
--     reconcile ever changes. A constant default: adding it rewrites no
--     row.
-- periodic_job_sets: one row per set of declarations seen on this schema
--     (a deploy's PeriodicJobs, as the SHA-256 of their canonical form),
--     so that two versions running side by side during a rolling deploy
--     do not fight: a set is applied once, when it is the newest set
--     (first_seen_at) whose processes are alive (alive_until, renewed by
--     every process that declares it); docs/schedules.md, "Periodic jobs
--     declared in code".

-- +goose Up
alter table workq.schedules add column declared boolean not null default false;

create table workq.periodic_job_sets (
    fingerprint   bytea primary key,
    first_seen_at timestamptz not null default now(),
    alive_until   timestamptz not null,
    applied_at    timestamptz
);

-- +goose Down
drop table workq.periodic_job_sets;
alter table workq.schedules drop column declared;

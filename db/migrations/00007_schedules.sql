-- Recurring schedules (package schedule): the policies a schedule runs by,
-- and what the scheduler remembers of its last run. docs/schedules.md
-- explains every column; the table itself is in 00001.
--
-- overlap:     'allow' materialises every slot; 'skip' skips a slot while the
--              schedule's previous run (last_run_id) is live (ready or in
--              progress).
-- misfire:     what the scheduler does with slots it finds more than its
--              grace late (it was down or behind): 'run_once' collapses them
--              into one run, 'skip' drops them, 'run_all' materialises the
--              latest misfire_cap of them.
-- last_run_id: the newest job run this schedule produced (slot or trigger).
--              No foreign key: retention deletes finished job runs, and the
--              overlap check is a primary-key probe that finds nothing then.
-- skipped_runs, last_skipped_at: slots skipped by the overlap policy.

-- +goose Up
alter table workq.schedules
    add column overlap         text not null default 'allow' check (overlap in ('allow', 'skip')),
    add column misfire         text not null default 'run_once' check (misfire in ('run_once', 'skip', 'run_all')),
    add column misfire_cap     integer not null default 100 check (misfire_cap between 1 and 10000),
    add column last_run_id     bigint,
    add column skipped_runs    bigint not null default 0,
    add column last_skipped_at timestamptz,
    add constraint schedules_payload_object check (jsonb_typeof(payload) = 'object'),
    add constraint schedules_cron_length check (length(cron) between 1 and 256),
    add constraint schedules_timezone_length check (length(timezone) between 1 and 64);

-- +goose Down
alter table workq.schedules
    drop constraint schedules_timezone_length,
    drop constraint schedules_cron_length,
    drop constraint schedules_payload_object,
    drop column last_skipped_at,
    drop column skipped_runs,
    drop column last_run_id,
    drop column misfire_cap,
    drop column misfire,
    drop column overlap;

-- Operator actions on single items (issue 9's queue control): cancel a ready
-- item, and list failed items without walking every done row.
--
-- A cancelled item ends in `failed` (no fifth state; the README's state table)
-- with last_error "cancelled by <actor>: <reason>", and the action is archived
-- in runs as an attempt-like row with outcome 'cancelled' (who, when, why),
-- as a revive is ('revived', migration 00002). A cancelled timer also gets
-- cancelled_at = finished_at, as timers.Client.Cancel sets it.
--
-- <table>_failed indexes the failed rows by id: an operator's list of failed
-- items (newest first) reads it instead of filtering the primary key past
-- every done row. Failed rows are few; only rows entering or leaving status 3
-- add or remove an entry, so claims and completions of the rest pay nothing
-- but the predicate check.

-- +goose Up
alter table workq.runs drop constraint runs_outcome_check;
alter table workq.runs add constraint runs_outcome_check
    check (outcome in ('done', 'retry', 'failed', 'released', 'snoozed', 'expired', 'revived', 'cancelled'));

create index job_runs_failed on workq.job_runs (id) where status = 3;
create index outbox_failed on workq.outbox (id) where status = 3;
create index inbox_failed on workq.inbox (id) where status = 3;
create index timers_failed on workq.timers (id) where status = 3;

-- +goose Down
drop index workq.timers_failed;
drop index workq.inbox_failed;
drop index workq.outbox_failed;
drop index workq.job_runs_failed;
delete from workq.runs where outcome = 'cancelled';
alter table workq.runs drop constraint runs_outcome_check;
alter table workq.runs add constraint runs_outcome_check
    check (outcome in ('done', 'retry', 'failed', 'released', 'snoozed', 'expired', 'revived'));

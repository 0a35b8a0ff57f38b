-- Cancelled is a terminal state of its own (status 4), and a running item
-- can be cancelled (issue 19).
--
-- Until now a cancel ended a ready item as failed (status 3) with last_error
-- "cancelled by <actor>" (and, for timers, cancelled_at = finished_at), and a
-- claimed item could not be cancelled at all. Now:
--
-- * status 4 is cancelled, on every work table. It is finished like done
--   and failed (finished_at set, status >= 2): the finished indexes,
--   retention, the dedup index (status < 2) and delete treat it as such
--   without a change; revive takes it back to ready like a failed row.
-- * cancel_requested_at is set on an in-progress row whose cancel was
--   requested: the statement that ends the attempt (completion or reap)
--   then ends it cancelled whatever the handler returned, and the heartbeat
--   reports it to the holder (the fallback for a missed NOTIFY on
--   '<schema>_cancel'). A nullable column without a default, in no index:
--   adding it rewrites nothing, and heartbeats and completions stay HOT.
-- * a cancelled outbox message does not block its partition key: the
--   ordered claim passes over it like a delivered one, and retention
--   deletes it (outbox_finished now includes status 4, keyed or not).
-- * a cancelled join member counts as failed, as a deleted one always did.
-- * items cancelled before this migration (failed with the 'cancelled'
--   archive row of their current lease version; timers with cancelled_at =
--   finished_at) become cancelled.
--
-- The migration runs outside a transaction so that outbox_finished is
-- rebuilt concurrently; the new status constraints are added NOT VALID and
-- validated separately, so no step holds an exclusive lock for a scan.

-- +goose NO TRANSACTION
-- +goose Up
alter table workq.job_runs add column if not exists cancel_requested_at timestamptz;
alter table workq.outbox add column if not exists cancel_requested_at timestamptz;
alter table workq.inbox add column if not exists cancel_requested_at timestamptz;
alter table workq.timers add column if not exists cancel_requested_at timestamptz;

alter table workq.job_runs drop constraint if exists job_runs_status_check;
alter table workq.job_runs drop constraint if exists job_runs_status_ck;
alter table workq.job_runs add constraint job_runs_status_ck check (status between 0 and 4) not valid;
alter table workq.job_runs validate constraint job_runs_status_ck;
alter table workq.outbox drop constraint if exists outbox_status_check;
alter table workq.outbox drop constraint if exists outbox_status_ck;
alter table workq.outbox add constraint outbox_status_ck check (status between 0 and 4) not valid;
alter table workq.outbox validate constraint outbox_status_ck;
alter table workq.inbox drop constraint if exists inbox_status_check;
alter table workq.inbox drop constraint if exists inbox_status_ck;
alter table workq.inbox add constraint inbox_status_ck check (status between 0 and 4) not valid;
alter table workq.inbox validate constraint inbox_status_ck;
alter table workq.timers drop constraint if exists timers_status_check;
alter table workq.timers drop constraint if exists timers_status_ck;
alter table workq.timers add constraint timers_status_ck check (status between 0 and 4) not valid;
alter table workq.timers validate constraint timers_status_ck;

-- A cancelled member counts as failed (v_status >= 3), like a member
-- deleted before it ended (workq_outbox_join_deleted).
-- +goose StatementBegin
create or replace function workq.workq_outbox_join_count()
returns trigger
language plpgsql volatile
as $$
declare
    v_sign integer := case when new.status >= 2 then 1 else -1 end;
    v_status smallint := case when new.status >= 2 then new.status else old.status end;
    j workq.outbox_joins%rowtype;
begin
    update workq.outbox_joins set
        completed_steps = completed_steps + case when v_status = 2 then v_sign else 0 end,
        failed_steps = failed_steps + case when v_status >= 3 then v_sign else 0 end,
        updated_at = now()
    where id = new.join_id
    returning * into j;
    if not found or j.status <> 0 or v_sign < 0 then
        return null;
    end if;
    if j.failed_steps > 0 and j.on_member_failure = 2 then
        perform workq.workq_outbox_join_finish(j.id, 3::smallint, 'member_failed');
    elsif j.completed_steps + j.failed_steps >= j.expected_steps then
        if j.failed_steps > 0 and j.on_member_failure > 0 then
            perform workq.workq_outbox_join_finish(j.id, 3::smallint, 'member_failed');
        else
            perform workq.workq_outbox_join_finish(j.id, 2::smallint, null);
        end if;
    end if;
    return null;
end
$$;
-- +goose StatementEnd

-- Earlier cancels: failed rows whose current lease version was archived as
-- 'cancelled' (LeaseCancel bumped the version and archived it; a revive
-- bumps it again). Failed rows are few and read through <table>_failed.
-- status >= 2 on both sides: the join trigger does not fire.
update workq.job_runs j set status = 4 where j.status = 3 and exists (
    select 1 from workq.runs r where r.run_id = workq.workq_run_id('job_runs', j.id, j.lease_version) and r.outcome = 'cancelled');
update workq.outbox j set status = 4 where j.status = 3 and exists (
    select 1 from workq.runs r where r.run_id = workq.workq_run_id('outbox', j.id, j.lease_version) and r.outcome = 'cancelled');
update workq.inbox j set status = 4 where j.status = 3 and exists (
    select 1 from workq.runs r where r.run_id = workq.workq_run_id('inbox', j.id, j.lease_version) and r.outcome = 'cancelled');
update workq.timers t set status = 4
where t.status = 3 and t.cancelled_at is not null and t.cancelled_at = t.finished_at;

-- Retention deletes cancelled outbox messages, keyed or not: they block no key.
drop index concurrently if exists workq.outbox_finished_next;
create index concurrently outbox_finished_next on workq.outbox (finished_at)
    where status in (2, 4) or (status = 3 and partition_key is null);
-- +goose StatementBegin
do $$
begin
    drop index if exists workq.outbox_finished;
    alter index workq.outbox_finished_next rename to outbox_finished;
end
$$;
-- +goose StatementEnd

-- +goose Down
drop index concurrently if exists workq.outbox_finished_next;
create index concurrently outbox_finished_next on workq.outbox (finished_at)
    where status = 2 or (status = 3 and partition_key is null);
-- +goose StatementBegin
do $$
begin
    drop index if exists workq.outbox_finished;
    alter index workq.outbox_finished_next rename to outbox_finished;
end
$$;
-- +goose StatementEnd
-- Cancelled rows become failed again, as the old cancel left them; a timer
-- keeps reading as cancelled when its cancelled_at was set.
update workq.job_runs set status = 3, last_error = coalesce(last_error, 'cancelled') where status = 4;
update workq.outbox set status = 3, last_error = coalesce(last_error, 'cancelled') where status = 4;
update workq.inbox set status = 3, last_error = coalesce(last_error, 'cancelled') where status = 4;
update workq.timers set status = 3, last_error = coalesce(last_error, 'cancelled'),
    cancelled_at = coalesce(cancelled_at, finished_at) where status = 4;
-- +goose StatementBegin
create or replace function workq.workq_outbox_join_count()
returns trigger
language plpgsql volatile
as $$
declare
    v_sign integer := case when new.status >= 2 then 1 else -1 end;
    v_status smallint := case when new.status >= 2 then new.status else old.status end;
    j workq.outbox_joins%rowtype;
begin
    update workq.outbox_joins set
        completed_steps = completed_steps + case when v_status = 2 then v_sign else 0 end,
        failed_steps = failed_steps + case when v_status = 3 then v_sign else 0 end,
        updated_at = now()
    where id = new.join_id
    returning * into j;
    if not found or j.status <> 0 or v_sign < 0 then
        return null;
    end if;
    if j.failed_steps > 0 and j.on_member_failure = 2 then
        perform workq.workq_outbox_join_finish(j.id, 3::smallint, 'member_failed');
    elsif j.completed_steps + j.failed_steps >= j.expected_steps then
        if j.failed_steps > 0 and j.on_member_failure > 0 then
            perform workq.workq_outbox_join_finish(j.id, 3::smallint, 'member_failed');
        else
            perform workq.workq_outbox_join_finish(j.id, 2::smallint, null);
        end if;
    end if;
    return null;
end
$$;
-- +goose StatementEnd
alter table workq.job_runs drop constraint if exists job_runs_status_ck;
alter table workq.job_runs add constraint job_runs_status_check check (status between 0 and 3);
alter table workq.outbox drop constraint if exists outbox_status_ck;
alter table workq.outbox add constraint outbox_status_check check (status between 0 and 3);
alter table workq.inbox drop constraint if exists inbox_status_ck;
alter table workq.inbox add constraint inbox_status_check check (status between 0 and 3);
alter table workq.timers drop constraint if exists timers_status_ck;
alter table workq.timers add constraint timers_status_check check (status between 0 and 3);
alter table workq.timers drop column if exists cancel_requested_at;
alter table workq.inbox drop column if exists cancel_requested_at;
alter table workq.outbox drop column if exists cancel_requested_at;
alter table workq.job_runs drop column if exists cancel_requested_at;

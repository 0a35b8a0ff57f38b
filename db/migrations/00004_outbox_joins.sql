-- Fan-in joins on the outbox (docs/outbox_joins.md). A join expects N member
-- messages; each member is an outbox row carrying the join's id
-- (outbox.join_id, set when the member is written and never changed). The
-- statements that end a member (LeaseComplete, LeaseReapExpired, any other
-- UPDATE of outbox.status) count it on the join row through a row trigger, in
-- the same transaction, and the update that ends the join writes the join's
-- outcome message into the outbox. The join row's lock serialises members
-- that end at the same time, so exactly one statement sees the join end.
--
-- outbox_joins.status: 0 open, 2 completed, 3 failed (as on work rows: >= 2
-- is final). fail_reason says why a join failed: 'member_failed' or
-- 'deadline'. on_member_failure: 0 ignore (complete whatever the members'
-- outcomes), 1 fail when all members have ended and one failed, 2 fail at the
-- first failed member.
--
-- outbox_join_members (00001, never used) is dropped: a message belongs to at
-- most one join, so membership is a column on outbox, and the counts live on
-- the join row. A members table would cost a second row write and a second
-- lock per member end, and keep a copy of every member's status.

-- +goose Up
-- Defensive: the outbox write API's migration adds the column too.
alter table workq.outbox add column if not exists join_id bigint;

-- +goose StatementBegin
do $$
begin
    -- One foreign key to outbox_joins, whichever migration adds it. NO ACTION:
    -- a join cannot be deleted while members still reference it (retention
    -- deletes finished members first).
    if not exists (
        select 1 from pg_constraint
        where conrelid = 'workq.outbox'::regclass and contype = 'f' and confrelid = 'workq.outbox_joins'::regclass
    ) then
        alter table workq.outbox add constraint outbox_join_fk foreign key (join_id) references workq.outbox_joins (id);
    end if;
    -- Members of a join, for the foreign key's check when a join is deleted and
    -- for listing a join's members. Partial: messages outside joins add no entry.
    if not exists (
        select 1 from pg_index i join pg_attribute a on a.attrelid = i.indrelid and a.attnum = i.indkey[0]
        where i.indrelid = 'workq.outbox'::regclass and a.attname = 'join_id'
    ) then
        create index outbox_join on workq.outbox (join_id) where join_id is not null;
    end if;
end
$$;
-- +goose StatementEnd

drop table if exists workq.outbox_join_members;

alter table workq.outbox_joins
    drop column payload,
    add column attached_steps integer not null default 0,
    add column on_member_failure smallint not null default 0 check (on_member_failure between 0 and 2),
    add column deadline timestamptz,
    add column fail_reason text check (fail_reason in ('member_failed', 'deadline')),
    -- message_id of the outcome message the join wrote (null: none written)
    add column outcome_message_id uuid,
    add column on_complete_queue workq.workq_name not null default 'default',
    add column on_complete_topic text not null check (length(on_complete_topic) between 1 and 256),
    add column on_complete_payload jsonb not null default '{}' check (jsonb_typeof(on_complete_payload) = 'object'),
    add column on_complete_headers jsonb not null default '{}' check (jsonb_typeof(on_complete_headers) = 'object'),
    add column on_complete_partition_key text check (length(on_complete_partition_key) between 1 and 256),
    add column on_complete_correlation_id text,
    -- on_fail_topic null: a failed join writes no message
    add column on_fail_queue workq.workq_name not null default 'default',
    add column on_fail_topic text check (length(on_fail_topic) between 1 and 256),
    add column on_fail_payload jsonb not null default '{}' check (jsonb_typeof(on_fail_payload) = 'object'),
    add column on_fail_headers jsonb not null default '{}' check (jsonb_typeof(on_fail_headers) = 'object'),
    add column on_fail_partition_key text check (length(on_fail_partition_key) between 1 and 256),
    add column on_fail_correlation_id text,
    add constraint outbox_joins_counts_ck check (
        completed_steps >= 0 and failed_steps >= 0 and attached_steps between 0 and expected_steps),
    add constraint outbox_joins_final_ck check ((status >= 2) = (finished_at is not null)),
    add constraint outbox_joins_status_ck check (status in (0, 2, 3)),
    add constraint outbox_joins_reason_ck check ((status = 3) = (fail_reason is not null));

-- FailExpiredJoins: open joins by deadline; joins without one add no entry.
create index outbox_joins_deadline on workq.outbox_joins (deadline) where status = 0 and deadline is not null;

-- workq_outbox_join_finish ends open join p_id with p_status (2 completed, 3
-- failed, with p_reason) and writes its outcome message: the on-complete
-- message, or the on-fail message if the join has one. It returns whether it
-- ended the join; a join that is not open (or not there) is left alone. The
-- caller holds the join row's lock (the member trigger's counting update, or
-- FailExpiredJoins' FOR NO KEY UPDATE), so status = 0 is read on the latest
-- version and no other statement can end the join between the two.
-- +goose StatementBegin
create function workq.workq_outbox_join_finish(p_id bigint, p_status smallint, p_reason text)
returns boolean
language plpgsql volatile
as $$
declare
    j workq.outbox_joins%rowtype;
    v_ok boolean;
begin
    update workq.outbox_joins set
        status = p_status,
        fail_reason = p_reason,
        finished_at = now(),
        updated_at = now(),
        outcome_message_id = case when p_status = 2 or on_fail_topic is not null then gen_random_uuid() end
    where id = p_id and status = 0
    returning * into j;
    if not found then
        return false;
    end if;
    if j.outcome_message_id is null then
        return true;
    end if;
    v_ok := p_status = 2;
    insert into workq.outbox (queue, topic, partition_key, message_id, payload, headers, correlation_id)
    values (
        case when v_ok then j.on_complete_queue else j.on_fail_queue end,
        case when v_ok then j.on_complete_topic else j.on_fail_topic end,
        case when v_ok then j.on_complete_partition_key else j.on_fail_partition_key end,
        j.outcome_message_id,
        case when v_ok then j.on_complete_payload else j.on_fail_payload end,
        (case when v_ok then j.on_complete_headers else j.on_fail_headers end)
            || jsonb_build_object('workq-join-id', j.id::text,
                                  'workq-join-outcome', coalesce(p_reason, 'completed')),
        case when v_ok then j.on_complete_correlation_id else j.on_fail_correlation_id end);
    -- Wake the relay of that queue as an enqueue does (channel workq_outbox,
    -- payload the queue name).
    perform pg_notify('workq_outbox', case when v_ok then j.on_complete_queue else j.on_fail_queue end);
    return true;
end
$$;
-- +goose StatementEnd

-- workq_outbox_join_count counts a member whose finished-ness changed: ended
-- (status to done or failed) adds to the join's counts, revived (failed back
-- to ready, lease.Engine.Revive) takes it away again. The counting UPDATE
-- takes the join row's lock, so members ending at once in different
-- transactions are counted one after the other, each on the latest counts
-- (READ COMMITTED re-reads the row it waited for). When the counts say the
-- join is over and it is still open, this statement ends it. A member that
-- ends after its join ended is counted and nothing more.
-- +goose StatementBegin
create function workq.workq_outbox_join_count()
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

-- Only members whose finished-ness changes fire it: PostgreSQL evaluates WHEN
-- without calling the function, rows outside joins pay nothing, and a
-- heartbeat (which does not set status) does not even consider it.
create trigger outbox_join_count
    after update of status on workq.outbox
    for each row
    when (new.join_id is not null and (new.status >= 2) <> (old.status >= 2))
    execute function workq.workq_outbox_join_count();

-- workq_outbox_join_attach checks a member when it is written: the join must
-- be open and have room (attached_steps < expected_steps), and the message
-- must not be finished already. Attaching happens at write time only
-- (workq_outbox_join_fixed). Errors carry SQLSTATE WQJ01..WQJ05, which
-- package outbox maps to its sentinel errors.
-- +goose StatementBegin
create function workq.workq_outbox_join_attach()
returns trigger
language plpgsql volatile
as $$
declare
    j workq.outbox_joins%rowtype;
begin
    if new.status >= 2 then
        raise exception 'workq: outbox message joins join % already finished', new.join_id
            using errcode = 'WQJ04';
    end if;
    update workq.outbox_joins set attached_steps = attached_steps + 1, updated_at = now()
    where id = new.join_id and status = 0 and attached_steps < expected_steps;
    if found then
        return null;
    end if;
    select * into j from workq.outbox_joins where id = new.join_id;
    if not found then
        raise exception 'workq: join % does not exist', new.join_id using errcode = 'WQJ01';
    elsif j.status <> 0 then
        raise exception 'workq: join % has ended (%)', new.join_id,
            case when j.status = 2 then 'completed' else 'failed: ' || j.fail_reason end
            using errcode = 'WQJ02';
    end if;
    raise exception 'workq: join % already has all % of its members', new.join_id, j.expected_steps
        using errcode = 'WQJ03';
end
$$;
-- +goose StatementEnd

-- AFTER, not BEFORE: an insert skipped by ON CONFLICT DO NOTHING (a resent
-- message id) must not take a member's place.
create trigger outbox_join_attach
    after insert on workq.outbox
    for each row
    when (new.join_id is not null)
    execute function workq.workq_outbox_join_attach();

-- +goose StatementBegin
create function workq.workq_outbox_join_fixed()
returns trigger
language plpgsql
as $$
begin
    raise exception 'workq: the join of outbox message % cannot change (attach members when they are written)', old.id
        using errcode = 'WQJ05';
end
$$;
-- +goose StatementEnd

-- Fires only for statements that set join_id, which no workq statement does.
create trigger outbox_join_fixed
    before update of join_id on workq.outbox
    for each row
    when (old.join_id is distinct from new.join_id)
    execute function workq.workq_outbox_join_fixed();

-- A member deleted before it ended (a cancelled message) will never end: it
-- counts as failed. Retention deletes only finished rows, which skip this.
-- +goose StatementBegin
create function workq.workq_outbox_join_deleted()
returns trigger
language plpgsql volatile
as $$
declare
    j workq.outbox_joins%rowtype;
begin
    update workq.outbox_joins set failed_steps = failed_steps + 1, updated_at = now()
    where id = old.join_id
    returning * into j;
    if not found or j.status <> 0 then
        return null;
    end if;
    if j.on_member_failure = 2
       or (j.completed_steps + j.failed_steps >= j.expected_steps and j.on_member_failure = 1) then
        perform workq.workq_outbox_join_finish(j.id, 3::smallint, 'member_failed');
    elsif j.completed_steps + j.failed_steps >= j.expected_steps then
        perform workq.workq_outbox_join_finish(j.id, 2::smallint, null);
    end if;
    return null;
end
$$;
-- +goose StatementEnd

create trigger outbox_join_deleted
    after delete on workq.outbox
    for each row
    when (old.join_id is not null and old.status < 2)
    execute function workq.workq_outbox_join_deleted();

-- +goose Down
drop trigger outbox_join_deleted on workq.outbox;
drop function workq.workq_outbox_join_deleted();
drop trigger outbox_join_fixed on workq.outbox;
drop function workq.workq_outbox_join_fixed();
drop trigger outbox_join_attach on workq.outbox;
drop function workq.workq_outbox_join_attach();
drop trigger outbox_join_count on workq.outbox;
drop function workq.workq_outbox_join_count();
drop function workq.workq_outbox_join_finish(bigint, smallint, text);
drop index workq.outbox_joins_deadline;
alter table workq.outbox drop constraint if exists outbox_join_fk;
drop index if exists workq.outbox_join;
-- The column stays when the outbox write API's migration (00003) owns it;
-- its own Down drops it.
delete from workq.outbox_joins;
alter table workq.outbox_joins
    drop constraint outbox_joins_reason_ck,
    drop constraint outbox_joins_status_ck,
    drop constraint outbox_joins_final_ck,
    drop constraint outbox_joins_counts_ck,
    drop column on_fail_correlation_id,
    drop column on_fail_partition_key,
    drop column on_fail_headers,
    drop column on_fail_payload,
    drop column on_fail_topic,
    drop column on_fail_queue,
    drop column on_complete_correlation_id,
    drop column on_complete_partition_key,
    drop column on_complete_headers,
    drop column on_complete_payload,
    drop column on_complete_topic,
    drop column on_complete_queue,
    drop column outcome_message_id,
    drop column fail_reason,
    drop column deadline,
    drop column on_member_failure,
    drop column attached_steps,
    add column payload jsonb not null default '{}';
create table workq.outbox_join_members (
    join_id     bigint not null references workq.outbox_joins (id) on delete cascade,
    outbox_id   bigint not null references workq.outbox (id) on delete cascade,
    status      smallint not null default 0 check (status between 0 and 3),
    finished_at timestamptz,
    primary key (join_id, outbox_id)
);
create index outbox_join_members_outbox on workq.outbox_join_members (outbox_id);

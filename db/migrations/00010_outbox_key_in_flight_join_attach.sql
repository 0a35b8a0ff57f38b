-- At most one message of a partition key is in flight, enforced by the
-- database and not only by the ordered claim's choice of heads. A claimer
-- whose snapshot is older than a concurrent change (an operator's retry of
-- a message its key had skipped, racing a claim of the next message) could
-- otherwise take a second message of the key; with this index its claim
-- fails (unique violation) instead, and the next claim sees the key in
-- flight. The ordered claim also probes this index to pass over keys with a
-- message in flight. Heartbeats stay HOT: neither column changes.
--
-- The foreign key from outbox.join_id to outbox_joins goes: the attach
-- trigger (00004) already refuses a member of a join that does not exist,
-- joins are never deleted while members exist, and the key's RI trigger
-- fired on every outbox insert, joined or not.

-- Attaching a member no longer updates the join row (00004 incremented
-- outbox_joins.attached_steps there): that row lock was held until the
-- writer committed, so a completion that ended another member of the join,
-- and with it every other row of its batch, waited for the writer's
-- transaction. Attachers of one join now take turns on a transaction-level
-- advisory lock (fine under PgBouncer transaction pooling) and count the
-- members on the outbox_join index; completions never wait for them.
-- attached_steps is no longer maintained (OutboxJoinGet counts members).

-- +goose Up
create unique index outbox_key_in_flight on outbox (queue, partition_key)
    where status = 1 and partition_key is not null;
alter table outbox drop constraint if exists outbox_join_fk;

-- +goose StatementBegin
create or replace function workq_outbox_join_attach()
returns trigger
language plpgsql volatile
as $$
declare
    j outbox_joins%rowtype;
    members bigint;
begin
    if new.status >= 2 then
        raise exception 'workq: outbox message joins join % already finished', new.join_id
            using errcode = 'WQJ04';
    end if;
    -- 0x776b (wk): workq's advisory lock space; collisions of the hash only
    -- make two joins' attachers take turns.
    perform pg_advisory_xact_lock(30571, hashint8(new.join_id));
    select * into j from outbox_joins where id = new.join_id;
    if not found then
        raise exception 'workq: join % does not exist', new.join_id using errcode = 'WQJ01';
    elsif j.status <> 0 then
        raise exception 'workq: join % has ended (%)', new.join_id,
            case when j.status = 2 then 'completed' else 'failed: ' || j.fail_reason end
            using errcode = 'WQJ02';
    end if;
    -- A statement of its own, so a snapshot taken after the lock: it counts
    -- the members of every attacher that held the lock before, and this
    -- transaction's own (the whole insert, since this trigger runs after it).
    select count(*) into members from outbox where join_id = new.join_id;
    if members > j.expected_steps then
        raise exception 'workq: join % already has all % of its members', new.join_id, j.expected_steps
            using errcode = 'WQJ03';
    end if;
    return null;
end
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
create or replace function workq_outbox_join_attach()
returns trigger
language plpgsql volatile
as $$
declare
    j outbox_joins%rowtype;
begin
    if new.status >= 2 then
        raise exception 'workq: outbox message joins join % already finished', new.join_id
            using errcode = 'WQJ04';
    end if;
    update outbox_joins set attached_steps = attached_steps + 1, updated_at = now()
    where id = new.join_id and status = 0 and attached_steps < expected_steps;
    if found then
        return null;
    end if;
    select * into j from outbox_joins where id = new.join_id;
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
update outbox_joins j set attached_steps = (select count(*) from outbox o where o.join_id = j.id);
alter table outbox add constraint outbox_join_fk foreign key (join_id) references outbox_joins (id);
drop index outbox_key_in_flight;

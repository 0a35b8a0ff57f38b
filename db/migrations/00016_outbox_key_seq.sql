-- Per-partition-key order by a sequence taken in the writer's transaction
-- (issue 20), replacing (write_xid, id) gated by pg_snapshot_xmin: a key now
-- waits only for its own earlier writers, not for the oldest transaction of
-- the whole cluster. docs/outbox.md has the argument.
--
-- outbox_key_seqs holds one counter per (queue, partition key). Writing a
-- keyed message increments its key's counter (outbox_key_seq, a BEFORE INSERT
-- trigger; OutboxEnqueueMany does it once per key of a batch and sets key_seq
-- itself) and the row lock on the counter is held until the writer ends: a
-- second writer of the key waits, then numbers after the first's rows if it
-- committed, or reuses its numbers if it rolled back. So within a key,
-- key_seq is gap-free and in commit order, and a key's head is simply its
-- lowest key_seq among rows not done. Counters of keys with nothing pending
-- are pruned by retention (outbox_prune_key_seqs).
--
-- The migration runs outside a transaction so that the new index is built
-- concurrently (a plain build would block writes for a scan of the whole
-- table). Its steps:
--   1. the counter table, the key_seq column (metadata only), the prune
--      function;
--   2. one transaction (a DO block) that takes SHARE ROW EXCLUSIVE on the
--      outbox (writes, claims and completions wait; reads go on; it first
--      waits for open writers), numbers every pending keyed message per key
--      in the old order (write_xid, id), seeds the counters and creates the
--      trigger. It holds the lock for as long as numbering the backlog takes
--      (an update of every pending keyed row: about a second per 100,000);
--      delivered messages keep key_seq null;
--   3. the index (queue, partition_key, key_seq), unique over rows not done,
--      built concurrently under a temporary name, then swapped in for
--      outbox_ordered, and write_xid dropped (ACCESS EXCLUSIVE, a moment).
-- A run that failed at any point can run again: each step skips what is
-- done. Relays of the previous version fail their claims once write_xid is
-- gone (they name it): deploy the new version with the migration.

-- +goose NO TRANSACTION
-- +goose Up
create table if not exists workq.outbox_key_seqs (
    queue         text not null,
    partition_key text collate "C" not null,
    last_seq      bigint not null,
    updated_at    timestamptz not null default now(),
    primary key (queue, partition_key)
) with (fillfactor = 70); -- room for HOT updates: every keyed write updates its counter
alter table workq.outbox add column if not exists key_seq bigint;

-- outbox_key_seq numbers a keyed message: the next value of its key's
-- counter, whose row lock the writer then holds until it ends.
-- +goose StatementBegin
create or replace function workq.outbox_key_seq() returns trigger language plpgsql as $$
begin
    insert into workq.outbox_key_seqs as c (queue, partition_key, last_seq, updated_at)
    values (new.queue, new.partition_key, 1, now())
    on conflict (queue, partition_key) do update set last_seq = c.last_seq + 1, updated_at = now()
    returning c.last_seq into new.key_seq;
    return new;
end
$$;
-- +goose StatementEnd

-- outbox_prune_key_seqs deletes up to max_rows counters that were last used
-- more than older_than_ms ago and whose key has no message not done, and
-- returns how many. A deleted key starts again at 1, which is safe only
-- while no message of it is pending and no writer of it is open:
--   1. the first statement locks the candidates FOR UPDATE SKIP LOCKED,
--      passing over every counter an open writer holds;
--   2. the second runs on a new snapshot (READ COMMITTED: every statement
--      of a volatile function takes one), taken after those locks: a writer
--      that used a counter before its lock was taken has ended, so its
--      messages are visible here, and one that comes after waits for this
--      transaction (then, finding the counter gone, starts the key at 1).
-- Under REPEATABLE READ or SERIALIZABLE the first statement fails with a
-- serialization error instead of locking a counter written since the
-- transaction's snapshot. The age only keeps counters of active keys from
-- being deleted and recreated over and over; safety does not depend on it
-- (the counter's updated_at is the writer's transaction start, which can be
-- long before its commit).
-- +goose StatementBegin
create or replace function workq.outbox_prune_key_seqs(older_than_ms bigint, max_rows integer) returns bigint
language plpgsql as $$
declare
    qs text[];
    ks text[];
    n bigint;
begin
    select coalesce(array_agg(c.queue), '{}'), coalesce(array_agg(c.partition_key), '{}') into qs, ks
    from (
        select s.queue, s.partition_key from workq.outbox_key_seqs s
        where s.updated_at < now() - older_than_ms * interval '1 millisecond'
          and not exists (select 1 from workq.outbox o
                          where o.queue = s.queue and o.partition_key = s.partition_key and o.status <> 2)
        limit max_rows
        for update skip locked
    ) c;
    delete from workq.outbox_key_seqs s
    using unnest(qs, ks) as l(queue, partition_key)
    where s.queue = l.queue and s.partition_key = l.partition_key
      and not exists (select 1 from workq.outbox o
                      where o.queue = s.queue and o.partition_key = s.partition_key and o.status <> 2);
    get diagnostics n = row_count;
    return n;
end
$$;
-- +goose StatementEnd

-- +goose StatementBegin
do $$
begin
    lock table workq.outbox in share row exclusive mode;
    -- Number the pending keyed messages in the order the old claim used,
    -- after whatever a previous run of this migration numbered (the counter).
    if exists (select 1 from pg_attribute
               where attrelid = 'workq.outbox'::regclass and attname = 'write_xid' and not attisdropped) then
        update workq.outbox o set key_seq = r.n + coalesce(c.last_seq, 0)
        from (select p.id, p.queue, p.partition_key,
                     row_number() over (partition by p.queue, p.partition_key order by p.write_xid, p.id) as n
              from workq.outbox p
              where p.partition_key is not null and p.status <> 2 and p.key_seq is null) r
        left join workq.outbox_key_seqs c on c.queue = r.queue and c.partition_key = r.partition_key
        where o.id = r.id;
    end if;
    insert into workq.outbox_key_seqs as c (queue, partition_key, last_seq, updated_at)
    select o.queue, o.partition_key, max(o.key_seq), now() from workq.outbox o
    where o.partition_key is not null and o.status <> 2 and o.key_seq is not null
    group by o.queue, o.partition_key
    on conflict (queue, partition_key) do update set last_seq = greatest(c.last_seq, excluded.last_seq);
    drop trigger if exists outbox_key_seq on workq.outbox;
    -- Rows that come with a key_seq (OutboxEnqueueMany numbers a batch per
    -- key itself, one counter update per key) are left as they are.
    create trigger outbox_key_seq before insert on workq.outbox
        for each row when (new.partition_key is not null and new.key_seq is null)
        execute function workq.outbox_key_seq();
end
$$;
-- +goose StatementEnd

drop index concurrently if exists workq.outbox_ordered_next;
create unique index concurrently outbox_ordered_next on workq.outbox (queue, partition_key, key_seq)
    where partition_key is not null and status <> 2;
-- +goose StatementBegin
do $$
begin
    drop index if exists workq.outbox_ordered;
    alter index workq.outbox_ordered_next rename to outbox_ordered;
end
$$;
-- +goose StatementEnd
alter table workq.outbox drop column if exists write_xid;

-- +goose Down
-- write_xid again, with each key's pending messages in key_seq order: values
-- just below the current transaction id (the re-base of docs/outbox.md),
-- which the old claim treats as long committed. Everything else gets the
-- current id. Fails (cast of a negative number) if one key has more pending
-- messages than the cluster has used transaction ids.
alter table workq.outbox add column if not exists write_xid xid8 not null default pg_current_xact_id();
-- +goose StatementBegin
do $$
begin
    lock table workq.outbox in share row exclusive mode;
    update workq.outbox o set write_xid = (pg_current_xact_id()::text::bigint - r.cnt + r.n - 1)::text::xid8
    from (select p.id, row_number() over (partition by p.queue, p.partition_key order by p.key_seq, p.id) as n,
                 count(*) over (partition by p.queue, p.partition_key) as cnt
          from workq.outbox p where p.partition_key is not null and p.status <> 2) r
    where o.id = r.id;
    drop trigger if exists outbox_key_seq on workq.outbox;
end
$$;
-- +goose StatementEnd
drop index concurrently if exists workq.outbox_ordered_next;
create index concurrently outbox_ordered_next on workq.outbox (queue, partition_key, write_xid, id)
    where partition_key is not null and status <> 2;
-- +goose StatementBegin
do $$
begin
    drop index if exists workq.outbox_ordered;
    alter index workq.outbox_ordered_next rename to outbox_ordered;
end
$$;
-- +goose StatementEnd
alter table workq.outbox drop column if exists key_seq;
drop function if exists workq.outbox_prune_key_seqs(bigint, integer);
drop function if exists workq.outbox_key_seq();
drop table if exists workq.outbox_key_seqs;

-- The outbox relay (issue 8): message ids chosen by the writer, joins, and
-- per-partition-key ordering. docs/outbox.md explains the design.
--
-- write_xid is the top-level transaction id of the writer
-- (pg_current_xact_id(), the same for every row a transaction writes). The
-- order of messages within a partition key is (write_xid, id): id alone is
-- not write order, because a transaction can take its xid before another
-- and its ids after. A keyed message is claimable only when it is its key's
-- first row in that order among rows not done, and its write_xid is below
-- the claim's snapshot xmin: then every transaction that could still add an
-- earlier message of the key has ended (docs/outbox.md has the argument).
--
-- join_id names the fan-in join a message belongs to (no foreign key here:
-- the joins migration adds it with its trigger).

-- +goose Up
-- Partition keys compare bytewise ("C"): the claim walks keys in index order
-- and the relay remembers where it stopped, in Go, which compares bytes too.
alter table workq.outbox alter column partition_key type text collate "C";
alter table workq.outbox add column write_xid xid8 not null default pg_current_xact_id();
alter table workq.outbox add column join_id bigint;

-- The unkeyed claim keeps its order (priority desc, id) over unkeyed rows only.
drop index workq.outbox_claim;
create index outbox_claim on workq.outbox (queue, priority desc, id) where status = 0 and partition_key is null;
-- The ordered claim: the keys of a queue (skip scan) and each key's first
-- message in write order, over rows not done (ready, in progress, failed).
create index outbox_ordered on workq.outbox (queue, partition_key, write_xid, id)
    where partition_key is not null and status <> 2;

-- +goose Down
drop index workq.outbox_ordered;
drop index workq.outbox_claim;
create index outbox_claim on workq.outbox (queue, priority desc, id) where status = 0;
alter table workq.outbox drop column join_id;
alter table workq.outbox drop column write_xid;
alter table workq.outbox alter column partition_key type text collate "default";

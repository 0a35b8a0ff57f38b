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
--
-- Retention never deletes a failed message with a partition key (it may be
-- blocking its key: OutboxDeleteFinished). outbox_finished leaves those rows
-- out, so that retention does not read past a growing number of them on
-- every batch.

-- +goose Up
create unique index outbox_key_in_flight on workq.outbox (queue, partition_key)
    where status = 1 and partition_key is not null;
alter table workq.outbox drop constraint if exists outbox_join_fk;
drop index workq.outbox_finished;
create index outbox_finished on workq.outbox (finished_at)
    where status = 2 or (status = 3 and partition_key is null);

-- +goose Down
drop index workq.outbox_finished;
create index outbox_finished on workq.outbox (finished_at) where status >= 2;
alter table workq.outbox add constraint outbox_join_fk foreign key (join_id) references workq.outbox_joins (id);
drop index workq.outbox_key_in_flight;

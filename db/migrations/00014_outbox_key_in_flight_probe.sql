-- outbox_key_in_flight gets a predicate that only the ordered claim's
-- in-flight probe implies, so that the planner cannot answer that probe from
-- another index. The rows are the same: `owner_token is not null` holds
-- exactly when `status = 1` (the lease CHECK constraint outbox_lease_ck).
--
-- With the predicate `status = 1`, the probe (`status = 1` and the key) also
-- matched outbox_in_progress (`(id) where status = 1`). When the statistics
-- were taken while nothing was in flight (a VACUUM ANALYZE before a burst,
-- as in `workq bench`), both partial indexes read as empty, the planner
-- costed outbox_in_progress lower, and every probe scanned every in-flight
-- row of the queue (and its dead entries): 0.2-0.3 ms per key, 200-300 ms of
-- a claim of 1,000 keyed heads (docs/throughput.md). The probe now writes
-- `owner_token is not null`, which implies this index's predicate and not
-- outbox_in_progress's, so it is always an index probe on (queue, key).
--
-- The new index is built concurrently (a unique index build scans the whole
-- table; a plain CREATE INDEX would block writes to the outbox for that
-- long) under a temporary name, then swapped in by one DO block (one
-- transaction: drop the old index, rename the new one; it holds the
-- outbox's lock only for that). So one of the two always enforces the rule,
-- and a run that failed at any point can run again: it drops only a
-- leftover outbox_key_in_flight_next (invalid, or valid beside the old
-- index), and if the swap had committed, it builds and swaps once more.

-- +goose NO TRANSACTION
-- +goose Up
drop index concurrently if exists workq.outbox_key_in_flight_next;
create unique index concurrently outbox_key_in_flight_next on workq.outbox (queue, partition_key)
    where owner_token is not null and partition_key is not null;
-- +goose StatementBegin
do $$
begin
    drop index if exists workq.outbox_key_in_flight;
    alter index workq.outbox_key_in_flight_next rename to outbox_key_in_flight;
end
$$;
-- +goose StatementEnd

-- +goose Down
drop index concurrently if exists workq.outbox_key_in_flight_next;
create unique index concurrently outbox_key_in_flight_next on workq.outbox (queue, partition_key)
    where status = 1 and partition_key is not null;
-- +goose StatementBegin
do $$
begin
    drop index if exists workq.outbox_key_in_flight;
    alter index workq.outbox_key_in_flight_next rename to outbox_key_in_flight;
end
$$;
-- +goose StatementEnd

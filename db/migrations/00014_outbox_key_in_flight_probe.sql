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
-- Built concurrently (a unique index build scans the whole table; a plain
-- CREATE INDEX would block writes to the outbox for that long). Both indexes
-- enforce the same rule while they coexist. A failed run leaves at most an
-- invalid outbox_key_in_flight_next, which the next run drops.

-- +goose NO TRANSACTION
-- +goose Up
drop index concurrently if exists outbox_key_in_flight_next;
create unique index concurrently outbox_key_in_flight_next on outbox (queue, partition_key)
    where owner_token is not null and partition_key is not null;
drop index concurrently if exists outbox_key_in_flight;
alter index outbox_key_in_flight_next rename to outbox_key_in_flight;

-- +goose Down
drop index concurrently if exists outbox_key_in_flight_next;
create unique index concurrently outbox_key_in_flight_next on outbox (queue, partition_key)
    where status = 1 and partition_key is not null;
drop index concurrently if exists outbox_key_in_flight;
alter index outbox_key_in_flight_next rename to outbox_key_in_flight;

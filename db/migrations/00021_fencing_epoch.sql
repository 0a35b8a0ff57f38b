-- Fencing numbers never go backwards across a failover (issue 22).
--
-- A work row's lease_version (its run ids, its fencing against a stale
-- holder) and a named lock's token (package lock) each grow by one per
-- claim. Promote a standby that had not received the last commits (an
-- asynchronous standby, or a synchronous one with synchronous_commit off
-- for the session) and the new primary hands out the lost numbers again,
-- to different holders: a fencing token that was already used, and a run
-- id naming two attempts.
--
-- workq_epoch is (timeline - 1) << 32, the current WAL insert timeline in
-- the high 32 bits. Every promotion starts a timeline greater than any the
-- cluster used before (pg_ctl promote, Patroni and pg_auto_failover all
-- promote this way), so every statement that bumps one of these numbers
-- now sets greatest(old + 1, workq_epoch()): on a new timeline the first
-- bump jumps above every number the old one could have handed out (fewer
-- than 2^32 bumps of one row per timeline), whatever the new primary had
-- received. On timeline 1 the epoch is 0, so a cluster that never failed
-- over keeps its numbers as they were; greatest() keeps them growing where
-- the timeline goes back (a dump restored into a new cluster).
--
-- The timeline is read from the name of the WAL file holding the insert
-- position: pg_walfile_name names it with the insert timeline, which a
-- promotion changes before the server accepts writes, without waiting for
-- a checkpoint (pg_control_checkpoint()'s timeline would lag until the
-- end-of-recovery checkpoint finishes; internal/pgembed's
-- TestPromotedTimelineInWalfileName checks this). Both functions are executable by
-- PUBLIC and fail during recovery, where the statements that call this
-- fail anyway (read-only transaction). Statements call it as a scalar
-- subquery, (select workq.workq_epoch()), so it runs once per statement
-- (an initplan), not once per row.

-- +goose Up
create function workq.workq_epoch()
returns bigint
language sql volatile
as $$
    select (('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint - 1) << 32
$$;

-- +goose Down
drop function workq.workq_epoch();

-- Timers: a cancelled timer is recorded apart from one that failed.
--
-- A cancel ends a ready timer as failed (status 3, so the state table stays
-- 0 ready, 1 in progress, 2 done, 3 failed, and the lease engine, retention
-- and stats treat it like any finished row) and stamps cancelled_at with the
-- same now() as finished_at. "Cancelled" is status 3 with cancelled_at =
-- finished_at: an operator revive (lease.Engine.Revive) of a cancelled timer
-- puts it back to ready, and should it fail again its new finished_at no
-- longer matches, so it reads as failed, not as cancelled, without a trigger
-- on the hot path. last_error is 'cancelled' as well, for readers of the
-- lease columns alone. A nullable column without a default: adding it
-- rewrites nothing, and it is in no index, so claims and completions stay
-- HOT-eligible as before.

-- +goose Up
alter table workq.timers add column cancelled_at timestamptz;

-- +goose Down
alter table workq.timers drop column cancelled_at;

-- A queue with a global limit counts its leases by an ordered index scan
-- (issue 32; docs/design.md §4.3), as the reap finds its candidates since
-- 00030.
--
-- workq_queue_budget counts the in-progress rows of a queue with a limit W
-- (queue_limits) on every claim of that queue. PostgreSQL planned the
-- count as a bitmap scan of <T>_in_progress, which reads the heap page of
-- every entry a claim left there until VACUUM, the rows long completed
-- included, on every call, and never marks one dead. The function's own
-- settings now rule out the bitmap and the sequential scan: the index scan
-- marks those entries dead as it passes, so the next claim's count steps
-- over them. Its other reads (the queue's pause and limit) are primary-key
-- lookups either way.
--
-- +goose Up
alter function workq.workq_queue_budget(text, text, integer) set enable_bitmapscan = off set enable_seqscan = off;

-- +goose Down
alter function workq.workq_queue_budget(text, text, integer) reset enable_bitmapscan reset enable_seqscan;

-- A concurrency rule of a queue or a kind counts its items in progress by
-- an ordered index scan (issue 32; docs/design.md §4.3), as the reap
-- (00030) and a queue's global limit W (00031) do.
--
-- workq_flow_left, which a flow claim calls for its queue and for every
-- kind with a rule, counts the scope's in-progress rows when the rule has
-- a concurrency. For a queue or a kind that count reads <T>_in_progress
-- (id) where status = 1 and filters by queue and kind in the heap.
-- PostgreSQL planned it as a bitmap heap scan, which reads the heap page
-- of every entry of the index on every call, those of rows long completed
-- included (the index keeps them until VACUUM), and never marks one dead:
-- 409 heap pages on every claim over 20,000 completed rows' entries. The
-- function's own settings now rule out the bitmap and the sequential scan;
-- the index scan marks those entries dead as it passes, so the next claim
-- steps over them. Its other reads (the rule and the scope's state) are
-- primary-key lookups. The inbox's count for one source can no longer
-- combine inbox_source_message with the in-progress index (a BitmapAnd):
-- it reads the heap of every live lease in the inbox, as the other
-- tables' counts do in theirs. A rule per key is counted by
-- workq_flow_pick (00033).
--
-- +goose Up
alter function workq.workq_flow_left(text, text, text, text) set enable_bitmapscan = off set enable_seqscan = off;

-- +goose Down
alter function workq.workq_flow_left(text, text, text, text) reset enable_bitmapscan reset enable_seqscan;

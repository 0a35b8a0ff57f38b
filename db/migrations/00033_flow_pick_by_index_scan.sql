-- A keyed flow claim counts each key's items in progress by an index
-- scan (issue 32; docs/design.md §4.3), as 00030-00032 made the reap, a
-- queue's global limit W and a concurrency rule of a queue or a kind do.
--
-- workq_flow_pick, the flow claim of job runs, counts the in-progress
-- rows of the keys it visits when the queue has a rule per key with a
-- concurrency (job_runs_key_running, (queue, limit_key) where status = 1).
-- Which scan PostgreSQL chose depended on the table's statistics: taken
-- while many rows were in progress (a burst, as autovacuum's analyze can
-- catch it), it planned a bitmap heap scan, which reads the heap page of
-- every entry of the keys on every claim, those of rows long completed
-- included (the index keeps them until VACUUM), and never marks one dead;
-- with no statistics, or fresh ones, an index-only scan, which marks them
-- as it passes. The function's own settings now rule out the bitmap and
-- the sequential scan, for every statement it runs and the functions it
-- calls: each is an index scan by design (test/flow_plan_test.go plans
-- them at a million rows), and the flow tables are read by primary key.
--
-- +goose Up
alter function workq.workq_flow_pick(text, text, integer, text) set enable_bitmapscan = off set enable_seqscan = off;

-- +goose Down
alter function workq.workq_flow_pick(text, text, integer, text) reset enable_bitmapscan reset enable_seqscan;

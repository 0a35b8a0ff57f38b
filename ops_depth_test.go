package workq_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/workq/workq"
)

// QueueDepths reads every shard's backlog, a row per shard and queue;
// EndedBetween and DatabaseTime read one database's clock and archive,
// and refuse a sharded Client.
func TestClientQueueDepthsAndEnded(t *testing.T) {
	ctx := context.Background()
	for name, c := range opsClients(t) {
		t.Run(name, func(t *testing.T) {
			d, err := c.QueueDepths(ctx)
			if err != nil || len(d) != 0 {
				t.Fatalf("new database: %v %v", d, err)
			}
			var refs []workq.ItemRef
			for i := range 3 {
				refs = append(refs, put(t, c, workq.TableJobRuns, "mail", "", i))
			}
			fail(t, c, refs[0])
			d, err = c.QueueDepths(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var ready, failed int64
			for _, q := range d {
				if q.Table != workq.TableJobRuns || q.Queue != "mail" || q.Shard == "" {
					t.Errorf("row %+v, want job_runs/mail with its shard", q)
				}
				ready += q.Ready
				failed += q.Failed
			}
			if ready != 2 || failed != 1 {
				t.Fatalf("depths %+v: %d ready, %d failed, want 2 and 1", d, ready, failed)
			}

			for _, sh := range c.Shards() {
				sc, err := c.Shard(sh)
				if err != nil {
					t.Fatal(err)
				}
				now, err := sc.DatabaseTime(ctx)
				if err != nil || time.Since(now).Abs() > time.Minute {
					t.Fatalf("shard %s: database time %s %v", sh, now, err)
				}
				ended, err := sc.EndedBetween(ctx, now.Add(-time.Hour), now)
				if err != nil || len(ended) != 0 {
					t.Fatalf("shard %s: ended %+v %v, want none (no attempt ran)", sh, ended, err)
				}
				if _, err := sc.EndedBetween(ctx, now, now.Add(-time.Second)); !errors.Is(err, workq.ErrInvalid) {
					t.Errorf("until before after: %v, want ErrInvalid", err)
				}
			}
			if len(c.Shards()) > 1 {
				if _, err := c.DatabaseTime(ctx); !errors.Is(err, workq.ErrInvalid) {
					t.Errorf("DatabaseTime of a sharded Client: %v, want ErrInvalid", err)
				}
				if _, err := c.EndedBetween(ctx, time.Time{}, time.Now()); !errors.Is(err, workq.ErrInvalid) {
					t.Errorf("EndedBetween of a sharded Client: %v, want ErrInvalid", err)
				}
			}
		})
	}
}

package workq_test

import (
	"context"
	"errors"
	"testing"

	"github.com/workq/workq"
)

func TestClientActMatching(t *testing.T) {
	ctx := context.Background()
	for name, c := range opsClients(t) {
		t.Run(name, func(t *testing.T) {
			var refs []workq.ItemRef
			for i := range 4 {
				refs = append(refs, put(t, c, workq.TableJobRuns, "matching", "", i))
			}
			shard := refs[0].Shard
			n := 0
			for _, r := range refs {
				if r.Shard == shard {
					n++
				}
			}
			p := workq.ListParams{Table: workq.TableJobRuns, Queue: "matching"}
			if len(c.Shards()) > 1 {
				if _, err := c.CancelMatching(ctx, p, 0, nil); !errors.Is(err, workq.ErrInvalid) {
					t.Fatalf("CancelMatching without a shard: %v, want ErrInvalid", err)
				}
				p.Shard = shard
			}
			for what, bad := range map[string]workq.ListParams{
				"no table":  {Queue: "matching", Shard: p.Shard},
				"bad table": {Table: "jobs", Shard: p.Shard},
				"cursor":    {Table: workq.TableJobRuns, Shard: p.Shard, Cursor: "nope"},
			} {
				if _, err := c.DeleteMatching(ctx, bad, 0); !errors.Is(err, workq.ErrInvalid) {
					t.Errorf("DeleteMatching %s: %v, want ErrInvalid", what, err)
				}
			}
			if _, err := c.RetryMatching(ctx, p, workq.MaxMatchingMax+1, nil); !errors.Is(err, workq.ErrInvalid) {
				t.Errorf("RetryMatching over the cap: %v", err)
			}

			first, err := c.CancelMatching(ctx, p, 1, &workq.ActionOpts{Actor: "ops:bulk", Reason: "test"})
			if err != nil || first.Applied != 1 || n > 1 && first.Next == "" {
				t.Fatalf("CancelMatching max 1: %+v %v (%d on the shard)", first, err, n)
			}
			p.Cursor = first.Next
			rest, err := c.CancelMatching(ctx, p, 0, nil)
			if err != nil || rest.Applied != n-1 || rest.Next != "" {
				t.Fatalf("CancelMatching from %q: %+v %v, want %d applied", first.Next, rest, err, n-1)
			}
			p.Cursor = ""
			if again, err := c.RetryMatching(ctx, p, 0, nil); err != nil || again.Applied != n {
				t.Fatalf("RetryMatching the cancelled: %+v %v", again, err)
			}
			if del, err := c.DeleteMatching(ctx, p, 0); err != nil || del.Applied != 0 || del.Skipped != n {
				t.Fatalf("DeleteMatching ready items: %+v %v", del, err)
			}
			for _, r := range refs {
				if it, err := c.Get(ctx, r); err != nil || it.Status != workq.StateReady {
					t.Errorf("%v: %+v %v", r, it, err)
				}
			}
		})
	}
}

package shardlist_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/workq/workq/internal/shardlist"
)

// Each answers for every shard in the shards' order, runs them at once,
// and bounds each by the timeout without cutting the others short.
func TestEach(t *testing.T) {
	shards := []shardlist.Shard{{Name: "a"}, {Name: "slow"}, {Name: "c"}}
	boom := errors.New("boom")
	cases := []struct {
		name    string
		timeout time.Duration
		f       func(ctx context.Context, sh shardlist.Shard) (string, error)
		want    map[string]string
		errs    map[string]error
	}{
		{"every shard in order", 0, func(_ context.Context, sh shardlist.Shard) (string, error) { return sh.Name + "!", nil },
			map[string]string{"a": "a!", "slow": "slow!", "c": "c!"}, nil},
		{"an error stays its shard's", 0, func(_ context.Context, sh shardlist.Shard) (string, error) {
			if sh.Name == "c" {
				return "", boom
			}
			return sh.Name, nil
		}, map[string]string{"a": "a", "slow": "slow", "c": ""}, map[string]error{"c": boom}},
		{"the timeout bounds each shard", 50 * time.Millisecond, func(ctx context.Context, sh shardlist.Shard) (string, error) {
			if sh.Name == "slow" {
				<-ctx.Done()
				return "", ctx.Err()
			}
			return sh.Name, nil
		}, map[string]string{"a": "a", "slow": "", "c": "c"}, map[string]error{"slow": context.DeadlineExceeded}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := shardlist.Each(context.Background(), shards, tc.timeout, tc.f)
			if len(got) != len(shards) {
				t.Fatalf("%d answers for %d shards", len(got), len(shards))
			}
			for i, a := range got {
				if a.Shard != shards[i].Name || a.Value != tc.want[a.Shard] || !errors.Is(a.Err, tc.errs[a.Shard]) || (a.Err == nil) != (tc.errs[a.Shard] == nil) {
					t.Errorf("answer %d: %+v, want shard %s value %q err %v", i, a, shards[i].Name, tc.want[shards[i].Name], tc.errs[shards[i].Name])
				}
			}
		})
	}
	// At once: three shards that each wait for the others to start.
	started := make(chan struct{}, len(shards))
	got := shardlist.Each(context.Background(), shards, 0, func(ctx context.Context, sh shardlist.Shard) (int, error) {
		started <- struct{}{}
		deadline := time.After(30 * time.Second)
		for len(started) < len(shards) {
			select {
			case <-deadline:
				return 0, errors.New("the others never started: not run at once")
			case <-time.After(time.Millisecond):
			}
		}
		return 1, nil
	})
	for _, a := range got {
		if a.Err != nil {
			t.Fatal(a.Err)
		}
	}
}

package workq_test

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/workq/workq"
)

// Rendezvous hashing: a key always goes to the same shard, whatever the
// order of the names; adding a shard moves only the keys it wins (about
// 1/N), removing one moves only its own; keys spread evenly.
func TestShardOfRendezvous(t *testing.T) {
	const keys = 20000
	cases := []struct {
		name        string
		before      []string
		after       []string
		wantMoveMin float64 // fraction of keys that move, bounds
		wantMoveMax float64
	}{
		{"same shards", []string{"a", "b", "c"}, []string{"c", "a", "b"}, 0, 0},
		{"add a 2nd", []string{"s1"}, []string{"s1", "s2"}, 0.45, 0.55},
		{"add a 4th", []string{"s1", "s2", "s3"}, []string{"s1", "s2", "s3", "s4"}, 0.22, 0.28},
		{"add a 9th", []string{"1", "2", "3", "4", "5", "6", "7", "8"}, []string{"1", "2", "3", "4", "5", "6", "7", "8", "9"}, 0.09, 0.13},
		{"remove one of 4", []string{"eu", "us", "ap", "sa"}, []string{"eu", "us", "ap"}, 0.22, 0.28},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			moved := 0
			count := map[string]int{}
			for i := range keys {
				k := fmt.Sprintf("order-%d", i)
				a, b := workq.ShardOf(tc.before, k), workq.ShardOf(tc.after, k)
				if again := workq.ShardOf(tc.before, k); again != a {
					t.Fatalf("key %s: %s then %s", k, a, again)
				}
				count[b]++
				if a == b {
					continue
				}
				moved++
				// A key moves only to a new shard, or off a removed one.
				if slices.Contains(tc.before, b) && slices.Contains(tc.after, a) {
					t.Fatalf("key %s moved from %s to %s, both in both sets", k, a, b)
				}
			}
			frac := float64(moved) / keys
			if frac < tc.wantMoveMin || frac > tc.wantMoveMax {
				t.Errorf("%.3f of the keys moved, want %.2f-%.2f", frac, tc.wantMoveMin, tc.wantMoveMax)
			}
			even := float64(keys) / float64(len(tc.after))
			for _, n := range tc.after {
				if d := math.Abs(float64(count[n])-even) / even; d > 0.1 {
					t.Errorf("shard %s got %d keys, %.0f%% off an even %f", n, count[n], d*100, even)
				}
			}
		})
	}
	if got := workq.ShardOf(nil, "k"); got != "" {
		t.Errorf("no shards: %q", got)
	}
	// Pinned: the placement is part of the stored layout and must never
	// change between versions.
	names := []string{"s1", "s2", "s3", "s4"}
	for k, want := range map[string]string{"order-1": "s1", "order-2": "s3", "tenant-acme": "s1"} {
		if got := workq.ShardOf(names, k); got != want {
			t.Errorf("ShardOf(%v, %q) = %s, want %s: the placement of stored keys changed", names, k, got, want)
		}
	}
}

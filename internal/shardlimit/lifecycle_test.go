package shardlimit_test

import (
	"testing"
	"time"

	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/shardlimit"
	"github.com/workq/workq/internal/startstop/startstoptest"
	"github.com/workq/workq/internal/testdb"
)

// The rebalancer keeps the one lifecycle of package startstop: it starts
// once, Stop before Start is startstop.ErrNotStarted, Stop is idempotent.
func TestRebalancerLifecycle(t *testing.T) {
	r, err := shardlimit.New([]shardlimit.Shard{{Name: "only", DB: testdb.Pool(t)}}, shardlimit.Options{
		Limits: []shardlimit.Limit{{Table: lease.JobRuns, Queue: "lifecycle", W: 1}}, Interval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	startstoptest.Check(t, r)
}

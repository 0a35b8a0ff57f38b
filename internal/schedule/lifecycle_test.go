package schedule_test

import (
	"testing"
	"time"

	"github.com/workq/workq/internal/schedule"
	"github.com/workq/workq/internal/startstop/startstoptest"
	"github.com/workq/workq/internal/testdb"
)

// The scheduler keeps the one lifecycle of package startstop: it starts
// once, Stop before Start is ErrNotRunning (startstop.ErrNotStarted), Stop
// is idempotent.
func TestSchedulerLifecycle(t *testing.T) {
	s, err := schedule.NewScheduler(testdb.Pool(t), schedule.SchedulerOptions{Interval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	startstoptest.Check(t, s)
}

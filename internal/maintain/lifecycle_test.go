package maintain_test

import (
	"context"
	"testing"
	"time"

	"github.com/workq/workq/internal/maintain"
	"github.com/workq/workq/internal/startstop/startstoptest"
	"github.com/workq/workq/internal/testdb"
)

// The service keeps the one lifecycle of package startstop: it starts
// once, Stop before Start is startstop.ErrNotStarted, Stop is idempotent.
func TestServiceLifecycle(t *testing.T) {
	s := maintain.New(testdb.Pool(t), maintain.Options{RetryInterval: 50 * time.Millisecond})
	if err := s.Add(maintain.Task{Name: "noop", Every: 10 * time.Millisecond,
		Run: func(context.Context, int64) (int64, error) { return 0, nil }}); err != nil {
		t.Fatal(err)
	}
	startstoptest.Check(t, s)
}

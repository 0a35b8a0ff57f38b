package workq

import (
	"slices"
	"testing"

	"github.com/workq/workq/internal/lease"
)

// The retention task deletes the finished items of every kind but the
// inbox, whose de-duplication window deletes its own (the list the
// maintenance named by hand before the registry).
func TestRetainedTables(t *testing.T) {
	want := []lease.Table{lease.JobRuns, lease.Outbox, lease.Timers}
	if got := retainedTables(); !slices.Equal(got, want) {
		t.Errorf("retainedTables() = %v, want %v", got, want)
	}
}

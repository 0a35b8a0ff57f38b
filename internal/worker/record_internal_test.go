package worker

import (
	"testing"

	"github.com/workq/workq/internal/lease"
)

// The drain's result must end an attempt's record whichever side comes
// first: the handler goroutine opening the record, or the drain's completion
// (a flush can finish before a handler goroutine that passed its state check
// has opened the record). Exactly one end, with the drain's result.
func TestAttemptRecordEndsOnceInEitherOrder(t *testing.T) {
	for _, drainFirst := range []bool{true, false} {
		r := &attempt{}
		var ended []Result
		end := func(res Result) { ended = append(ended, res) }
		res := Result{Outcome: lease.Released, Applied: true, Status: lease.StatusReady}
		if drainFirst {
			r.endRecord(res)
			r.setRecord(end)
		} else {
			r.setRecord(end)
			r.endRecord(res)
		}
		if len(ended) != 1 || ended[0].Outcome != res.Outcome || ended[0].Status != res.Status || !ended[0].Applied {
			t.Errorf("drain first %v: record ended %d times with %+v, want once with %+v", drainFirst, len(ended), ended, res)
		}
	}
}

package timers

import "github.com/workq/workq/workqtype"

// Ref is the ItemRef of the timer Schedule wrote, with its shard: the
// argument of the Client's Get, Attempts, Retry, Cancel and Delete
// (workq.ItemRef is this type).
func (s Scheduled) Ref() workqtype.ItemRef {
	return workqtype.ItemRef{Table: workqtype.TableTimers, ID: s.ID, Shard: s.Shard}
}

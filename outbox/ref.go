package outbox

import "github.com/workq/workq/workqtype"

// Ref is the ItemRef of the message Send wrote, with its shard: the
// argument of the Client's Get, Attempts, Retry, Cancel and Delete
// (workq.ItemRef is this type).
func (s Sent) Ref() workqtype.ItemRef {
	return workqtype.ItemRef{Table: workqtype.TableOutbox, ID: s.ID, Shard: s.Shard}
}

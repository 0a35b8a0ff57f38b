package inbox

import "github.com/workq/workq/workqtype"

// Ref is the ItemRef of the stored message Receive wrote or found (a
// duplicate's or a conflict's: the message received before), with its
// shard: the argument of the Client's Get, Attempts, Retry, Cancel and
// Delete (workq.ItemRef is this type).
func (r Received) Ref() workqtype.ItemRef {
	return workqtype.ItemRef{Table: workqtype.TableInbox, ID: r.ID, Shard: r.Shard}
}

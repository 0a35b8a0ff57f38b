package workq

// Ref is the ItemRef of the item being worked, with its shard: what
// Get, Attempts, Retry, Cancel and Delete take (an Event's Work, a work
// middleware's WorkInfo).
func (i WorkInfo) Ref() ItemRef { return ItemRef{Table: Table(i.Table), ID: i.ID, Shard: i.Shard} }

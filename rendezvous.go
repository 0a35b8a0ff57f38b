package workq

import "github.com/workq/workq/workqtype"

// rendezvous returns the index of the name that key goes to (names not
// empty): workqtype.ShardIndex, rendezvous (highest-random-weight) hashing.
func rendezvous(names []string, key string) int { return workqtype.ShardIndex(names, key) }

// ShardOf returns the shard among names that key goes to by rendezvous
// hashing, as a sharded Client places keyed work (see NewShardedClient);
// "" when names is empty. It depends on the names only, not their order.
func ShardOf(names []string, key string) string { return workqtype.ShardOf(names, key) }

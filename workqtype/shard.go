package workqtype

import "github.com/google/uuid"

// Rendezvous (highest-random-weight) hashing places a key on the shard
// whose name scores highest with it (workq.NewShardedClient, the API over
// shards). Adding a shard moves only the keys the new shard now wins
// (about 1/N of them) and removing one moves only its own; the other keys
// stay where they are. The score is FNV-1a 64 of name, a NUL and key,
// finished with splitmix64's mixer: it is part of the stored layout (a
// key's shard), so it never changes.

const (
	fnvOffset64 = 14695981039346656037
	fnvPrime64  = 1099511628211
)

// rendezvousScore is the weight of (shard name, key).
func rendezvousScore(name, key string) uint64 {
	h := uint64(fnvOffset64)
	for i := 0; i < len(name); i++ {
		h ^= uint64(name[i])
		h *= fnvPrime64
	}
	h *= fnvPrime64 // the NUL between name and key (h ^= 0)
	for i := 0; i < len(key); i++ {
		h ^= uint64(key[i])
		h *= fnvPrime64
	}
	// splitmix64's finalizer: FNV's low bits alone spread short keys
	// poorly.
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return h
}

// ShardIndex returns the index in names of the shard that key goes to by
// rendezvous hashing (-1 for no names); ties, which need a 64-bit
// collision, go to the smaller name.
func ShardIndex(names []string, key string) int {
	if len(names) == 0 {
		return -1
	}
	best, bestScore := 0, rendezvousScore(names[0], key)
	for i := 1; i < len(names); i++ {
		s := rendezvousScore(names[i], key)
		if s > bestScore || s == bestScore && names[i] < names[best] {
			best, bestScore = i, s
		}
	}
	return best
}

// ShardOf returns the shard among names that key goes to ("" for none).
func ShardOf(names []string, key string) string {
	if i := ShardIndex(names, key); i >= 0 {
		return names[i]
	}
	return ""
}

// The keys that place work on a shard, one per kind of key: a job's dedup
// key, an outbox partition key, an inbox (source, message id), a schedule's
// name. (A unique job's key is its unique key without the period; an
// outbox message's is ShardKeyOutbox.)
func ShardKeyDedup(key string) string { return "dedup\x00" + key }

// ShardKeyPartition is the route key of an outbox partition key
// (workq.PartitionKey).
func ShardKeyPartition(key string) string { return "partition\x00" + key }

// ShardKeyLimit is the route key of a job's limit key (workq.LimitKey),
// for a job with neither a dedup key nor unique options.
func ShardKeyLimit(key string) string { return "limit\x00" + key }

// ShardKeyInbox is the route key of an inbox message, its (source, message
// id) (workq.InboxKey).
func ShardKeyInbox(source, messageID string) string {
	return "inbox\x00" + source + "\x00" + messageID
}

// ShardKeySchedule is the route key of a schedule's name
// (workq.ScheduleKey).
func ShardKeySchedule(name string) string { return "schedule\x00" + name }

// ShardKeyOutbox is the route key of an outbox message: its partition key
// (ShardKeyPartition) when it has one; else, when the caller set its
// MessageID, a key of that id, so a retry of the same MessageID lands on
// the shard that holds the first and fails there with the outbox's
// duplicate-id error (outbox.ErrDuplicateMessageID); else "" (no key: the
// message goes round-robin). A message id is unique per shard only when
// its messages are routed by it: the same id under two partition keys may
// be stored on two shards.
func ShardKeyOutbox(partitionKey string, messageID uuid.UUID) string {
	switch {
	case partitionKey != "":
		return ShardKeyPartition(partitionKey)
	case messageID != uuid.Nil:
		return "msgid\x00" + messageID.String()
	}
	return ""
}

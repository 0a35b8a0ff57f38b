package workq

// Rendezvous (highest-random-weight) hashing places a key on the shard
// whose name scores highest with it. Adding a shard moves only the keys
// the new shard now wins (about 1/N of them) and removing one moves only
// its own keys; the other keys stay where they are. The score is FNV-1a 64
// of name, a NUL and key, finished with splitmix64's mixer: it is part of
// the stored layout (a key's shard), so it never changes.

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

// rendezvous returns the index of the name that key goes to (names not
// empty); ties, which need a 64-bit collision, go to the smaller name.
func rendezvous(names []string, key string) int {
	best, bestScore := 0, rendezvousScore(names[0], key)
	for i := 1; i < len(names); i++ {
		s := rendezvousScore(names[i], key)
		if s > bestScore || s == bestScore && names[i] < names[best] {
			best, bestScore = i, s
		}
	}
	return best
}

// ShardOf returns the shard among names that key goes to by rendezvous
// hashing, as a sharded Client places keyed work (see NewShardedClient);
// "" when names is empty. It depends on the names only, not their order.
func ShardOf(names []string, key string) string {
	if len(names) == 0 {
		return ""
	}
	return names[rendezvous(names, key)]
}

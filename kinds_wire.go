package workq

import (
	"github.com/workq/workq/internal/kinds"
	"github.com/workq/workq/internal/lease"
)

// The Client's per-kind wiring that the registry of kinds
// (internal/kinds) drives.

// retainedTables are the tables whose finished items the retention task
// deletes: every kind's but those with a retention of their own (the
// inbox's de-duplication window).
func retainedTables() []lease.Table {
	var out []lease.Table
	for _, k := range kinds.All() {
		if !k.OwnRetention {
			out = append(out, k.Table)
		}
	}
	return out
}

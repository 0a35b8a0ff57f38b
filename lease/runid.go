package lease

import (
	"encoding/binary"
	"slices"

	"github.com/google/uuid"
)

// MaxItemID is the largest work-row id: run ids keep 60 bits of it, so the
// identity columns of the work tables stop there.
const MaxItemID = 1<<60 - 1

// code is the table's two bits in a run id: its index in Tables, which
// ParseRunID reads back (workq_run_id in SQL uses the same order).
func (t Table) code() uint64 { return uint64(slices.Index(Tables, t)) & 3 }

// RunID names one attempt: the item's table and id and the lease_version of
// the claim that started it, packed into a version-8 UUID. It is the Go twin
// of the SQL function workq_run_id (the layout is described there), which
// writes the same value into the run archive; test/run_id_test.go keeps the
// two equal. Deriving the id instead of drawing a random one keeps the
// archive's primary key append-mostly and saves a random number per claimed
// row.
func RunID(t Table, id, leaseVersion int64) uuid.UUID {
	var u uuid.UUID
	hi := uint64(id)>>12<<16 | 0x8000 | uint64(id)&0xfff
	lo := 1<<63 | t.code()<<60 | uint64(leaseVersion)&(1<<60-1)
	binary.BigEndian.PutUint64(u[:8], hi)
	binary.BigEndian.PutUint64(u[8:], lo)
	return u
}

// ParseRunID reads the table, item id and lease version back from a run id
// made by RunID. ok is false for any other UUID.
func ParseRunID(u uuid.UUID) (t Table, id, leaseVersion int64, ok bool) {
	hi, lo := binary.BigEndian.Uint64(u[:8]), binary.BigEndian.Uint64(u[8:])
	if hi&0xf000 != 0x8000 || lo>>62 != 0b10 {
		return "", 0, 0, false
	}
	id = int64(hi>>16<<12 | hi&0xfff)
	leaseVersion = int64(lo & (1<<60 - 1))
	return Tables[lo>>60&3], id, leaseVersion, true
}

package lease

import (
	"encoding/binary"
	"fmt"

	"github.com/google/uuid"
)

// MaxItemID is the largest work-row id: run ids keep 60 bits of it, so the
// identity columns of the work tables stop there.
const MaxItemID = 1<<60 - 1

// MaxLeaseVersion is the largest lease version a run id keeps (56 bits): an
// item would have to be claimed 7.2e16 times to get there.
const MaxLeaseVersion = 1<<56 - 1

// RunID names one attempt: the item's table and id and the lease_version of
// the claim that started it, packed into a version-8 UUID. It is the Go twin
// of the SQL function workq_run_id (the layout is described there), which
// writes the same value into the run archive; test/run_id_test.go keeps the
// two equal. Deriving the id instead of drawing a random one keeps the
// archive's primary key append-mostly and saves a random number per claimed
// row. A table that is not registered is an error (ErrUnknownTable), never
// another table's code.
func RunID(t Table, id, leaseVersion int64) (uuid.UUID, error) {
	d, err := lookup(t)
	if err != nil {
		return uuid.Nil, err
	}
	if id < 0 || id > MaxItemID || leaseVersion < 0 || leaseVersion > MaxLeaseVersion {
		return uuid.Nil, fmt.Errorf("run id of %s %d attempt %d: id or lease version out of range", t, id, leaseVersion)
	}
	return runID(d.code, id, leaseVersion), nil
}

func runID(code uint8, id, leaseVersion int64) uuid.UUID {
	var u uuid.UUID
	hi := uint64(id)>>12<<16 | 0x8000 | uint64(id)&0xfff
	lo := 1<<63 | uint64(code)<<56 | uint64(leaseVersion)&MaxLeaseVersion
	binary.BigEndian.PutUint64(u[:8], hi)
	binary.BigEndian.PutUint64(u[8:], lo)
	return u
}

// ParseRunID reads the table, item id and lease version back from a run id
// made by RunID. ok is false for any other UUID, including one whose table
// code no registered table has.
func ParseRunID(u uuid.UUID) (t Table, id, leaseVersion int64, ok bool) {
	hi, lo := binary.BigEndian.Uint64(u[:8]), binary.BigEndian.Uint64(u[8:])
	if hi&0xf000 != 0x8000 || lo>>62 != 0b10 {
		return "", 0, 0, false
	}
	d, known := byCode(lo >> 56 & maxTableCode)
	if !known {
		return "", 0, 0, false
	}
	id = int64(hi>>16<<12 | hi&0xfff)
	leaseVersion = int64(lo & MaxLeaseVersion)
	return d.table, id, leaseVersion, true
}

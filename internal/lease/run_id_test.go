package lease_test

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/workq/workq/internal/lease"
)

// Run ids are computed in two places: workq_run_id in SQL writes them into
// the archive, lease.RunID in Go hands them to handlers and names run
// directories. They must agree bit for bit, be valid version-8 UUIDs, read
// back, and sort by (item, table, lease_version).
func TestRunIDIsTheSameInSQLAndGo(t *testing.T) {
	e := newLeaseDB(t, 2)
	cases := []struct {
		id, leaseVersion int64
	}{
		{1, 0},
		{1, 1},
		{4095, 7},
		{4096, 7},
		{123456789, 42},
		{1 << 48, lease.MaxLeaseVersion},
		{lease.MaxItemID, 1},
		{lease.MaxItemID, lease.MaxLeaseVersion},
	}
	for _, tb := range lease.Tables {
		for _, c := range cases {
			var fromSQL uuid.UUID
			e.scalar(&fromSQL, "select workq.workq_run_id($1, $2, $3)", string(tb), c.id, c.leaseVersion)
			fromGo := runID(tb, c.id, c.leaseVersion)
			if fromSQL != fromGo {
				t.Errorf("%s id %d lease_version %d: SQL %s, Go %s", tb, c.id, c.leaseVersion, fromSQL, fromGo)
			}
			if fromGo.Version() != 8 || fromGo.Variant() != uuid.RFC4122 {
				t.Errorf("%s: version %d variant %s, want 8 and RFC 4122", fromGo, fromGo.Version(), fromGo.Variant())
			}
			gt, gid, glv, ok := lease.ParseRunID(fromGo)
			if !ok || gt != tb || gid != c.id || glv != c.leaseVersion {
				t.Errorf("ParseRunID(%s) = %s, %d, %d, %v; want %s, %d, %d", fromGo, gt, gid, glv, ok, tb, c.id, c.leaseVersion)
			}
		}
	}
	if _, _, _, ok := lease.ParseRunID(uuid.New()); ok {
		t.Error("ParseRunID accepted a random (version 4) UUID")
	}

	// A table nobody registered is an error on both sides, never another
	// table's code; a run id with an unassigned code does not parse.
	if _, err := lease.RunID("jobs_v2", 1, 1); !errors.Is(err, lease.ErrUnknownTable) {
		t.Errorf("RunID of an unregistered table: err %v, want ErrUnknownTable", err)
	}
	var dummy uuid.UUID
	if err := e.pool.QueryRow(e.ctx, "select workq.workq_run_id($1, 1, 1)", "jobs_v2").Scan(&dummy); err == nil || !strings.Contains(err.Error(), "unknown work table") {
		t.Errorf("workq_run_id of an unregistered table: %v, %v; want an unknown work table error", dummy, err)
	}
	unassigned := runID(lease.JobRuns, 7, 3)
	unassigned[8] |= 0x3f // table code 63: assigned to no table
	if tb, _, _, ok := lease.ParseRunID(unassigned); ok {
		t.Errorf("ParseRunID read a run id with an unassigned table code as %s", tb)
	}
	for _, bad := range [][2]int64{{-1, 1}, {lease.MaxItemID + 1, 1}, {1, lease.MaxLeaseVersion + 1}} {
		if _, err := lease.RunID(lease.JobRuns, bad[0], bad[1]); err == nil {
			t.Errorf("RunID(job_runs, %d, %d) did not fail", bad[0], bad[1])
		}
	}

	// Sorted as PostgreSQL sorts uuids (bytewise), run ids follow the item id
	// first: that is what keeps archive inserts at the right edge of the key.
	var ids []uuid.UUID
	for _, id := range []int64{1, 2, 4095, 4096, 4097, 1 << 40, lease.MaxItemID} {
		for _, tb := range lease.Tables {
			for _, v := range []int64{1, 2, 1 << 40} {
				ids = append(ids, runID(tb, id, v))
			}
		}
	}
	if !slices.IsSortedFunc(ids, func(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) }) {
		t.Error("run ids are not in (item id, table, lease_version) order")
	}
	var identityMax int64
	e.scalar(&identityMax, "select seqmax from pg_sequence where seqrelid = pg_get_serial_sequence('workq.job_runs', 'id')::regclass")
	if identityMax != lease.MaxItemID {
		t.Errorf("job_runs id identity stops at %d, want lease.MaxItemID %d", identityMax, int64(lease.MaxItemID))
	}
}

// Every attempt of an item has its own run id, and its archived runs are
// listed in claim order from one range of the runs primary key.
func TestRunIDsOfOneItem(t *testing.T) {
	e := newLeaseDB(t, 2)
	for _, tbl := range leaseTables {
		t.Run(tbl.name, func(t *testing.T) {
			e := e.on(t, tbl)
			ids := e.enqueue(enqueueSpec{n: 2, queue: "rid", maxAttempts: 5})
			var claimed []claimedRow
			for range 3 {
				rows := e.claim(claimParams{queue: "rid", workerID: "w", leaseMs: 60000, maxRows: 2})
				if len(rows) != 2 {
					t.Fatalf("claimed %d rows, want 2", len(rows))
				}
				claimed = append(claimed, rows...)
				var ends []attemptEnd
				for _, r := range rows {
					ends = append(ends, attemptEnd{ID: r.ID, Token: r.Token, Outcome: "released"})
				}
				e.complete(ends...)
			}
			seen := map[uuid.UUID]bool{}
			for _, r := range claimed {
				if seen[r.RunID] {
					t.Fatalf("run id %s given to two attempts", r.RunID)
				}
				seen[r.RunID] = true
			}
			for _, id := range ids {
				runs := e.runs(id)
				var got []uuid.UUID
				for _, r := range runs {
					got = append(got, r.RunID)
					if r.ItemID != id || r.WorkTable != tbl.name {
						t.Errorf("run %s lists under %s %d but records %s %d", r.RunID, tbl.name, id, r.WorkTable, r.ItemID)
					}
				}
				var want []uuid.UUID
				for _, r := range claimed {
					if r.ID == id {
						want = append(want, r.RunID)
					}
				}
				if !slices.Equal(got, want) {
					t.Errorf("runs of %d: %v, want the claimed run ids in claim order %v", id, got, want)
				}
			}
		})
	}
}

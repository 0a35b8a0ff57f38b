package maintain_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/workq/workq/internal/maintain"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/internal/testutil"
)

// Issue 18, item 13: while the database lacks workq's schema (here its lock
// table), the maintenance service says so once, as one error naming the
// fix, instead of a warning with the raw SQL error every second; once the
// schema is back it leads.
func TestMissingSchemaIsReportedOnce(t *testing.T) {
	ctx := context.Background()
	pool := testdb.Pool(t)
	exec := func(sql string) {
		t.Helper()
		if _, err := pool.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec(`alter table workq.workq_locks rename to workq_locks_elsewhere`)
	var logs testutil.Buffer
	s := maintain.New(pool, maintain.Options{LockTTL: 2 * time.Second, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer s.Stop(ctx)
	time.Sleep(3500 * time.Millisecond) // the leader lock is tried every second
	var errs, warns []map[string]any
	for _, r := range logs.Records() {
		switch r["level"] {
		case "ERROR":
			errs = append(errs, r)
		case "WARN":
			warns = append(warns, r)
		}
	}
	if len(errs) != 1 || !strings.Contains(fmt.Sprint(errs[0]["msg"]), "run 'workq migrate up'") {
		t.Errorf("error lines %v; want exactly one, saying to run 'workq migrate up'", errs)
	}
	if len(warns) != 0 {
		t.Errorf("%d warnings while the schema was missing, want none: %v", len(warns), warns)
	}
	exec(`alter table workq.workq_locks_elsewhere rename to workq_locks`)
	eventually(t, 10*time.Second, "the service leads once the schema is back", func() bool { _, ok := s.Leader(); return ok })
}

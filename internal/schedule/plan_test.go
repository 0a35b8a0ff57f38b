package schedule_test

import (
	"context"
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/workq/workq/internal/testdb"
)

// dueQuery is SchedulesDue as db/queries/schedules.sql has it, with its
// parameters numbered as sqlc numbers them (@now $1, @batch $2).
func dueQuery(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../db/queries/schedules.sql")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "-- name: SchedulesDue :many\n")
	if !ok {
		t.Fatal("SchedulesDue not found")
	}
	body, _, _ := strings.Cut(rest, ";")
	var lines []string
	for _, l := range strings.Split(body, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "--") {
			lines = append(lines, l)
		}
	}
	sql := strings.Join(lines, "\n")
	sql = strings.ReplaceAll(sql, "@now", "$1")
	sql = strings.ReplaceAll(sql, "@batch", "$2")
	if regexp.MustCompile(`@\w+`).MatchString(sql) {
		t.Fatalf("unreplaced parameter in %s", sql)
	}
	return sql
}

type planNode struct {
	NodeType string     `json:"Node Type"`
	Relation string     `json:"Relation Name"`
	Index    string     `json:"Index Name"`
	Plans    []planNode `json:"Plans"`
}

func (n planNode) walk(f func(planNode)) {
	f(n)
	for _, c := range n.Plans {
		c.walk(f)
	}
}

// The scheduler's due-schedule query reads the partial index schedules_due,
// not the table, among 20,000 schedules of which few are due; the last-run
// probe is a primary-key lookup.
func TestDueQueryUsesSchedulesDue(t *testing.T) {
	ctx := context.Background()
	pool := testdb.Pool(t)
	_, err := pool.Exec(ctx, `
		insert into workq.schedules (name, kind, cron, next_run_at, enabled)
		select 's' || g, 'k', '* * * * *', '2030-01-01'::timestamptz + g * interval '1 minute', g % 10 <> 0
		from generate_series(1, 20000) g;
		insert into workq.job_runs (kind, status, finished_at) select 'k', 2, now() from generate_series(1, 20000);
		update workq.schedules set last_run_id = id where id % 3 = 0;
		analyze workq.schedules; analyze workq.job_runs;`)
	if err != nil {
		t.Fatal(err)
	}
	var raw string
	now := time.Date(2030, 1, 1, 0, 5, 0, 0, time.UTC)
	if err := pool.QueryRow(ctx, "explain (format json) "+dueQuery(t), now, 100).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	var plans []struct {
		Plan planNode `json:"Plan"`
	}
	if err := json.Unmarshal([]byte(raw), &plans); err != nil {
		t.Fatal(err)
	}
	var usesDue, seqSchedules, seqRuns bool
	plans[0].Plan.walk(func(n planNode) {
		usesDue = usesDue || n.Index == "schedules_due"
		seqSchedules = seqSchedules || (n.NodeType == "Seq Scan" && n.Relation == "schedules")
		seqRuns = seqRuns || (n.NodeType == "Seq Scan" && n.Relation == "job_runs")
	})
	if !usesDue || seqSchedules || seqRuns {
		t.Errorf("SchedulesDue plan does not use schedules_due (or scans a table):\n%s", raw)
	}
}

package outboxrt_test

import (
	"context"
	"encoding/json"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/workq/workq/internal/testdb"
)

// claimSQL is OutboxClaim as the application runs it, its sqlc parameters
// numbered in order of first appearance.
func claimSQL(t *testing.T) (string, []string) {
	t.Helper()
	b, err := os.ReadFile("../../db/queries/outbox.sql")
	if err != nil {
		t.Fatal(err)
	}
	var body []string
	in := false
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "-- name: ") {
			if in {
				break
			}
			in = strings.HasPrefix(line, "-- name: OutboxClaim ")
			continue
		}
		if in && !strings.HasPrefix(strings.TrimSpace(line), "--") {
			body = append(body, line)
		}
	}
	sql := strings.TrimSuffix(strings.TrimSpace(strings.Join(body, "\n")), ";")
	var params []string
	sql = regexp.MustCompile(`sqlc\.n?arg\('(\w+)'\)`).ReplaceAllString(sql, "@$1")
	sql = regexp.MustCompile(`@(\w+)`).ReplaceAllStringFunc(sql, func(m string) string {
		for i, p := range params {
			if p == m[1:] {
				return "$" + strconv.Itoa(i+1)
			}
		}
		params = append(params, m[1:])
		return "$" + strconv.Itoa(len(params))
	})
	return sql, params
}

type plan struct {
	NodeType   string  `json:"Node Type"`
	Relation   string  `json:"Relation Name"`
	Index      string  `json:"Index Name"`
	ActualRows float64 `json:"Actual Rows"`
	Loops      float64 `json:"Actual Loops"`
	Plans      []plan  `json:"Plans"`
}

func (p plan) walk(f func(plan)) {
	f(p)
	for _, c := range p.Plans {
		c.walk(f)
	}
}

// The ordered claim with 100,000 pending messages over 10,000 keys, 1,111
// of them in flight: index scans only (a skip scan of outbox_ordered), no
// sequential scan, no sort, one probe of outbox_key_in_flight per ready
// head, and it reads about as many rows as it passes keys, not the whole
// set. Twice: with statistics taken while the keys were in flight, and with
// statistics taken before (a VACUUM ANALYZE of an idle queue, then a burst),
// under which the in-flight check was once planned as an anti join against
// a materialized scan of the whole in-flight set, and then as a scan of
// outbox_in_progress per key (migration 00014).
func TestOrderedClaimPlan(t *testing.T) {
	for _, tc := range []struct {
		name               string
		analyzeBeforeClaim bool // else before any key is in flight
	}{
		{"statistics current", true},
		{"statistics taken before the keys were in flight", false},
	} {
		t.Run(tc.name, func(t *testing.T) { testOrderedClaimPlan(t, tc.analyzeBeforeClaim) })
	}
}

func testOrderedClaimPlan(t *testing.T, analyzeInFlight bool) {
	pool := testdb.Pool(t)
	ctx := context.Background()
	exec := func(sql string) {
		t.Helper()
		if _, err := pool.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	// Numbered here (key_seq) rather than by the trigger: one statement
	// updating each key's counter ten times is slow, and OutboxEnqueueMany
	// numbers its batches itself the same way.
	exec(`insert into workq.outbox (queue, topic, partition_key, payload, key_seq)
		select 'plan', 't', 'key-' || (i % 10000), '{}', i / 10000 + 1 from generate_series(0, 99999) i`)
	exec(`insert into workq.outbox (queue, topic, payload) select 'plan', 't', '{}' from generate_series(1, 1000)`)
	if !analyzeInFlight {
		exec("vacuum analyze workq.outbox")
	}
	// Some keys in flight (every key before key-2: the claim below starts
	// after key-1, so it passes all of them first), as in a live queue.
	exec(`update workq.outbox set status = 1, owner_token = gen_random_uuid(), locked_until = now() + interval '1 hour', attempts = 1
		where id in (select min(id) from workq.outbox where partition_key < 'key-2' group by partition_key)`)
	if analyzeInFlight {
		exec("analyze workq.outbox")
	}
	sql, params := claimSQL(t)
	values := map[string]any{"queue": "plan", "max_rows": 100, "after_key": "key-1", "skip_topics": []string{"x"}, "pass_keys": []string{"key-3"}, "wake": false,
		"owner_token": uuid.New(), "lease_ms": 30000, "worker_id": "plan", "flow_grant": (*int32)(nil)}
	args := make([]any, len(params))
	for i, p := range params {
		v, ok := values[p]
		if !ok {
			t.Fatalf("no value for parameter %s", p)
		}
		args[i] = v
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	var raw []byte
	if err := tx.QueryRow(ctx, "explain (analyze, format json) "+sql, args...).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	var out []struct {
		Plan plan `json:"Plan"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	root := out[0].Plan
	claimed := root.ActualRows
	usesOrdered, usesClaim, usesInFlight := false, false, false
	var read float64
	root.walk(func(p plan) {
		switch {
		case p.NodeType == "Seq Scan":
			t.Errorf("sequential scan on %s", p.Relation)
		case p.NodeType == "Sort":
			t.Errorf("sort of %v rows", p.ActualRows)
		case p.NodeType == "Materialize":
			t.Errorf("materialize of %v rows, read %v times", p.ActualRows, p.Loops)
		case p.Index == "outbox_in_progress":
			t.Errorf("outbox_in_progress read (%v rows, %v times): the in-flight probe must use outbox_key_in_flight", p.ActualRows, p.Loops)
		}
		switch p.Index {
		case "outbox_ordered":
			usesOrdered = true
		case "outbox_claim":
			usesClaim = true
		case "outbox_key_in_flight":
			usesInFlight = true
		}
		if p.Relation == "outbox" {
			read += p.ActualRows * max(p.Loops, 1)
		}
	})
	if !usesOrdered || !usesClaim || !usesInFlight {
		t.Errorf("index outbox_ordered used: %v, outbox_claim used: %v, outbox_key_in_flight used: %v; want all three",
			usesOrdered, usesClaim, usesInFlight)
	}
	// The claim found 100 rows (50 heads of free keys, 50 unkeyed, give or
	// take the random reserve) after passing the 1,111 keys in flight (two
	// index probes each); it must read nowhere near 100,000 rows.
	if read > 5000 {
		t.Errorf("the claim read %v rows of outbox to claim %v", read, claimed)
	}
	if claimed != 100 {
		t.Errorf("claimed %v rows, want 100", claimed)
	}
	if t.Failed() {
		pretty, _ := json.MarshalIndent(out, "", "  ")
		t.Logf("plan:\n%s", pretty)
	}
}

package outbox_test

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
	b, err := os.ReadFile("../db/queries/outbox.sql")
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

// The ordered claim with 100,000 pending messages over 10,000 keys: index
// scans only (a skip scan of outbox_ordered), no sequential scan, no sort,
// and it reads about as many rows as it claims, not the whole set.
func TestOrderedClaimPlan(t *testing.T) {
	pool := testdb.Pool(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `
		insert into outbox (queue, topic, partition_key, payload)
		select 'plan', 't', 'key-' || (i % 10000), '{}' from generate_series(1, 100000) i`); err != nil {
		t.Fatal(err)
	}
	// Some keys in flight and some unkeyed work, as in a live queue.
	if _, err := pool.Exec(ctx, `
		update outbox set status = 1, owner_token = gen_random_uuid(), locked_until = now() + interval '1 hour', attempts = 1
		where id in (select min(id) from outbox where partition_key < 'key-2' group by partition_key)`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `insert into outbox (queue, topic, payload) select 'plan', 't', '{}' from generate_series(1, 1000)`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "analyze outbox"); err != nil {
		t.Fatal(err)
	}
	sql, params := claimSQL(t)
	values := map[string]any{"queue": "plan", "max_rows": 100, "after_key": "key-1", "skip_topics": []string{"x"},
		"owner_token": uuid.New(), "lease_ms": 30000, "worker_id": "plan"}
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
	usesOrdered, usesClaim := false, false
	var read float64
	root.walk(func(p plan) {
		switch {
		case p.NodeType == "Seq Scan":
			t.Errorf("sequential scan on %s", p.Relation)
		case p.NodeType == "Sort":
			t.Errorf("sort of %v rows", p.ActualRows)
		}
		if p.Index == "outbox_ordered" {
			usesOrdered = true
		}
		if p.Index == "outbox_claim" {
			usesClaim = true
		}
		if p.Relation == "outbox" {
			read += p.ActualRows * max(p.Loops, 1)
		}
	})
	if !usesOrdered || !usesClaim {
		t.Errorf("index outbox_ordered used: %v, outbox_claim used: %v; want both", usesOrdered, usesClaim)
	}
	// The claim found 100 rows (50 heads of free keys, 50 unkeyed, give or
	// take the random reserve) and passed the 1,000 keys in flight before
	// key-2 only if it wrapped; it must read nowhere near 100,000 rows.
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

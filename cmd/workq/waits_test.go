package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/testdb"
)

// TestJobsShowWaitsFor: `workq jobs show` prints what flow control holds a
// ready job back with (a "waits for" line, and waits_for in --json), and
// nothing of the kind once the kind is resumed.
func TestJobsShowWaitsFor(t *testing.T) {
	isolateEnv(t)
	url := testdb.URL(t)
	t.Setenv("DATABASE_URL", url)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	c, err := workq.NewClient(pool, workq.Config{})
	if err != nil {
		t.Fatal(err)
	}
	var id string
	if err := pool.QueryRow(ctx, `insert into workq.job_runs (queue, kind, payload) values ('fq', 'mail', '{}') returning id::text`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	k := workq.KindRef{Table: workq.TableJobRuns, Queue: "fq", Kind: "mail"}
	if _, err := c.PauseKind(ctx, k, &workq.ActionOpts{Actor: "ops:ann"}); err != nil {
		t.Fatal(err)
	}
	out, err := runCLI(t, "jobs", "show", id)
	if err != nil || !strings.Contains(out, "waits for") || !strings.Contains(out, "kind mail paused by ops:ann") {
		t.Fatalf("show of a job of a paused kind: %v\n%s", err, out)
	}
	out, err = runCLI(t, "jobs", "show", id, "--json")
	var v struct {
		WaitsFor []string `json:"waits_for"`
	}
	if err != nil || json.Unmarshal([]byte(out), &v) != nil || len(v.WaitsFor) != 1 || v.WaitsFor[0] != "kind mail paused by ops:ann" {
		t.Fatalf("show --json: %v\n%s", err, out)
	}
	if _, err := c.ResumeKind(ctx, k); err != nil {
		t.Fatal(err)
	}
	out, err = runCLI(t, "jobs", "show", id)
	if err != nil || strings.Contains(out, "waits for") {
		t.Fatalf("show after the resume: %v\n%s", err, out)
	}
}

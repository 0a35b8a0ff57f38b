package test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The lease statements are written out once per table (one SQL file per
// table, as sqlc cannot template them). This test keeps the copies from
// drifting: with the table's name and query prefix normalised, each table's
// Heartbeat, Complete and ReapExpired must equal job_runs', and so must the
// inline-reclaim part of Claim. Known, intended differences are listed.
func TestLeaseSQLIsTheSameOnEveryTable(t *testing.T) {
	tables := []struct{ file, name, prefix string }{
		{"outbox.sql", "outbox", "Outbox"},
		{"inbox.sql", "inbox", "Inbox"},
		{"timers.sql", "timers", "Timers"},
	}
	// Lines only some tables have, removed before comparing.
	intended := map[string]string{
		"inbox": `processed_at = case when o.outcome = 'done' then now() else j.processed_at end,`,
	}
	ref := readQueries(t, "job_runs.sql", "job_runs", "JobRuns")
	for _, tb := range tables {
		got := readQueries(t, tb.file, tb.name, tb.prefix)
		for _, q := range []string{"Heartbeat", "Complete", "ReapExpired", "Claim/reclaim"} {
			g := got[q]
			if line := intended[tb.name]; line != "" {
				g = strings.Replace(g, line+"\n", "", 1)
			}
			if g == "" || g != ref[q] {
				t.Errorf("%s: %s differs from job_runs (normalised):\n--- job_runs\n%s\n--- %s\n%s", tb.file, q, ref[q], tb.name, g)
			}
		}
	}
}

var queryName = regexp.MustCompile(`(?m)^-- name: (\w+) `)

// readQueries returns the statements of one query file by verb, with the
// table name, prefix and comment lines normalised away.
func readQueries(t *testing.T, file, table, prefix string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "db", "queries", file))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	src := string(b)
	locs := queryName.FindAllStringSubmatchIndex(src, -1)
	for i, loc := range locs {
		end := len(src)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		verb := strings.TrimPrefix(src[loc[2]:loc[3]], prefix)
		var lines []string
		for _, l := range strings.Split(src[loc[0]:end], "\n") {
			if strings.HasPrefix(strings.TrimSpace(l), "--") || strings.TrimSpace(l) == "" {
				continue
			}
			lines = append(lines, strings.TrimSpace(l))
		}
		body := strings.Join(lines, "\n")
		body = strings.ReplaceAll(body, "'"+table+"'", "'T'")
		body = regexp.MustCompile(`\b`+table+`\b`).ReplaceAllString(body, "T")
		out[verb] = body
		if verb == "Claim" {
			if s, e := strings.Index(body, "expired as ("), strings.Index(body, "candidates as ("); s >= 0 && e > s {
				out["Claim/reclaim"] = body[s:e]
			}
		}
	}
	return out
}

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/workq/workq/internal/testdb"
)

// The item commands over two shard databases: list merges them with each
// item's shard, the actions act on the shard an id names and nowhere else,
// and bad input changes nothing on either.
func TestItemVerbsSharded(t *testing.T) {
	isolateEnv(t)
	ctx := context.Background()
	urls := map[string]string{"a": testdb.URL(t), "b": testdb.URL(t)}
	conns := map[string]*pgx.Conn{}
	for name, u := range urls {
		c, err := pgx.Connect(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(ctx)
		conns[name] = c
	}
	run := func(args ...string) string {
		t.Helper()
		out, err := runCLI(t, args...)
		if err != nil {
			t.Fatalf("workq %s: %v", strings.Join(args, " "), err)
		}
		return out
	}
	shardArgs := []string{"--shard", "a=" + urls["a"], "--shard", "b=" + urls["b"]}
	sharded := func(args ...string) []string { return append(args, shardArgs...) }
	// snapshot is every job run of a shard: id, status, attempts.
	snapshot := func(shard string) string {
		t.Helper()
		rows, err := conns[shard].Query(ctx, "select id, status, attempts from workq.job_runs_all order by id")
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		for rows.Next() {
			var id int64
			var st, att int16
			if err := rows.Scan(&id, &st, &att); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&b, "%d:%d:%d ", id, st, att)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	status := func(shard string, id int64) int16 {
		t.Helper()
		var st int16
		if err := conns[shard].QueryRow(ctx, "select status from workq.job_runs_all where id = $1", id).Scan(&st); err != nil {
			t.Fatal(err)
		}
		return st
	}

	// a1, b1, a2, b2 in that order: each shard numbers its own from 1.
	ids := map[string][]int64{}
	for range 2 {
		for _, name := range []string{"a", "b"} {
			var r struct{ ID int64 }
			if err := json.Unmarshal([]byte(run("enqueue", "--database-url", urls[name], "--kind", "email.send", "--json")), &r); err != nil {
				t.Fatal(err)
			}
			ids[name] = append(ids[name], r.ID)
		}
	}
	if ids["a"][0] != ids["b"][0] {
		t.Fatalf("ids %v: want each shard to number from the same start", ids)
	}

	type page struct {
		Items []struct {
			Shard string
			ID    int64
			State string
		}
		NextCursor *string `json:"next_cursor"`
	}
	got := func(p page) []string {
		var out []string
		for _, it := range p.Items {
			out = append(out, fmt.Sprintf("%s:%d", it.Shard, it.ID))
		}
		return out
	}
	// Merged, newest first, in pages through the merged cursor.
	var p page
	if err := json.Unmarshal([]byte(run(sharded("jobs", "list", "--limit", "3", "--json")...)), &p); err != nil {
		t.Fatal(err)
	}
	want := []string{fmt.Sprintf("b:%d", ids["b"][1]), fmt.Sprintf("a:%d", ids["a"][1]), fmt.Sprintf("b:%d", ids["b"][0])}
	if !slices.Equal(got(p), want) || p.NextCursor == nil {
		t.Fatalf("first page %v (next %v), want %v", got(p), p.NextCursor, want)
	}
	cursor := *p.NextCursor
	p = page{}
	if err := json.Unmarshal([]byte(run(sharded("jobs", "list", "--limit", "3", "--cursor", cursor, "--json")...)), &p); err != nil {
		t.Fatal(err)
	}
	if want := []string{fmt.Sprintf("a:%d", ids["a"][0])}; !slices.Equal(got(p), want) || p.NextCursor != nil {
		t.Fatalf("second page %v (next %v), want %v", got(p), p.NextCursor, want)
	}
	out := run(sharded("jobs", "list", "--limit", "1")...)
	if !strings.HasPrefix(out, "SHARD  ID") || !strings.Contains(out, fmt.Sprintf("b      b:%d", ids["b"][1])) || !strings.Contains(out, "NEXT ") {
		t.Fatalf("list table:\n%s", out)
	}
	p = page{}
	if err := json.Unmarshal([]byte(run(sharded("jobs", "list", "--shard-only", "b", "--json")...)), &p); err != nil {
		t.Fatal(err)
	}
	if want := []string{fmt.Sprintf("b:%d", ids["b"][1]), fmt.Sprintf("b:%d", ids["b"][0])}; !slices.Equal(got(p), want) {
		t.Fatalf("--shard-only b: %v, want %v", got(p), want)
	}
	// The cursor of a page over every shard pages one shard on from its
	// place (b's two items were on the first page).
	p = page{}
	if err := json.Unmarshal([]byte(run(sharded("jobs", "list", "--shard-only", "b", "--cursor", cursor, "--json")...)), &p); err != nil {
		t.Fatal(err)
	}
	if len(got(p)) != 0 || p.NextCursor != nil {
		t.Fatalf("--shard-only b --cursor (b done): %v (next %v), want none", got(p), p.NextCursor)
	}

	// Bad input is refused before any shard is touched, whatever is valid
	// beside it.
	beforeA, beforeB := snapshot("a"), snapshot("b")
	b1 := fmt.Sprintf("b:%d", ids["b"][0])
	for _, c := range []struct {
		args []string
		err  string
	}{
		{[]string{"jobs", "cancel", b1, "zz:1"}, `"zz:1": no shard "zz" (the shards are a, b)`},
		{[]string{"jobs", "cancel", b1, "5"}, `"5" names no shard: with --shard, give each job run as SHARD:ID, such as a:5 (the shards are a, b)`},
		{[]string{"jobs", "retry", b1, "a:x"}, `"a:x" is not a valid job run id`},
		{[]string{"jobs", "delete", b1, "a:0"}, `"a:0" is not a valid job run id`},
		{[]string{"jobs", "cancel", b1, b1}, "shard b: "},
		{[]string{"jobs", "cancel", b1, "--actor", " "}, "--actor must not be empty"},
		{[]string{"jobs", "show", "1"}, `"1" names no shard`},
		{[]string{"jobs", "list", "--shard-only", "zz"}, `--shard-only "zz": no shard "zz" (the shards are a, b)`},
		{[]string{"jobs", "list", "--before", "3"}, "with --shard, page with --cursor"},
		{[]string{"jobs", "list", "--cursor", "123"}, `--cursor "123" is not a cursor of this list`},
		{[]string{"jobs", "cancel", b1, "--database-url", urls["a"]}, "not both"},
	} {
		_, err := runCLI(t, sharded(c.args...)...)
		if err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("workq %s: %v, want %q", strings.Join(c.args, " "), err, c.err)
		}
	}
	for _, args := range [][]string{{"jobs", "list", "--shard-only", "a"}, {"jobs", "list", "--cursor", cursor}} {
		if _, err := runCLI(t, append(args, "--database-url", urls["a"])...); err == nil || !strings.Contains(err.Error(), "for a list over --shard") {
			t.Errorf("unsharded workq %s: %v", strings.Join(args, " "), err)
		}
	}
	if a, b := snapshot("a"), snapshot("b"); a != beforeA || b != beforeB {
		t.Fatalf("bad input changed rows: a %q -> %q, b %q -> %q", beforeA, a, beforeB, b)
	}

	// cancel and retry of b:ID change b's row, not a's of the same id.
	if out := run(sharded("jobs", "cancel", b1, "--actor", "op:ada", "--reason", "dup")...); out != "cancelled "+b1+"\n" {
		t.Fatalf("cancel printed %q", out)
	}
	if st := status("b", ids["b"][0]); st == 0 {
		t.Fatalf("b's job still ready after its cancel")
	}
	if a := snapshot("a"); a != beforeA {
		t.Fatalf("cancel of %s changed a: %q -> %q", b1, beforeA, a)
	}
	show := run(sharded("jobs", "show", b1)...)
	if !strings.HasPrefix(show, "shard ") || !strings.Contains(show, "cancelled by op:ada: dup") {
		t.Fatalf("show %s:\n%s", b1, show)
	}
	var r struct {
		Shards []map[string]any
	}
	if err := json.Unmarshal([]byte(run(sharded("jobs", "retry", b1, "--json")...)), &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Shards) != 1 || r.Shards[0]["shard"] != "b" || fmt.Sprint(r.Shards[0]["retried"]) != fmt.Sprintf("[%d]", ids["b"][0]) {
		t.Fatalf("retry --json: %+v", r)
	}
	if st := status("b", ids["b"][0]); st != 0 {
		t.Fatalf("b's job status %d after its retry, want ready", st)
	}
	if a := snapshot("a"); a != beforeA {
		t.Fatalf("retry of %s changed a: %q -> %q", b1, beforeA, a)
	}
	// A retry of a ready job leaves it alone, named with its shard.
	if _, err := runCLI(t, sharded("jobs", "retry", b1)...); err == nil || !strings.Contains(err.Error(), "job run "+b1+" is ready;") {
		t.Fatalf("retry of a ready job: %v", err)
	}

	// A shard that is down: list prints the others and exits 3 (partial);
	// an action reports its ids and exits non-zero, the others acted on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	downURL := "postgres://nobody@" + ln.Addr().String() + "/none?sslmode=disable&connect_timeout=2"
	ln.Close()
	withDown := append(slices.Clone(shardArgs), "--shard", "c="+downURL)
	out, err = runCLI(t, append([]string{"jobs", "list", "--json"}, withDown...)...)
	var ec interface{ ExitCode() int }
	if err == nil || !errors.As(err, &ec) || ec.ExitCode() != exitPartial || !strings.Contains(err.Error(), "shard(s) c did not answer") {
		t.Fatalf("list with c down: %v", err)
	}
	var dp struct {
		page
		Down []downShard
	}
	if err := json.Unmarshal([]byte(out), &dp); err != nil || len(dp.Items) != 4 || len(dp.Down) != 1 || dp.Down[0].Shard != "c" || dp.NextCursor == nil {
		t.Fatalf("list with c down printed %s (%v)", out, err)
	}
	a1 := fmt.Sprintf("a:%d", ids["a"][0])
	out, err = runCLI(t, append([]string{"jobs", "cancel", a1, "c:1"}, withDown...)...)
	if err == nil || !strings.Contains(err.Error(), "shard c: ") || !strings.Contains(err.Error(), "(not cancelled: c:1)") || out != "cancelled "+a1+"\n" {
		t.Fatalf("cancel with c down: %q, %v", out, err)
	}
	if st := status("a", ids["a"][0]); st == 0 {
		t.Fatalf("a's job still ready after its cancel beside a down shard")
	}

	// Unsharded, the table has no SHARD column and the ids are plain.
	if out := run("jobs", "list", "--database-url", urls["b"]); !strings.HasPrefix(out, "ID  ") || strings.Contains(out, "b:") {
		t.Fatalf("unsharded list:\n%s", out)
	}
}

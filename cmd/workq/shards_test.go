package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq/internal/jobq"
	"github.com/workq/workq/internal/testdb"
)

func TestParseShards(t *testing.T) {
	for _, c := range []struct {
		in      []string
		want    string // name=url;...
		wantErr string
	}{
		{in: []string{"postgres://h/a", "postgres://h/b?sslmode=disable"}, want: "s1=postgres://h/a;s2=postgres://h/b?sslmode=disable"},
		{in: []string{"eu=postgres://h/a?x=1", "us=postgres://h/b"}, want: "eu=postgres://h/a?x=1;us=postgres://h/b"},
		{in: []string{"eu=host=h dbname=a"}, want: "eu=host=h dbname=a"},
		{in: []string{"a=postgres://h/a", "a=postgres://h/b"}, wantErr: `"a" is given twice`},
		{in: []string{" "}, wantErr: "is not NAME=URL"},
		{in: []string{"host"}, wantErr: "is not NAME=URL"},
	} {
		got, err := parseShards(c.in)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%q: %v, want %q", c.in, err, c.wantErr)
			}
			continue
		}
		var parts []string
		for _, s := range got {
			parts = append(parts, s.name+"="+s.url)
		}
		if g := strings.Join(parts, ";"); err != nil || g != c.want {
			t.Errorf("%q: %q %v, want %q", c.in, g, err, c.want)
		}
	}
}

// `workq bench --shards` reports each shard's jobs and the total.
func TestBenchShards(t *testing.T) {
	isolateEnv(t)
	u1, u2 := testdb.URL(t), testdb.URL(t)
	out, err := runCLI(t, "bench", "--json", "-n", "3000", "--shards", "one="+u1+",two="+u2)
	if err != nil {
		t.Fatal(err)
	}
	var r shardBenchResult
	if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &r); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if r.Mode != "burn-down" || r.Shards != 2 || r.Jobs != 3000 || len(r.PerShard) != 2 ||
		r.PerShard[0].Name != "one" || r.PerShard[0].Jobs != 1500 || r.PerShard[1].Jobs != 1500 || r.JobsPerSec <= 0 {
		t.Fatalf("result %+v", r)
	}
}

// `workq api --shard NAME=URL ...` lists the items of every shard.
func TestAPICommandShards(t *testing.T) {
	isolateEnv(t)
	ctx := context.Background()
	u1, u2 := testdb.URL(t), testdb.URL(t)
	jq := jobq.New(jobq.Options{})
	for _, u := range []string{u1, u2} {
		pool, err := pgxpool.New(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		_, err = jq.Enqueue(ctx, pool, jobq.Job{Kind: "k"})
		pool.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	addr, stop := startAPI(t, "--insecure", "--api-addr", "127.0.0.1:0", "--ui=false", "--shard", "eu="+u1, "--shard", "us="+u2)
	defer stop()
	res, err := http.Get("http://" + addr + "/v1/tables/job_runs/items")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var page struct {
		Items []struct {
			Shard string `json:"shard"`
		} `json:"items"`
	}
	if err := json.NewDecoder(res.Body).Decode(&page); err != nil || res.StatusCode != 200 {
		t.Fatalf("%d %v", res.StatusCode, err)
	}
	got := map[string]int{}
	for _, it := range page.Items {
		got[it.Shard]++
	}
	if len(page.Items) != 2 || got["eu"] != 1 || got["us"] != 1 {
		t.Fatalf("items of two shards: %+v", page.Items)
	}
}

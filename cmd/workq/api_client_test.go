package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq/api"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/workqtype"
)

// `workq api --shard ...` serves a sharded Client built from its flags: a
// job batch whose keys go to both shards lands each job on its key's shard,
// and the Client's --max-payload refuses a larger payload (400, payload)
// on either.
func TestAPICommandServesItsClient(t *testing.T) {
	isolateEnv(t)
	pools := map[string]*pgxpool.Pool{"a": testdb.Pool(t), "b": testdb.Pool(t)}
	url := func(p *pgxpool.Pool) string { return p.Config().ConnString() }
	secret, entry, err := api.NewToken("ops", api.ScopeAdmin)
	if err != nil {
		t.Fatal(err)
	}
	addr, stop := startAPI(t, "--api-addr", "127.0.0.1:0", "--api-tokens", entry, "--max-payload", "100",
		"--shard", "a="+url(pools["a"]), "--shard", "b="+url(pools["b"]))
	defer func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	}()
	post := func(body any) (int, []byte) {
		t.Helper()
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest("POST", "http://"+addr+"/v1/jobs/batch", bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer "+secret)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var buf bytes.Buffer
		_, _ = buf.ReadFrom(res.Body)
		return res.StatusCode, buf.Bytes()
	}
	keys := map[string]string{}
	for i := 0; len(keys) < 2; i++ {
		k := fmt.Sprintf("k%d", i)
		if sh := workqtype.ShardOf([]string{"a", "b"}, workqtype.ShardKeyDedup(k)); keys[sh] == "" {
			keys[sh] = k
		}
	}
	status, body := post(map[string]any{"items": []map[string]any{{"kind": "k", "dedup_key": keys["a"]}, {"kind": "k", "dedup_key": keys["b"]}}})
	if status != 201 {
		t.Fatalf("a batch over both shards: %d %s", status, body)
	}
	for sh, k := range keys {
		var n int
		if err := pools[sh].QueryRow(context.Background(), "select count(*) from workq.job_runs_all where dedup_key = $1", k).Scan(&n); err != nil || n != 1 {
			t.Fatalf("shard %s holds %d jobs of key %s (%v), want 1", sh, n, k, err)
		}
	}
	status, body = post(map[string]any{"items": []map[string]any{{"kind": "k", "payload": map[string]string{"x": strings.Repeat("a", 200)}}}})
	if status != 400 || !strings.Contains(string(body), `"field":"items[0].payload"`) {
		t.Fatalf("a payload over --max-payload: %d %s", status, body)
	}
}

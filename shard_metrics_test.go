package workq_test

import (
	"context"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/testdb"
)

// Each shard of a sharded Client has its own maintenance leader, and its
// gauges a series of their own (shard=name): one process leading both
// shards shows two leaders, not one value the last writer set.
func TestShardedMaintenanceMetricsPerShard(t *testing.T) {
	ctx := context.Background()
	reg := prometheus.NewRegistry() // the public way: the Client's collectors go to the user's registry
	client, err := workq.NewShardedClient([]workq.Shard{{Name: "a", Pool: testdb.Pool(t)}, {Name: "b", Pool: testdb.Pool(t)}},
		workq.Config{MetricsRegisterer: reg})
	if err != nil {
		t.Fatal(err)
	}
	if err := client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer client.Stop(ctx)
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	want := []string{`workq_maintenance_leader{shard="a"} 1`, `workq_maintenance_leader{shard="b"} 1`}
	var text string
	for deadline := time.Now().Add(30 * time.Second); ; {
		resp, err := srv.Client().Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		text = string(b)
		missing := 0
		for _, w := range want {
			if !strings.Contains(text, w) {
				missing++
			}
		}
		if missing == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s the scrape has not %q:\n%s", want, grep(text, "workq_maintenance_leader"))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if strings.Contains(text, `workq_maintenance_leader{shard=""}`) {
		t.Errorf("a sharded Client exported a leader gauge of no shard:\n%s", grep(text, "workq_maintenance_leader"))
	}
}

// grep returns the lines of text that contain s.
func grep(text, s string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

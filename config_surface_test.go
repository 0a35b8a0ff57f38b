package workq_test

import (
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/testdb"
)

// The runtime's settings are Config's own fields, validated by the
// runtime: an invalid one fails NewClient with ErrInvalid and a
// ValidationError naming the Config field (not the runtime's name).
func TestConfigRuntimeFieldErrors(t *testing.T) {
	pool := testdb.Pool(t)
	for _, c := range []struct {
		cfg   workq.Config
		field string
	}{
		{workq.Config{MaxWorkers: -1}, "MaxWorkers"},
		{workq.Config{MaxWorkers: 10001}, "MaxWorkers"},
		{workq.Config{FetchBatch: -1}, "FetchBatch"},
		{workq.Config{FetchPollInterval: time.Millisecond}, "FetchPollInterval"},
		{workq.Config{LeaseTTL: 500 * time.Millisecond}, "LeaseTTL"},
		{workq.Config{CompletionFlushInterval: 2 * time.Second}, "CompletionFlushInterval"},
		{workq.Config{CompletionFlushBatch: -1}, "CompletionFlushBatch"},
		{workq.Config{BackoffBase: time.Second, BackoffCap: time.Millisecond}, "BackoffCap"},
		{workq.Config{RunsDirPruneInterval: time.Millisecond}, "RunsDirPruneInterval"},
		{workq.Config{Queues: map[string]workq.QueueConfig{"a": {MaxWorkers: -1}}}, "Queues"},
		{workq.Config{Queues: map[string]workq.QueueConfig{"a b": {}}}, "Queues"},
	} {
		_, err := workq.NewClient(pool, c.cfg)
		var ve *workq.ValidationError
		if !errors.Is(err, workq.ErrInvalid) || !errors.As(err, &ve) || ve.Field != c.field {
			t.Errorf("%+v: %v (field %q), want ErrInvalid naming %s", c.cfg, err, fieldOf(ve), c.field)
		}
	}
	// Negative means none (JobTimeout, DrainTimeout, RunsDirRetention);
	// zero takes the default.
	if _, err := workq.NewClient(pool, workq.Config{JobTimeout: -1, DrainTimeout: -1, RunsDirRetention: -1}); err != nil {
		t.Fatalf("negative (none) bounds: %v", err)
	}
}

func fieldOf(ve *workq.ValidationError) string {
	if ve == nil {
		return ""
	}
	return ve.Field
}

// MetricsRegisterer takes the Client's collectors; a second Client on the
// same registerer is refused (its collectors would be duplicates).
func TestConfigMetricsRegisterer(t *testing.T) {
	pool := testdb.Pool(t)
	reg := prometheus.NewRegistry()
	if _, err := workq.NewClient(pool, workq.Config{MetricsRegisterer: reg}); err != nil {
		t.Fatal(err)
	}
	// The Client's collectors are in reg: one of the same name is refused.
	dup := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "workq_worker_claimed_total",
		Help: "Items claimed by this process's workers."}, []string{"table", "queue"})
	if err := reg.Register(dup); !errors.As(err, new(prometheus.AlreadyRegisteredError)) {
		t.Errorf("workq_worker_claimed_total not registered by the Client: %v", err)
	}
	if _, err := workq.NewClient(pool, workq.Config{MetricsRegisterer: reg}); err == nil {
		t.Error("a second Client on the same registerer: no error")
	}
}

package worker_test

import (
	"errors"
	"testing"
	"time"

	"github.com/workq/workq/internal/worker"
	"github.com/workq/workq/workqtype"
)

// Config{} is a working configuration; Validate checks the worker's own
// fields only, each error naming its field and matching ErrInvalid.
func TestConfigValidate(t *testing.T) {
	cases := []struct {
		name  string
		cfg   worker.Config
		field string // "" : valid
	}{
		{"zero takes the defaults", worker.Config{}, ""},
		{"none values", worker.Config{ExecTimeout: -1, DrainTimeout: -1, RetainRuns: -1}, ""},
		{"bad queue", worker.Config{Queues: []string{"a b"}}, "Queues"},
		{"negative concurrency", worker.Config{Concurrency: -1}, "Concurrency"},
		{"per-queue concurrency", worker.Config{QueueConcurrency: map[string]int{"emails": 1, "bulk": 10000}}, ""},
		{"per-queue concurrency zero", worker.Config{QueueConcurrency: map[string]int{"emails": 0}}, "QueueConcurrency"},
		{"per-queue concurrency too big", worker.Config{QueueConcurrency: map[string]int{"emails": 10001}}, "QueueConcurrency"},
		{"per-queue concurrency bad name", worker.Config{QueueConcurrency: map[string]int{"a b": 1}}, "QueueConcurrency"},
		{"batch too big", worker.Config{Batch: 10001}, "Batch"},
		{"short lease", worker.Config{Lease: time.Millisecond}, "Lease"},
		{"fast poll", worker.Config{Poll: time.Millisecond}, "Poll"},
		{"slow flush", worker.Config{FlushInterval: 2 * time.Second}, "FlushInterval"},
		{"cap under base", worker.Config{BackoffBase: time.Minute, BackoffCap: time.Second}, "BackoffCap"},
		{"fast retention", worker.Config{RetentionInterval: time.Millisecond}, "RetentionInterval"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.cfg.Validate()
			if c.field == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			var ve *workqtype.ValidationError
			if !errors.Is(err, workqtype.ErrInvalid) || !errors.As(err, &ve) || ve.Field != c.field {
				t.Fatalf("Validate: %v, want a ValidationError on %s", err, c.field)
			}
		})
	}
}

func TestDefaultConfigIsValid(t *testing.T) {
	if err := worker.DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
}

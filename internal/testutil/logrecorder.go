package testutil

import (
	"context"
	"log/slog"
	"sync"
)

// LogRecorder is a slog.Handler that keeps every record, for tests that
// check what a component logs: slog.New(&testutil.LogRecorder{}).
type LogRecorder struct {
	mu  sync.Mutex
	got []slog.Record
}

// Enabled is true at every level: the recorder keeps everything.
func (r *LogRecorder) Enabled(context.Context, slog.Level) bool { return true }

// Handle keeps rec.
func (r *LogRecorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, rec.Clone())
	return nil
}

// WithAttrs returns r: the records are kept without the attributes.
func (r *LogRecorder) WithAttrs([]slog.Attr) slog.Handler { return r }

// WithGroup returns r.
func (r *LogRecorder) WithGroup(string) slog.Handler { return r }

// Len is how many records were kept so far (an index for Since).
func (r *LogRecorder) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.got)
}

// Since lists the records from index i on at level min or above, as
// "LEVEL message".
func (r *LogRecorder) Since(i int, min slog.Level) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, rec := range r.got[i:] {
		if rec.Level >= min {
			out = append(out, rec.Level.String()+" "+rec.Message)
		}
	}
	return out
}

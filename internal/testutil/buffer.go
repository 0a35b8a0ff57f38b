// Package testutil holds small helpers shared by tests.
package testutil

import (
	"bytes"
	"encoding/json"
	"sync"
)

// Buffer is a bytes.Buffer safe for concurrent use, for capturing the output
// of subprocesses and loggers while a test reads it.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Records parses what a slog JSON handler wrote into b: one map per line.
// Lines that are not JSON objects are skipped.
func (b *Buffer) Records() []map[string]any {
	var out []map[string]any
	for _, line := range bytes.Split([]byte(b.String()), []byte("\n")) {
		var m map[string]any
		if json.Unmarshal(line, &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

package maintain

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// A leadership whose token carries another timeline than the previous
// leadership's is logged at warn level; the first, and one on the same
// timeline, are not.
func TestNoteEpochWarnsOnChange(t *testing.T) {
	var buf bytes.Buffer
	s := &Service{log: slog.New(slog.NewTextHandler(&buf, nil))}
	for _, token := range []int64{3, 4, 1 << 32, 1<<32 + 1} {
		s.noteEpoch(token)
	}
	out := strings.TrimSpace(buf.String())
	if strings.Count(out, "\n") != 0 || !strings.Contains(out, "level=WARN") ||
		!strings.Contains(out, "maintenance: database timeline changed (failover?)") || !strings.Contains(out, "old_timeline=1 new_timeline=2") {
		t.Fatalf("log:\n%s", out)
	}
}

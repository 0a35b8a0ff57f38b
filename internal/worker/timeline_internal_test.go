package worker

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/workq/workq/internal/lease"
)

// A claim whose lease versions carry a newer timeline (their high bits)
// than earlier claims is logged once at warn level; the first claim, and
// claims on the same or an older timeline, are not.
func TestNoteTimelineWarnsOnChange(t *testing.T) {
	var buf bytes.Buffer
	w := &Worker{log: slog.New(slog.NewTextHandler(&buf, nil))}
	claims := [][]int64{{1, 7}, {9}, {1<<32 + 1, 3}, {1 << 32}, {5}, {2<<32 + 4}}
	for _, vs := range claims {
		items := make([]lease.Item, len(vs))
		for i, v := range vs {
			items[i].LeaseVersion = v
		}
		w.noteTimeline(items)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "old_timeline=1 new_timeline=2") || !strings.Contains(lines[1], "old_timeline=2 new_timeline=3") ||
		!strings.Contains(lines[0], "level=WARN") || !strings.Contains(lines[0], "database timeline changed (failover?)") {
		t.Fatalf("log:\n%s", buf.String())
	}
	if got := w.timeline.Load(); got != 3 {
		t.Fatalf("timeline %d, want 3", got)
	}
}

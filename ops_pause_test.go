package workq_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/workq/workq"
)

// TestPauseQueueNamesTheBadField: PauseQueue's refusal of who pauses or
// why says which is wrong, with the pause's own limits (the CLI prints it).
func TestPauseQueueNamesTheBadField(t *testing.T) {
	ctx := context.Background()
	for name, c := range opsClients(t) {
		for _, tc := range []struct {
			opts workq.ActionOpts
			want string
		}{
			{workq.ActionOpts{Actor: "a\xff"}, "who pauses"},
			{workq.ActionOpts{Reason: "r\x00"}, "reason must be at most 1024 bytes of UTF-8 without NUL"},
			{workq.ActionOpts{Reason: strings.Repeat("r", 1025)}, "reason must be at most 1024 bytes"},
		} {
			_, err := c.PauseQueue(ctx, workq.QueueRef{Queue: "default"}, &tc.opts)
			if !errors.Is(err, workq.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: PauseQueue: %.200v, want ErrInvalid saying %q", name, err, tc.want)
			}
		}
	}
}

package worker_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/workq/workq/internal/worker"
	"github.com/workq/workq/workqtype"
)

// CompleteTx refuses nil arguments with ErrInvalid naming them; it never
// panics (issue 28 item 4).
func TestCompleteTxRefusesNil(t *testing.T) {
	var nilCtx context.Context
	for _, tc := range []struct {
		name string
		ctx  context.Context
		job  *worker.Job
		says string
	}{
		{"nil job", context.Background(), nil, "nil job"},
		{"nil job and context", nilCtx, nil, "nil job"},
		{"nil context", nilCtx, &worker.Job{}, "nil context"},
		{"nil transaction", context.Background(), &worker.Job{}, "nil transaction"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := worker.CompleteTx(tc.ctx, nil, tc.job)
			if !errors.Is(err, workqtype.ErrInvalid) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("CompleteTx: %v, want ErrInvalid saying %s", err, tc.says)
			}
		})
	}
}

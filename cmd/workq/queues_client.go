package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/config"
)

// queueJSON is one queue as `queue list --json` and `stats --json` print
// it: the Client's QueueInfo under the names these commands have always
// printed (the oldest ready age in seconds, W as "limit", null for none).
type queueJSON struct {
	Table                workq.Table `json:"table"`
	Queue                string      `json:"queue"`
	Ready                int64       `json:"ready"`
	Scheduled            int64       `json:"scheduled"`
	InProgress           int64       `json:"in_progress"`
	Expired              int64       `json:"expired"`
	Done                 int64       `json:"done"`
	Failed               int64       `json:"failed"`
	Cancelled            int64       `json:"cancelled"`
	Pending              int64       `json:"pending"`
	OldestReadyAge       seconds     `json:"oldest_ready_age"`
	ClaimsPerSecond      float64     `json:"claims_per_second"`
	CompletionsPerSecond float64     `json:"completions_per_second"`
	Paused               bool        `json:"paused"`
	PausedAt             *time.Time  `json:"paused_at,omitempty"`
	PausedBy             string      `json:"paused_by,omitempty"`
	PauseReason          string      `json:"pause_reason,omitempty"`
	Limit                *int        `json:"limit"`
}

// seconds prints a duration as seconds with three decimals.
type seconds time.Duration

func (d seconds) MarshalJSON() ([]byte, error) {
	return []byte(fmt.Sprintf("%.3f", time.Duration(d).Seconds())), nil
}

func queuesJSON(qs []workq.QueueInfo) []queueJSON {
	out := make([]queueJSON, len(qs))
	for i, q := range qs {
		out[i] = queueJSON{Table: q.Table, Queue: q.Queue, Ready: q.Ready, Scheduled: q.Scheduled, InProgress: q.InProgress,
			Expired: q.Expired, Done: q.Done, Failed: q.Failed, Cancelled: q.Cancelled, Pending: q.Pending, OldestReadyAge: seconds(q.OldestReadyAge),
			ClaimsPerSecond: q.ClaimsPerSecond, CompletionsPerSecond: q.CompletionsPerSecond, Paused: q.Paused,
			PausedAt: q.PausedAt, PausedBy: q.PausedBy, PauseReason: q.PauseReason, Limit: q.Limit}
	}
	return out
}

// listQueues reads every queue through the Client (queue list, stats).
func listQueues(cmd *cobra.Command, cfg *config.Config) ([]workq.QueueInfo, error) {
	ctx := cmd.Context()
	client, done, err := opsClient(ctx, cfg, newLogger(cfg, cmd.ErrOrStderr()))
	if err != nil {
		return nil, err
	}
	defer done()
	return client.ListQueues(ctx)
}

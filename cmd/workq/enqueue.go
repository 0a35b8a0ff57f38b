package main

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/workq/workq"
)

func newEnqueueCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "enqueue --kind K [--queue Q] [--payload JSON] [--priority N] [--delay D | --run-at T] [--max-attempts N] [--dedup-key K] [--json]",
		Short: "Enqueue one job run and print its id",
		Args:  cobra.NoArgs,
	}
	cfg := bindConfig(cmd, "database-url", "max-attempts", "notify-debounce")
	var (
		job     workq.Job
		payload string
		runAt   string
		asJSON  bool
	)
	f := cmd.Flags()
	f.StringVar(&job.Queue, "queue", "default", "queue name")
	f.StringVar(&job.Kind, "kind", "", "job kind (selects the handler); required")
	f.StringVar(&payload, "payload", "{}", "JSON payload")
	f.Int16Var(&job.Priority, "priority", 0, "higher runs first (-32768..32767)")
	f.DurationVar(&job.Delay, "delay", 0, "run no earlier than now + delay (e.g. 30s)")
	f.StringVar(&runAt, "run-at", "", "run no earlier than this RFC 3339 time")
	f.StringVar(&job.DedupKey, "dedup-key", "", "return the live job with this key instead of adding one")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if job.Kind == "" {
			return fmt.Errorf("--kind is required")
		}
		// In Go an empty Job.Queue means "default"; given on the command
		// line, an empty --queue is a mistake (an unset variable, say).
		if job.Queue == "" {
			return fmt.Errorf("--queue must not be empty: a queue name is 1-128 of A-Z a-z 0-9 _ . : - (omit --queue for %q)", "default")
		}
		if !json.Valid([]byte(payload)) {
			return fmt.Errorf("--payload is not valid JSON: %q", payload)
		}
		job.Payload = json.RawMessage(payload)
		if f.Changed("run-at") {
			t, err := time.Parse(time.RFC3339Nano, runAt)
			if err != nil {
				return fmt.Errorf("--run-at %q is not an RFC 3339 time (e.g. 2026-01-02T15:04:05Z)", runAt)
			}
			// The zero time would mean "no --run-at" to the client.
			if t.IsZero() {
				return fmt.Errorf("--run-at %q is the zero time (0001-01-01T00:00:00Z); omit --run-at to run the job now", runAt)
			}
			job.RunAt = t
		}
		if cfg.MaxAttempts < 1 || cfg.MaxAttempts > 1000 {
			return fmt.Errorf("--max-attempts must be between 1 and 1000, got %d", cfg.MaxAttempts)
		}
		job.MaxAttempts = cfg.MaxAttempts
		client := workq.NewClient(workq.ClientOptions{NotifyDebounce: cfg.NotifyDebounce})
		if err := client.Validate(job); err != nil {
			return err
		}
		ctx := cmd.Context()
		pool, done, err := connect(ctx, cfg, newLogger(cfg, cmd.ErrOrStderr()), false)
		if err != nil {
			return err
		}
		defer done()
		res, err := client.Enqueue(ctx, pool, job)
		if err != nil {
			return err
		}
		if asJSON {
			return printJSON(cmd.OutOrStdout(), map[string]any{"id": res.ID, "duplicate": res.Duplicate})
		}
		fmt.Fprintln(cmd.OutOrStdout(), res.ID)
		return nil
	}
	return cmd
}

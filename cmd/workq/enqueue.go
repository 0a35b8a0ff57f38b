package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/config"
	"github.com/workq/workq/workqtype"
)

func newEnqueueCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "enqueue --kind K [--queue Q] [--payload JSON|@FILE|-] [--priority N] [--delay D | --run-at T] [--max-attempts N] [--dedup-key K | --unique-by-args --unique-by-queue --unique-period D --unique-states S,...] [--metadata K=V]... [--limit-key K] [--json]",
		Short: "Enqueue one job run and print its id",
		Args:  cobra.NoArgs,
	}
	cfg := bindConfig(cmd, "database-url", "max-attempts", "max-payload", "notify-debounce")
	var (
		kind     string
		job      workq.EnqueueOpts
		payload  string
		runAt    string
		asJSON   bool
		metadata []string
		states   []string
	)
	f := cmd.Flags()
	f.StringVar(&job.Queue, "queue", "default", "queue name")
	f.StringVar(&kind, "kind", "", "job kind (selects the handler); required")
	f.StringVar(&payload, "payload", "{}", "JSON object; @FILE reads it from a file, - from standard input")
	f.Int16Var(&job.Priority, "priority", 0, "higher runs first (-32768..32767)")
	f.DurationVar(&job.Delay, "delay", 0, "run no earlier than now + delay (e.g. 30s)")
	f.StringVar(&runAt, "run-at", "", "run no earlier than this RFC 3339 time")
	f.StringVar(&job.DedupKey, "dedup-key", "", "return the live job with this key instead of adding one")
	f.BoolVar(&job.Unique.ByArgs, "unique-by-args", false, "unique job: the payload is part of its key (docs/go.md, Unique jobs)")
	f.BoolVar(&job.Unique.ByQueue, "unique-by-queue", false, "unique job: the queue is part of its key")
	f.DurationVar(&job.Unique.ByPeriod, "unique-period", 0, "unique job: once per period of this length (at least 1s), e.g. 1h")
	f.StringSliceVar(&states, "unique-states", nil, "unique job: the states in which a job holds its key (default ready,in_progress,done)")
	f.StringVar(&job.LimitKey, "limit-key", "", "the key per-key flow limits and fair claims count the job by (a tenant, a customer; 1-256 bytes)")
	f.StringArrayVar(&metadata, "metadata", nil, "metadata KEY=VALUE stored with the job (repeat for more)")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if kind == "" {
			return fmt.Errorf("--kind is required")
		}
		// In Go an empty Job.Queue means "default"; given on the command
		// line, an empty --queue is a mistake (an unset variable, say).
		if job.Queue == "" {
			return fmt.Errorf("--queue must not be empty: a queue name is 1-128 of A-Z a-z 0-9 _ . : - (omit --queue for %q)", "default")
		}
		if f.Changed("limit-key") && job.LimitKey == "" {
			return fmt.Errorf("--limit-key must not be empty (omit it for a job without a limit key)")
		}
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
		for _, st := range states {
			job.Unique.ByStates = append(job.Unique.ByStates, workq.JobState(st))
		}
		var err error
		if job.Metadata, err = metadataFlag(metadata); err != nil {
			return err
		}
		raw, err := attemptsAndPayload(cmd, cfg, payload)
		if err != nil {
			return err
		}
		// The API's route for a kind named at run time: RawArgs with the
		// payload as raw JSON, checked by the Client before it writes.
		job.MaxAttempts = cfg.MaxAttempts
		args := workq.RawArgs{KindName: kind, Payload: json.RawMessage(raw)}
		ctx := cmd.Context()
		client, done, err := opsClient(ctx, cfg, newLogger(cfg, cmd.ErrOrStderr()))
		if err != nil {
			return err
		}
		defer done()
		if err := client.ValidateArgs(args, &job); err != nil {
			return err
		}
		res, err := client.Enqueue(ctx, args, &job)
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

// metadataFlag reads --metadata KEY=VALUE flags into a map.
func metadataFlag(pairs []string) (map[string]string, error) {
	if len(pairs) == 0 {
		return nil, nil
	}
	m := make(map[string]string, len(pairs))
	for _, p := range pairs {
		k, v, ok := strings.Cut(p, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--metadata %q: want KEY=VALUE", p)
		}
		if _, dup := m[k]; dup {
			return nil, fmt.Errorf("--metadata %q: key %q given twice", p, k)
		}
		m[k] = v
	}
	return m, nil
}

// readPayload returns the payload that the --payload value arg names: the
// JSON itself, @FILE for the contents of FILE, or - for standard input. It
// holds at most limit bytes: a larger file or input is measured and
// rejected with a *workqtype.PayloadTooLargeError.
// attemptsAndPayload checks --max-attempts and --max-payload, then reads
// --payload (payloadFlag): the common flags of every command that writes one
// item.
func attemptsAndPayload(cmd *cobra.Command, cfg *config.Config, arg string) ([]byte, error) {
	if cfg.MaxAttempts < 1 || cfg.MaxAttempts > 1000 {
		return nil, fmt.Errorf("--max-attempts must be between 1 and 1000, got %d", cfg.MaxAttempts)
	}
	if cfg.MaxPayload < 1 || cfg.MaxPayload > config.MaxPayloadCeiling {
		return nil, fmt.Errorf("--max-payload must be between 1 and %d bytes, got %d", config.MaxPayloadCeiling, cfg.MaxPayload)
	}
	return payloadFlag(cmd, arg, cfg.MaxPayload)
}

// payloadFlag reads --payload (a JSON object given inline, @FILE, or - for
// standard input) within limit bytes and checks it as every client does
// (workqtype.CheckPayload). Its errors name the flag and the source, and over
// the limit say where the limit comes from.
func payloadFlag(cmd *cobra.Command, arg string, limit int) ([]byte, error) {
	raw, err := readPayload(arg, cmd.InOrStdin(), limit)
	if err == nil {
		err = workqtype.CheckPayload(raw, limit)
	}
	if err == nil {
		return raw, nil
	}
	if arg == "-" || strings.HasPrefix(arg, "@") {
		err = fmt.Errorf("--payload %s: %w", arg, err)
	} else {
		err = fmt.Errorf("--payload: %w", err)
	}
	var tooLarge *workqtype.PayloadTooLargeError
	if errors.As(err, &tooLarge) {
		err = fmt.Errorf("%w (the limit is --max-payload or WORKQ_MAX_PAYLOAD)", err)
	}
	return nil, err
}

func readPayload(arg string, stdin io.Reader, limit int) ([]byte, error) {
	switch {
	case arg == "-":
		return readLimited(stdin, limit)
	case strings.HasPrefix(arg, "@"):
		name := arg[1:]
		if name == "" {
			return nil, fmt.Errorf("no file name after @ (--payload @FILE)")
		}
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		// A regular file over the limit is rejected by its size, unread.
		if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() && fi.Size() > int64(limit) {
			return nil, workqtype.CheckPayloadSize(int(min(fi.Size(), math.MaxInt)), limit)
		}
		return readLimited(f, limit)
	default:
		return []byte(arg), nil
	}
}

// readLimited reads r to its end, keeping at most limit bytes.
func readLimited(r io.Reader, limit int) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, int64(limit)+1))
	if err != nil {
		return nil, err
	}
	if len(b) <= limit {
		return b, nil
	}
	rest, err := io.Copy(io.Discard, r)
	if err != nil {
		return nil, err
	}
	return nil, workqtype.CheckPayloadSize(len(b)+int(rest), limit)
}

package worker

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/workq/workq/lease"
)

// runArchive writes, when a runs directory is configured, one directory per
// attempt: <dir>/<table>/<id>/<run_id>/ with meta.json (identity, then the
// outcome) and attempt.log (what the handler logged through Job.Logger).
// Directories are kept whatever the outcome; the worker prunes them after
// config.RetainRuns (rundir_prune.go).
type runArchive struct {
	dir string
}

type attemptRecord struct {
	file *slog.Logger // nil without a runs directory
	end  func(Result)
}

func noEnd(Result) {}

type attemptMeta struct {
	Table        lease.Table     `json:"table"`
	ID           int64           `json:"id"`
	Queue        string          `json:"queue"`
	Kind         string          `json:"kind"`
	RunID        string          `json:"run_id"`
	Attempt      int32           `json:"attempt"`
	MaxAttempts  int32           `json:"max_attempts"`
	LeaseVersion int64           `json:"lease_version"`
	OwnerToken   string          `json:"owner_token"`
	WorkerID     string          `json:"worker_id"`
	Payload      json.RawMessage `json:"payload"`
	StartedAt    time.Time       `json:"started_at"`
	FinishedAt   *time.Time      `json:"finished_at,omitempty"`
	Outcome      string          `json:"outcome,omitempty"` // done, retry, failed, snoozed, released, lease_lost
	Status       string          `json:"status,omitempty"`  // row status after the outcome was applied
	Applied      *bool           `json:"applied,omitempty"` // false: the lease was lost, the outcome discarded
	Error        string          `json:"error,omitempty"`
}

// begin opens an attempt's record. Without a runs directory it only returns
// a logger carrying the attempt's identity.
func (a *runArchive) begin(it *lease.Item, workerID string, base *slog.Logger) attemptRecord {
	if a == nil || a.dir == "" {
		return attemptRecord{end: noEnd}
	}
	dir := filepath.Join(a.dir, string(it.Table), strconv.FormatInt(it.ID, 10), it.RunID.String())
	meta := attemptMeta{
		Table: it.Table, ID: it.ID, Queue: it.Queue, Kind: it.Kind, RunID: it.RunID.String(), Attempt: it.Attempt,
		MaxAttempts: it.MaxAttempts, LeaseVersion: it.LeaseVersion, OwnerToken: it.OwnerToken.String(),
		WorkerID: workerID, Payload: it.Payload, StartedAt: time.Now().UTC(),
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		base.Warn("run archive: cannot create attempt directory", "dir", dir, "err", err)
		return attemptRecord{end: noEnd}
	}
	writeMeta(dir, meta, base)
	f, err := os.OpenFile(filepath.Join(dir, "attempt.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		base.Warn("run archive: cannot open attempt.log", "dir", dir, "err", err)
		return attemptRecord{end: noEnd}
	}
	file := slog.New(fanout{base.Handler(), slog.NewJSONHandler(f, &slog.HandlerOptions{Level: slog.LevelDebug})})
	var once sync.Once
	return attemptRecord{file: file, end: func(r Result) {
		once.Do(func() {
			fin := r.Finished.UTC()
			meta.FinishedAt = &fin
			meta.Outcome = string(r.Outcome)
			if r.Applied {
				meta.Outcome = string(r.Final()) // a retry with no attempts left is failed, as in runs.outcome
			}
			meta.Error = r.Error
			if r.Outcome != "lease_lost" {
				applied := r.Applied
				meta.Applied = &applied
				if applied {
					meta.Status = r.Status.String()
				}
			}
			writeMeta(dir, meta, base)
			_ = f.Close()
		})
	}}
}

func writeMeta(dir string, m attemptMeta, log *slog.Logger) {
	b, err := json.MarshalIndent(m, "", "  ")
	if err == nil {
		tmp := filepath.Join(dir, "meta.json.tmp")
		if err = os.WriteFile(tmp, append(b, '\n'), 0o644); err == nil {
			err = os.Rename(tmp, filepath.Join(dir, "meta.json"))
		}
	}
	if err != nil {
		log.Warn("run archive: cannot write meta.json", "dir", dir, "err", err)
	}
}

// fanout sends every record to all handlers that accept its level.
type fanout []slog.Handler

func (f fanout) Enabled(ctx context.Context, l slog.Level) bool {
	for _, h := range f {
		if h.Enabled(ctx, l) {
			return true
		}
	}
	return false
}

func (f fanout) Handle(ctx context.Context, r slog.Record) error {
	var errs []error
	for _, h := range f {
		if h.Enabled(ctx, r.Level) {
			if err := h.Handle(ctx, r.Clone()); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

func (f fanout) WithAttrs(attrs []slog.Attr) slog.Handler {
	out := make(fanout, len(f))
	for i, h := range f {
		out[i] = h.WithAttrs(attrs)
	}
	return out
}

func (f fanout) WithGroup(name string) slog.Handler {
	out := make(fanout, len(f))
	for i, h := range f {
		out[i] = h.WithGroup(name)
	}
	return out
}

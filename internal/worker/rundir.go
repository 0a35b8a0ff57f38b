package worker

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/rundir"
)

// runArchive writes, when a runs directory is configured, one directory per
// attempt: <dir>/<table>/<id>/<run_id>/ with meta.json (identity, then the
// outcome) and attempt.log (what the handler logged through Job.Logger),
// directories 0700 and files 0600 (they hold payloads and owner tokens).
// Directories are kept whatever the outcome; the worker prunes them after
// Config.RetainRuns (rundir_prune.go).
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
	meta := attemptMeta{
		Table: it.Table, ID: it.ID, Queue: it.Queue, Kind: it.Kind, RunID: it.RunID.String(), Attempt: it.Attempt,
		MaxAttempts: it.MaxAttempts, LeaseVersion: it.LeaseVersion, OwnerToken: it.OwnerToken.String(),
		WorkerID: workerID, Payload: it.Payload, StartedAt: time.Now().UTC(),
	}
	dir, err := a.runDir(it)
	if err != nil {
		base.Warn("run archive: cannot create attempt directory", "dir", a.dir, "err", err)
		return attemptRecord{end: noEnd}
	}
	writeMeta(dir, meta, base)
	f, err := rundir.OpenFile(dir, "attempt.log", os.O_CREATE|os.O_WRONLY|os.O_APPEND)
	if err != nil {
		base.Warn("run archive: cannot open attempt.log", "dir", dir.Name(), "err", err)
		dir.Close()
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
			_ = dir.Close()
		})
	}}
}

// runDir opens (making what is missing, mode 0700) the attempt's directory
// <dir>/<table>/<id>/<run_id>, through internal/rundir: never outside the
// runs directory, through no symbolic link beneath it.
func (a *runArchive) runDir(it *lease.Item) (*os.Root, error) {
	root, err := rundir.Open(a.dir, true)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	return rundir.Dir(root, true, string(it.Table), strconv.FormatInt(it.ID, 10), it.RunID.String())
}

// prepare makes the runs directory (0700) when it is missing and takes the
// group and other permissions off its table directories, which versions
// before 0700/0600 made 0755: every older attempt directory (0755, its
// files 0644) is beneath one, so it is out of other users' reach too. The
// runs directory itself is the operator's (it may be a shared mount) and
// is left as it is.
func (a *runArchive) prepare(log *slog.Logger) {
	if a == nil || a.dir == "" {
		return
	}
	root, err := rundir.Open(a.dir, true)
	if err != nil {
		log.Warn("run archive: cannot open the runs directory", "dir", a.dir, "err", err)
		return
	}
	defer root.Close()
	for _, t := range lease.Tables {
		d, err := rundir.Dir(root, false, string(t))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		var tightened bool
		if err == nil {
			tightened, err = rundir.Tighten(d)
			d.Close()
		}
		if err != nil {
			log.Warn("run archive: cannot restrict a table directory to its owner", "dir", a.dir, "table", t, "err", err)
		} else if tightened {
			log.Info("run archive: restricted a table directory to its owner (mode 0700)", "dir", a.dir, "table", t)
		}
	}
}

func writeMeta(dir *os.Root, m attemptMeta, log *slog.Logger) {
	b, err := json.MarshalIndent(m, "", "  ")
	if err == nil {
		err = rundir.WriteFile(dir, "meta.json", append(b, '\n'))
	}
	if err != nil {
		log.Warn("run archive: cannot write meta.json", "dir", dir.Name(), "err", err)
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

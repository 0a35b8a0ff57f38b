package worker

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"
)

// pruneBatch is the most attempt directories one pruning round removes, so
// a round after a long pause stays short; the next round goes on.
const pruneBatch = 1000

// pruneRuns removes the attempt directories under dir (<dir>/<table>/<id>/
// <run_id>) whose meta.json was last written more than age ago (an attempt
// rewrites it when it ends), then the item directories it left empty. It
// removes at most max attempt directories and returns how many it removed.
// Several workers sharing one runs directory may prune it at once: a
// directory gone already is not an error.
func pruneRuns(dir string, age time.Duration, max int, now time.Time) (int, error) {
	cutoff := now.Add(-age)
	removed := 0
	tables, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	var firstErr error
	for _, t := range tables {
		if !t.IsDir() {
			continue
		}
		items, err := os.ReadDir(filepath.Join(dir, t.Name()))
		if err != nil {
			firstErr = errors.Join(firstErr, err)
			continue
		}
		for _, it := range items {
			if removed >= max {
				return removed, firstErr
			}
			itemDir := filepath.Join(dir, t.Name(), it.Name())
			runs, err := os.ReadDir(itemDir)
			if err != nil || !it.IsDir() {
				continue
			}
			left := len(runs)
			for _, r := range runs {
				if removed >= max {
					break
				}
				runDir := filepath.Join(itemDir, r.Name())
				info, err := os.Stat(filepath.Join(runDir, "meta.json"))
				if err != nil || info.ModTime().After(cutoff) {
					continue // still being written, or recent
				}
				if err := os.RemoveAll(runDir); err != nil {
					firstErr = errors.Join(firstErr, err)
					continue
				}
				removed++
				left--
			}
			if left == 0 {
				_ = os.Remove(itemDir) // fails harmlessly if a new attempt just began
			}
		}
	}
	return removed, firstErr
}

// pruneRunsLoop prunes the runs directory every interval until ctx ends.
func pruneRunsLoop(ctx context.Context, dir string, age, every time.Duration, log *slog.Logger) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		n, err := pruneRuns(dir, age, pruneBatch, time.Now())
		if err != nil {
			log.Warn("pruning the runs directory", "dir", dir, "err", err)
		} else if n > 0 {
			log.Info("pruned the runs directory", "dir", dir, "removed", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

package worker

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"time"

	"github.com/workq/workq/internal/rundir"
)

// pruneBatch is the most attempt directories one pruning round removes, so
// a round after a long pause stays short; the next round goes on.
const pruneBatch = 1000

// pruneRuns removes the attempt directories under dir (<dir>/<table>/<id>/
// <run_id>) whose meta.json was last written more than age ago (an attempt
// rewrites it when it ends), then the item directories it left empty. It
// removes at most max attempt directories and returns how many it removed.
// Several workers sharing one runs directory may prune it at once: a
// directory gone already is not an error. Everything goes through
// internal/rundir: a symbolic link beneath dir is never followed (one in
// place of a table, item or attempt directory is left alone), and nothing
// outside dir is read or removed.
func pruneRuns(dir string, age time.Duration, max int, now time.Time) (int, error) {
	root, err := rundir.Open(dir, false)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer root.Close()
	tables, err := rundir.ReadDir(root)
	if err != nil {
		return 0, err
	}
	p := pruner{cutoff: now.Add(-age), max: max}
	for _, t := range tables {
		if p.removed >= max {
			break
		}
		if !t.IsDir() { // a link is not a directory here
			continue
		}
		tr, err := rundir.Dir(root, false, t.Name())
		if err != nil {
			p.err = errors.Join(p.err, err)
			continue
		}
		p.table(tr)
		tr.Close()
	}
	return p.removed, p.err
}

type pruner struct {
	cutoff       time.Time
	max, removed int
	err          error
}

// table prunes the item directories of one table directory.
func (p *pruner) table(tr *os.Root) {
	items, err := rundir.ReadDir(tr)
	if err != nil {
		p.err = errors.Join(p.err, err)
		return
	}
	for _, it := range items {
		if p.removed >= p.max {
			return
		}
		if !it.IsDir() {
			continue
		}
		ir, err := rundir.Dir(tr, false, it.Name())
		if err != nil {
			continue // gone, or replaced by a link
		}
		left := p.item(ir)
		ir.Close()
		if left == 0 {
			_ = tr.Remove(it.Name()) // fails harmlessly if a new attempt just began
		}
	}
}

// item removes the old attempt directories of one item directory and
// returns how many entries it left.
func (p *pruner) item(ir *os.Root) int {
	runs, err := rundir.ReadDir(ir)
	if err != nil {
		return -1
	}
	left := len(runs)
	for _, r := range runs {
		if p.removed >= p.max {
			break
		}
		if !r.IsDir() || !p.old(ir, r.Name()) {
			continue // a link or a file, still being written, or recent
		}
		// RemoveAll removes a link in the root, never what it points to.
		if err := ir.RemoveAll(r.Name()); err != nil {
			p.err = errors.Join(p.err, err)
			continue
		}
		p.removed++
		left--
	}
	return left
}

// old says whether the attempt directory name has a meta.json last
// written before the cutoff.
func (p *pruner) old(ir *os.Root, name string) bool {
	rr, err := rundir.Dir(ir, false, name)
	if err != nil {
		return false
	}
	defer rr.Close()
	info, err := rr.Lstat("meta.json")
	return err == nil && info.Mode().IsRegular() && !info.ModTime().After(p.cutoff)
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

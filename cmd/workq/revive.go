package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/workq/workq"
)

// reviveSpec describes an operator's command that puts failed items of one
// kind of work back to ready (`workq outbox retry`, `workq inbox revive`).
type reviveSpec struct {
	use, short string
	what       string // "outbox message": in errors
	doneKey    string // JSON key and text verb of the ids put back: "retried"
	skipKey    string // JSON key of the ids left alone: "not_failed"
	revive     func(ctx context.Context, db workq.DB, actor, reason string, ids ...int64) ([]int64, error)
}

// newReviveCmd returns the command of spec. Every id is checked before the
// database is touched; ids that are not failed (or do not exist) are left
// alone, listed, and make the command exit non-zero.
func newReviveCmd(spec reviveSpec) *cobra.Command {
	cmd := &cobra.Command{Use: spec.use, Short: spec.short, Args: cobra.MinimumNArgs(1)}
	cfg := bindConfig(cmd, "database-url")
	f := cmd.Flags()
	actor := f.String("actor", defaultActor(), "who (recorded in the run archive)")
	reason := f.String("reason", "", "why (recorded in the run archive)")
	asJSON := f.Bool("json", false, "print JSON")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		ids, err := parseIDs(args, spec.what)
		if err != nil {
			return err
		}
		if strings.TrimSpace(*actor) == "" {
			return fmt.Errorf("--actor must not be empty")
		}
		ctx := cmd.Context()
		pool, done, err := connect(ctx, cfg, newLogger(cfg, cmd.ErrOrStderr()), false)
		if err != nil {
			return err
		}
		defer done()
		got, err := spec.revive(ctx, pool, *actor, *reason, ids...)
		if err != nil {
			return err
		}
		skipped := notIn(ids, got)
		out := cmd.OutOrStdout()
		if *asJSON {
			if err := printJSON(out, map[string]any{spec.doneKey: nonNil(got), spec.skipKey: nonNil(skipped)}); err != nil {
				return err
			}
		} else {
			for _, id := range got {
				fmt.Fprintf(out, "%s %d\n", spec.doneKey, id)
			}
		}
		if len(skipped) > 0 {
			return fmt.Errorf("%d %s(s) left alone because they are not failed (or do not exist): %v", len(skipped), spec.what, skipped)
		}
		return nil
	}
	return cmd
}

// parseIDs parses item ids given as arguments; what names them in errors.
func parseIDs(args []string, what string) ([]int64, error) {
	ids := make([]int64, len(args))
	for i, a := range args {
		id, err := strconv.ParseInt(a, 10, 64)
		if err != nil || id < 1 {
			return nil, fmt.Errorf("%q is not an %s id: an id is a positive whole number", a, what)
		}
		ids[i] = id
	}
	return ids, nil
}

// notIn returns the ids of want that are not in got, in want's order.
func notIn(want, got []int64) []int64 {
	in := make(map[int64]bool, len(got))
	for _, id := range got {
		in[id] = true
	}
	var out []int64
	for _, id := range want {
		if !in[id] {
			out = append(out, id)
		}
	}
	return out
}

func nonNil(ids []int64) []int64 {
	if ids == nil {
		return []int64{}
	}
	return ids
}

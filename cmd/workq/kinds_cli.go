package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/kinds"
)

// itemKind is what the item commands know of one kind of work: its
// table, how texts name one of its items, and the texts of its verbs. The
// verbs are one implementation for every kind (newItemsListCmd,
// newItemShowCmd, newActionCmd, all through the Client); a kind whose list
// or show prints columns of its own (outbox, inbox, timers) gives them as
// hooks, and its unique verbs (send, receive, schedule, blocked, timers
// cancel) stay in its file.
//
// The registry of kinds (internal/kinds) gives each kind's command, noun,
// kind flag and retry word; kindTexts below gives the help texts and hooks
// of the four kinds that have their own. A kind with no entry there gets
// the generic verbs with texts made from its noun.
type itemKind struct {
	table    workq.Table
	command  string // its CLI command
	what     string // one item in texts: "job run"
	kindFlag string // what the table calls its kind: kind (job runs) or topic
	// The generic verbs' texts; a zero verbText: the kind has no such
	// generic verb (timers cancel is its own command).
	list, show, retry, cancel, delete verbText
	revive                            bool // retry is named revive (the inbox's dead messages)
	// Hooks: the kind's own list and show (nil: the generic ones).
	listCmd, showCmd func() *cobra.Command
}

// verbText is one verb's usage line and short help.
type verbText struct{ use, short string }

// kindTexts are the help texts and hooks of the kinds that have their
// own (the registry's fields are filled in by itemKindsOf).
var kindTexts = []itemKind{
	{table: workq.TableJobRuns, list: verbText{"list [--queue Q] [--status S] [--kind K] [--created-after T] [--created-before T] [--before ID] [--limit N] [--json]",
		"List job runs, newest first (keyset pages: --before the NEXT id printed)"},
		show: verbText{"show ID [--json]", "Show one job run with its payload and its attempts from the run archive"},
		retry: verbText{"retry ID... [--reason R] [--actor A] [--json]",
			"Put failed (or cancelled) job runs back to ready, attempts reset, recorded in the run archive"},
		cancel: verbText{"cancel ID... [--reason R] [--actor A] [--json]",
			"Cancel job runs: ready ones at once, running ones through their worker (cancelled, 'cancelled by <actor>', recorded in the run archive)"},
		delete: verbText{"delete ID... [--json]", "Delete finished (done or failed) job runs; their archived attempts stay"}},
	{table: workq.TableOutbox, listCmd: newOutboxListCmd, showCmd: newOutboxShowCmd,
		retry: verbText{"retry ID... [--reason R] [--actor A] [--json]",
			"Put failed outbox messages back to ready (attempts reset), recorded in the run archive"},
		cancel: verbText{"cancel ID... [--reason R] [--actor A] [--json]",
			"Cancel outbox messages: ready ones at once, running ones through their relay (cancelled, 'cancelled by <actor>'; a cancelled keyed message does not block its key)"},
		delete: verbText{"delete ID... [--json]",
			"Delete finished (done or failed) outbox messages; deleting a failed head lets its partition key go on"}},
	{table: workq.TableInbox, listCmd: newInboxListCmd, showCmd: newInboxShowCmd,
		retry: verbText{"revive ID... [--actor A] [--reason R] [--json]",
			"Put dead (failed) inbox messages back to ready, attempts reset, audited in the run archive"},
		cancel: verbText{"cancel ID... [--reason R] [--actor A] [--json]",
			"Cancel inbox messages: ready ones at once, running ones through their worker (cancelled, 'cancelled by <actor>', recorded in the run archive)"},
		delete: verbText{"delete ID... [--json]",
			"Delete processed or dead inbox messages; a deleted message's (source, message id) can be received again"}},
	{table: workq.TableTimers, listCmd: newTimersListCmd, showCmd: newTimersShowCmd,
		retry: verbText{"retry ID... [--reason R] [--actor A] [--json]",
			"Put failed or cancelled timers back to ready (due now, attempts reset), recorded in the run archive"},
		delete: verbText{"delete ID... [--json]", "Delete finished (done, failed or cancelled) timers; their archived attempts stay"}},
}

// itemKinds are the item commands' kinds: one per registry entry.
var itemKinds = itemKindsOf(kinds.All())

// itemKindsOf fills in each kind's registry fields over its texts (or
// generic ones made from its noun).
func itemKindsOf(all []kinds.Kind) []itemKind {
	out := make([]itemKind, 0, len(all))
	for _, k := range all {
		ik := genericTexts(k)
		for _, t := range kindTexts {
			if t.table == k.Table {
				ik = t
			}
		}
		ik.table, ik.command, ik.what, ik.kindFlag, ik.revive = k.Table, k.Name, k.Noun, k.KindLabel, k.RetryWord == "revive"
		out = append(out, ik)
	}
	return out
}

// genericTexts are the verbs' texts of a kind that has none of its own.
func genericTexts(k kinds.Kind) itemKind {
	n := k.Noun + "s"
	return itemKind{
		list: verbText{"list [--queue Q] [--status S] [--" + k.KindLabel + " T] [--before ID] [--limit N] [--json]", "List " + n + ", newest first"},
		show: verbText{"show ID [--json]", "Show one " + k.Noun + " with its payload and its attempts"},
		retry: verbText{k.RetryWord + " ID... [--reason R] [--actor A] [--json]",
			"Put failed (or cancelled) " + n + " back to ready, attempts reset, recorded in the run archive"},
		cancel: verbText{"cancel ID... [--reason R] [--actor A] [--json]", "Cancel " + n + ": ready ones at once, running ones through their worker"},
		delete: verbText{"delete ID... [--json]", "Delete finished " + n + "; their archived attempts stay"},
	}
}

// kindCommands are the commands of the kinds with verbs of their own;
// every other kind of the registry gets a command of the generic verbs.
var kindCommands = map[workq.Table]func() *cobra.Command{
	workq.TableJobRuns: newJobsCmd, workq.TableOutbox: newOutboxCmd, workq.TableInbox: newInboxCmd, workq.TableTimers: newTimersCmd,
}

// newKindCmds are the commands of every kind of the registry.
func newKindCmds() []*cobra.Command {
	var out []*cobra.Command
	for _, k := range kinds.All() {
		if f := kindCommands[k.Table]; f != nil {
			out = append(out, f())
			continue
		}
		cmd := &cobra.Command{Use: k.Name, Short: "Inspect " + k.Noun + "s and act on them"}
		cmd.AddCommand(itemCommands(k.Table)...)
		out = append(out, cmd)
	}
	return out
}

// kindOf is the entry of table t.
func kindOf(t workq.Table) itemKind {
	for _, k := range itemKinds {
		if k.table == t {
			return k
		}
	}
	panic("cmd/workq: no item kind of table " + string(t))
}

// itemCommands are the generic verbs of kind t: list, show, retry (or
// revive), cancel and delete, each the kind's hook where it has one.
func itemCommands(t workq.Table) []*cobra.Command {
	k := kindOf(t)
	var out []*cobra.Command
	switch {
	case k.listCmd != nil:
		out = append(out, k.listCmd())
	case k.list.use != "":
		out = append(out, newItemsListCmd(k))
	}
	switch {
	case k.showCmd != nil:
		out = append(out, k.showCmd())
	case k.show.use != "":
		out = append(out, newItemShowCmd(k))
	}
	if k.retry.use != "" {
		a := retryAction
		if k.revive {
			a = reviveAction
		}
		out = append(out, newActionCmd(k, k.retry, a))
	}
	if k.cancel.use != "" {
		out = append(out, newActionCmd(k, k.cancel, cancelAction))
	}
	if k.delete.use != "" {
		out = append(out, newActionCmd(k, k.delete, deleteAction))
	}
	return out
}

// parseTable reads a work table's name (queue and limit commands).
func parseTable(s string) (workq.Table, error) {
	names := make([]string, len(itemKinds))
	for i, k := range itemKinds {
		if string(k.table) == s {
			return k.table, nil
		}
		names[i] = string(k.table)
	}
	return "", fmt.Errorf("unknown work table %q (want one of %s)", s, strings.Join(names, ", "))
}

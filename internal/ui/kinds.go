package ui

import (
	"slices"
	"strings"

	"github.com/workq/workq"
)

// kindPage is what the dashboard's pages say of one kind of work (one
// work table).
type kindPage struct {
	Title      string // the items page's title and the nav's entry
	RetryLabel string // the item page's retry button
	RetryWord  string // the retry action in messages ("retry", the inbox's "revive")
}

// kindPages is the per-kind metadata of the pages, by table.
//
// TODO(kinds): from internal/kinds (the registry's title and retry word
// of each kind) once it lands; until then this one table.
var kindPages = map[workq.Table]kindPage{
	workq.TableJobRuns: {Title: "Job runs", RetryLabel: "Retry", RetryWord: "retry"},
	workq.TableOutbox:  {Title: "Outbox", RetryLabel: "Retry", RetryWord: "retry"},
	workq.TableInbox:   {Title: "Inbox", RetryLabel: "Revive", RetryWord: "revive"},
	workq.TableTimers:  {Title: "Timers", RetryLabel: "Retry", RetryWord: "retry"},
}

// kindPageOf is t's metadata (its name as the title for a table the
// table above lacks).
func kindPageOf(t workq.Table) kindPage {
	if k, ok := kindPages[t]; ok {
		return k
	}
	return kindPage{Title: string(t), RetryLabel: "Retry", RetryWord: "retry"}
}

func tableTitle(t workq.Table) string { return kindPageOf(t).Title }

// parseTable is the work table called name (workq.Tables).
func parseTable(name string) (workq.Table, bool) {
	t := workq.Table(name)
	return t, slices.Contains(workq.Tables(), t)
}

// tableList names the work tables: "job_runs, outbox, inbox and timers".
func tableList() string {
	var names []string
	for _, t := range workq.Tables() {
		names = append(names, string(t))
	}
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

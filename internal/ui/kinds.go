package ui

import (
	"slices"
	"strings"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/kinds"
)

// kindPage is what the dashboard's pages say of one kind of work (one
// work table).
type kindPage struct {
	Title      string // the items page's title and the nav's entry
	RetryLabel string // the item page's retry button
	RetryWord  string // the retry action in messages ("retry", the inbox's "revive")
}

// kindPageOf is t's metadata, from the registry of kinds (its name as
// the title for a table the registry lacks).
func kindPageOf(t workq.Table) kindPage {
	k, ok := kinds.Of(t)
	if !ok {
		return kindPage{Title: string(t), RetryLabel: "Retry", RetryWord: "retry"}
	}
	return kindPage{Title: k.Title, RetryLabel: strings.ToUpper(k.RetryWord[:1]) + k.RetryWord[1:], RetryWord: k.RetryWord}
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

// navEntry is one item page in the nav.
type navEntry struct{ Table, Title string }

// kindNav lists the item pages of every kind, in registry order.
func kindNav() []navEntry {
	var out []navEntry
	for _, k := range kinds.All() {
		out = append(out, navEntry{Table: string(k.Table), Title: k.Title})
	}
	return out
}

// tableOf reads a template's table value (a workq.Table or its name).
func tmplTable(t any) workq.Table {
	switch v := t.(type) {
	case workq.Table:
		return v
	case string:
		return workq.Table(v)
	}
	return ""
}

// kindLabel is what the table calls an item's kind, capitalised: "Kind"
// (job runs) or "Topic".
func kindLabel(t any) string {
	k, ok := kinds.Of(tmplTable(t))
	if !ok || k.KindLabel == "" {
		return "Kind"
	}
	return strings.ToUpper(k.KindLabel[:1]) + k.KindLabel[1:]
}

// ownStates are the table's own state words a filter offers beyond the
// shared ones (the inbox's processing, processed, dead).
func ownStates(t any) []string {
	k, ok := kinds.Of(tmplTable(t))
	if !ok {
		return nil
	}
	var own []string
	for _, w := range k.States {
		if !slices.Contains(kinds.StatusNames, w) {
			own = append(own, w)
		}
	}
	return own
}

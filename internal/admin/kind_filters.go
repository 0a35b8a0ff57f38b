package admin

import (
	"github.com/google/uuid"

	"github.com/workq/workq/internal/kinds"
)

// kindFilters sets a's filters of one kind's own columns from f, and says
// which one the kind k does not take (its table has not the column).
func kindFilters(k kinds.Kind, f Filter, a *kinds.PageArgs) error {
	set := func(name string, on bool, apply func()) error {
		if !on {
			return nil
		}
		if !k.Takes(name) {
			return invalid(name, "%s filters %s only, not %s", name, takers(name), k.Table)
		}
		apply()
		return nil
	}
	for _, err := range []error{
		set(kinds.FilterLimitKey, f.LimitKey != "", func() { a.LimitKey = &f.LimitKey }),
		set(kinds.FilterPartitionKey, f.PartitionKey != "", func() { a.PartitionKey = &f.PartitionKey }),
		set(kinds.FilterMessageID, f.MessageID != uuid.Nil, func() { a.MessageID = &f.MessageID }),
		set(kinds.FilterSource, f.Source != "", func() { a.Source = &f.Source }),
		set(kinds.FilterDueAfter, !f.DueAfter.IsZero(), func() { a.DueAfter = &f.DueAfter }),
		set(kinds.FilterDueBefore, !f.DueBefore.IsZero(), func() { a.DueBefore = &f.DueBefore }),
	} {
		if err != nil {
			return err
		}
	}
	return nil
}

// takers names the tables of the kinds that take filter.
func takers(filter string) string {
	out := ""
	for _, k := range kinds.All() {
		if k.Takes(filter) {
			if out != "" {
				out += ", "
			}
			out += string(k.Table)
		}
	}
	return out
}

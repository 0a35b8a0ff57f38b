package workq

import (
	"fmt"
	"strings"

	"github.com/google/uuid"

	"github.com/workq/workq/internal/kinds"
	"github.com/workq/workq/workqtype"
)

// kindFilters checks that p's filters of one table's own columns
// (LimitKey, PartitionKey, MessageID, Source, DueAfter, DueBefore) are its table's
// (the registry of kinds says which kind takes which): another table's is
// an error matching ErrInvalid naming the filter.
func (p ListParams) kindFilters() error {
	table := p.Table
	if table == "" {
		table = TableJobRuns
	}
	k, _ := kinds.Of(table)
	for _, f := range []struct {
		name string
		set  bool
	}{
		{kinds.FilterLimitKey, p.LimitKey != ""},
		{kinds.FilterPartitionKey, p.PartitionKey != ""},
		{kinds.FilterMessageID, p.MessageID != uuid.Nil},
		{kinds.FilterSource, p.Source != ""},
		{kinds.FilterDueAfter, !p.DueAfter.IsZero()},
		{kinds.FilterDueBefore, !p.DueBefore.IsZero()},
	} {
		if f.set && !k.Takes(f.name) {
			var takers []string
			for _, o := range kinds.All() {
				if o.Takes(f.name) {
					takers = append(takers, string(o.Table))
				}
			}
			return workqtype.Invalid(f.name, fmt.Sprintf("%s filters %s only, not %s", f.name, strings.Join(takers, ", "), table))
		}
	}
	return nil
}

package kinds_test

import (
	"slices"
	"testing"

	"github.com/workq/workq/internal/kinds"
	"github.com/workq/workq/workqtype"
)

// Each filter of a kind's own columns is one kind's: the job runs' limit
// key, the outbox's partition key and message id, the inbox's source,
// the timers' due time.
func TestKindFilters(t *testing.T) {
	want := map[workqtype.Table][]string{
		workqtype.TableJobRuns: {kinds.FilterLimitKey},
		workqtype.TableOutbox:  {kinds.FilterPartitionKey, kinds.FilterMessageID},
		workqtype.TableInbox:   {kinds.FilterSource},
		workqtype.TableTimers:  {kinds.FilterDueAfter, kinds.FilterDueBefore},
	}
	owner := map[string]workqtype.Table{}
	for _, k := range kinds.All() {
		if w, ok := want[k.Table]; ok && !slices.Equal(k.Filters, w) {
			t.Errorf("kind %s: Filters %v, want %v", k.Table, k.Filters, w)
		}
		for _, f := range k.Filters {
			if o, dup := owner[f]; dup {
				t.Errorf("filter %s is %s's and %s's", f, o, k.Table)
			}
			owner[f] = k.Table
			if !k.Takes(f) {
				t.Errorf("kind %s does not take its own filter %s", k.Table, f)
			}
		}
		if k.Takes("nope") {
			t.Errorf("kind %s takes an unknown filter", k.Table)
		}
	}
}

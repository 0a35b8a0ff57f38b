package test

import (
	"time"

	"github.com/google/uuid"
)

// kindFilterPlanCases are the filters of one kind's own columns that the
// item pages (<Table>Page, <Table>PageAsc) take, for their plan tests
// (fillForPlans' rows: every inbox message from source s, timers due over
// the 200000 seconds before now): a filter that many rows match walks the
// primary key; a message id is read by its unique index. A partition key
// has no index of its own (outbox_ordered_next holds only the messages not
// done): a key few rows have is found by reading the table, as the
// outbox's own list (OutboxList, `workq outbox list --key`) always did.
var kindFilterPlanCases = map[string][]struct {
	name, key string
	val       any
	index     string         // "": the primary key
	extra     map[string]any // more parameters
}{
	"outbox": {
		{"one message id", "message_id", uuid.MustParse("0190c2a4-0000-7000-8000-000000000001"), "outbox_message_id_key", nil},
	},
	"inbox": {{"one source", "source", "s", "", nil}},
	"timers": {
		{"due after", "due_after", time.Now().Add(-150000 * time.Second), "", nil},
		{"due before", "due_before", time.Now().Add(-150000 * time.Second), "", nil},
	},
}

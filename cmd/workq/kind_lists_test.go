package main

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/workq/workq/internal/testdb"
)

// TestListsDoneItemView: `outbox|inbox|timers list` and their --json
// (and show --json) read through the Client's List and Get, so a done
// item shows no last error there either (an earlier attempt's error stays
// in the row and in the attempts): before, the lists' JSON and `timers
// list` printed it. The kind's own columns are still printed: the
// partition key and key_seq, the source and payload hash, the due time
// and the status number.
func TestListsDoneItemView(t *testing.T) {
	isolateEnv(t)
	url := testdb.URL(t)
	t.Setenv("DATABASE_URL", url)
	for _, args := range [][]string{
		{"outbox", "send", "--topic", "t", "--key", "k1"},
		{"inbox", "receive", "--source", "s", "--message-id", "m"},
		{"timers", "schedule", "--topic", "t", "--in", "1h"},
	} {
		if _, err := runCLI(t, args...); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
	}
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	own := map[string][]string{
		"outbox": {`"partition_key": "k1"`, `"key_seq": 1`},
		"inbox":  {`"source": "s"`, `"received_at"`},
		"timers": {`"due_time"`, `"status": 2`},
	}
	for _, table := range []string{"outbox", "inbox", "timers"} {
		if _, err := conn.Exec(t.Context(), "update workq."+table+
			" set status = 2, attempts = 2, finished_at = now(), last_error = 'stale boom' where id = 1"); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{{table, "list"}, {table, "list", "--json"}, {table, "show", "1", "--json"}} {
			out, err := runCLI(t, args...)
			if err != nil || strings.Contains(out, "stale boom") {
				t.Errorf("%v of a done item: want no last error, got %v\n%s", args, err, out)
			}
			if args[len(args)-1] == "--json" {
				for _, w := range own[table] {
					if !strings.Contains(out, w) {
						t.Errorf("%v: want %s in\n%s", args, w, out)
					}
				}
			}
		}
	}
	if out, err := runCLI(t, "inbox", "show", "1"); err != nil || !strings.Contains(out, "payload hash: 44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a") {
		t.Errorf("inbox show: want the payload's hash, got %v\n%s", err, out)
	}
}
